// The CUDA backend (docs/cuda.md): the Backend interface on one NVIDIA GPU.
// Internal to kernels/; callers use MakeBackend("cuda").
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace verity::kernels::cuda {

// Returns the backend on device 0, or an error saying why there is none
// (no driver, no device, a device the build has no kernels for). Prints one
// line to stderr naming the device and its peak memory bandwidth
// ("... peak memory bandwidth 4800.0 GB/s"), which scripts/device-check.sh reads.
Result<std::unique_ptr<Backend>> MakeCudaBackend();

}  // namespace verity::kernels::cuda
