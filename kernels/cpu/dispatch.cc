#include "base/env.h"
#include "kernels/cpu/backends.h"

namespace verity::kernels {

Result<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  if (name == "reference") return MakeReference();
  if (name == "fast") return WrapForCorruptionBuild(MakeFast(env::Threads()));
  return Status::Error("--backend: unknown backend '" + name + "' (expected reference or fast)");
}

}  // namespace verity::kernels
