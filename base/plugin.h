// Run-time plugins: shared libraries that verity opens with dlopen only when a
// run asks for what they hold (libverity_cuda.so for `--backend cuda`,
// libverity_nccl.so for `--tp-backend nccl`), so that a CPU-only run never maps
// the CUDA, cuBLAS or NCCL libraries they link (about 150 MiB resident) and a
// machine without them can still run everything else. See docs/cuda.md.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace verity::plugin {

// The directories searched for a plugin, in order. When VERITY_PLUGIN_DIR is
// set (env::PluginDir) it is the only one, so a test or a user can point at
// exactly one copy; otherwise the running executable's directory
// (/proc/self/exe), then the build tree's plugin directory compiled in
// (<build>/cli, where CMake puts the plugins next to the verity binary).
std::vector<std::string> SearchDirs();

// Returns the address of the C function `symbol` in plugin `file` (a file
// name such as "libverity_cuda.so"), opening the first copy found in
// SearchDirs() with RTLD_NOW | RTLD_LOCAL. A plugin is opened at most once per
// process and never closed (the objects it creates must outlive every use).
// Errors name the file, every path tried and dlerror(): no copy found, a copy
// that dlopen refuses (e.g. its CUDA libraries are missing), or no `symbol`.
[[nodiscard]] Result<void*> Symbol(const std::string& file, const std::string& symbol);

}  // namespace verity::plugin
