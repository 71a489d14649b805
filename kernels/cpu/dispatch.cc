#include "base/env.h"
#include "base/plugin.h"
#include "corruptions/kernel_hooks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/backends.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_roofline.h"

namespace verity::kernels {
#if defined(VERITY_HAVE_CUDA)
namespace {

// Loads libverity_cuda.so (only now: CPU runs never map CUDA) and makes the backend.
Result<std::unique_ptr<Backend>> LoadCudaBackend(int device) {
  auto sym = plugin::Symbol(cuda::kPluginFile, cuda::kPluginSymbol);
  if (!sym.ok()) return Status::Error("--backend cuda: " + sym.status().message());
  Result<std::unique_ptr<Backend>> made = Status::Error("--backend cuda: the plugin returned nothing");
  reinterpret_cast<cuda::PluginFn> (*sym)(device, &made);
  return made;
}

}  // namespace
#endif

Result<cuda::DeviceMeasurement> MeasureCudaRoofline(const cuda::DeviceRooflineOptions& options) {
#if defined(VERITY_HAVE_CUDA)
  auto sym = plugin::Symbol(cuda::kPluginFile, cuda::kRooflineSymbol);
  if (!sym.ok()) return Status::Error("roofline --backend cuda: " + sym.status().message());
  Result<cuda::DeviceMeasurement> measured = Status::Error("roofline --backend cuda: the plugin returned nothing");
  reinterpret_cast<cuda::RooflineFn> (*sym)(&options, &measured);
  return measured;
#else
  (void)options;
  return Status::Error(
      "roofline --backend cuda: this verity was built without CUDA (no CUDA toolkit found at "
      "configure time, or -DVERITY_CUDA=OFF); see docs/cuda.md");
#endif
}

Result<std::unique_ptr<Backend>> MakeBackend(const std::string& name, int device) {
  if (name == "reference") return MakeReference();
  if (name == "fast") {
    if (const std::string cap = simd::CapError(); !cap.empty()) return Status::Error(cap);
    return corruptions::ActiveKernelHooks().WrapFast(MakeFast(env::Threads()));
  }
  if (name == "cuda") {
#if defined(VERITY_HAVE_CUDA)
    return LoadCudaBackend(device);
#else
    (void)device;
    return Status::Error(
        "--backend cuda: this verity was built without CUDA (no CUDA toolkit found at configure "
        "time, or -DVERITY_CUDA=OFF); see docs/cuda.md");
#endif
  }
  return Status::Error("--backend: unknown backend '" + name + "' (expected reference, fast or cuda)");
}

}  // namespace verity::kernels
