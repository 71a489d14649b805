// The exports of libverity_cuda.so, the CUDA backend's run-time plugin:
// verity dlopens the library only for `--backend cuda` (kernels/cpu/dispatch.cc,
// and `verity roofline --backend cuda`), so CPU-only runs never load CUDA.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_roofline.h"

namespace cu = verity::kernels::cuda;

// Its signature is checked against the declaration in cuda_backend.h (which
// the loader casts to cuda::PluginFn); the name against plugin.map.
extern "C" void verity_cuda_make_backend_v4(int device,
                                            verity::Result<std::unique_ptr<verity::kernels::Backend>>* out) {
  *out = cu::MakeCudaBackend(device);
}

extern "C" void verity_cuda_roofline_v1(const cu::DeviceRooflineOptions* options,
                                        verity::Result<cu::DeviceMeasurement>* out) {
  *out = cu::MeasureDeviceRoofline(*options);
}
