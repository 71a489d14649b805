// The device's own roofline, measured by the CUDA plugin: how fast one GPU
// reads its memory (a streaming kernel over a buffer far beyond its L2) and
// how many bf16 tensor-core FLOPs it does (cuBLAS GEMMs accumulating in f32).
// No CUDA types here: verity reaches it through the plugin's second export,
// and measure/device_roofline.h caches what it returns per device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::kernels::cuda {

struct DeviceRooflineOptions {
  // 4 GiB: ~70x an H200's 60 MiB L2. Smaller when the device has less than
  // twice this free.
  uint64_t buffer_bytes = uint64_t{4} << 30;
  int repetitions = 20;       // timed read passes (after one untimed)
  int gemm_n = 8192;          // the GEMMs are n x n x n, bf16 in, f32 accumulate, bf16 out
  int gemm_repetitions = 10;  // timed GEMMs (after one untimed)
};

struct DeviceMeasurement {
  std::string name;                // cudaDeviceProp::name
  std::string uuid;                // the device's UUID, 32 hex digits: its identity across reboots
  int sm_major = 0, sm_minor = 0;  // compute capability
  int sms = 0;
  double nominal_gb_s = 0;    // 2 x memory clock x bus width: the data sheet's figure
  uint64_t buffer_bytes = 0;  // what the read passes streamed, each
  int gemm_n = 0;
  std::vector<double> read_gb_s;    // one per timed pass, 1e9 bytes/s
  std::vector<double> bf16_tflops;  // one per timed GEMM, 2 n^3 / s / 1e12
};

// Measures device 0 (a few seconds). Every CUDA and cuBLAS call is checked;
// an error names the call and the step (allocation, a launch, a GEMM).
Result<DeviceMeasurement> MeasureDeviceRoofline(const DeviceRooflineOptions& options);

// The plugin's export for it (see cuda_backend.h's kPluginSymbol).
inline constexpr char kRooflineSymbol[] = "verity_cuda_roofline_v1";
using RooflineFn = void (*)(const DeviceRooflineOptions* options, Result<DeviceMeasurement>* out);

}  // namespace verity::kernels::cuda

namespace verity::kernels {
// verity's side: loads libverity_cuda.so and measures through its export; an
// error says why not (a build without CUDA, no driver, no device).
Result<cuda::DeviceMeasurement> MeasureCudaRoofline(const cuda::DeviceRooflineOptions& options);
}  // namespace verity::kernels

// Stores MeasureDeviceRoofline(*options) in *out (defined in libverity_cuda.so only).
extern "C" void verity_cuda_roofline_v1(const verity::kernels::cuda::DeviceRooflineOptions* options,
                                        verity::Result<verity::kernels::cuda::DeviceMeasurement>* out);
