// The CUDA backend (docs/cuda.md): the Backend interface on one NVIDIA GPU.
// Internal to kernels/; callers use MakeBackend("cuda"), which loads it from
// the run-time plugin libverity_cuda.so (base/plugin.h) through the one C
// function declared below, so verity itself links no CUDA library.
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace verity::kernels::cuda {

// Returns the backend on device `device` modulo the device count (a
// tensor-parallel rank's), or an error saying why there is none (no driver,
// no device, a device the build has no kernels for). Prints one line to
// stderr naming the device and its peak memory bandwidth ("... peak memory
// bandwidth 4800.0 GB/s"), which scripts/device-check.sh reads.
Result<std::unique_ptr<Backend>> MakeCudaBackend(int device);

// The plugin's file name and its one export. The suffix is the interface's
// version: change it whenever Backend or Result change shape.
inline constexpr char kPluginFile[] = "libverity_cuda.so";
inline constexpr char kPluginSymbol[] = "verity_cuda_make_backend_v4";
using PluginFn = void (*)(int device, Result<std::unique_ptr<Backend>>* out);

}  // namespace verity::kernels::cuda

// Stores MakeCudaBackend(device)'s result in *out (defined in libverity_cuda.so only).
extern "C" void verity_cuda_make_backend_v4(int device, verity::Result<std::unique_ptr<verity::kernels::Backend>>* out);
