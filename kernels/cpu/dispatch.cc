#include "base/env.h"
#include "kernels/cpu/backends.h"
#if defined(VERITY_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace verity::kernels {

Result<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  if (name == "reference") return MakeReference();
  if (name == "fast") return WrapForCorruptionBuild(MakeFast(env::Threads()));
  if (name == "cuda") {
#if defined(VERITY_HAVE_CUDA)
    return cuda::MakeCudaBackend();
#else
    return Status::Error("--backend cuda: this verity was built without CUDA (no CUDA toolkit found at configure "
                         "time, or -DVERITY_CUDA=OFF); see docs/cuda.md");
#endif
  }
  return Status::Error("--backend: unknown backend '" + name + "' (expected reference, fast or cuda)");
}

}  // namespace verity::kernels
