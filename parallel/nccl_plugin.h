// The NCCL collective's run-time plugin, libverity_nccl.so (base/plugin.h):
// parallel/nccl.cc built as a shared library that verity dlopens only when
// `--tp-backend nccl` is asked for (nccl_loader.cc), so verity itself links
// neither CUDA nor NCCL. Internal to parallel/; callers use
// MakeNcclCollective (collective.h).
#pragma once

#include <memory>

#include "parallel/collective.h"

namespace verity::parallel::nccl {

// The plugin's file name and its one export. The suffix is the interface's
// version: change it whenever Collective or Result change shape.
inline constexpr char kPluginFile[] = "libverity_nccl.so";
inline constexpr char kPluginSymbol[] = "verity_nccl_make_collective_v2";
using PluginFn = void (*)(Collective* bootstrap, ReduceDType dtype, Result<std::unique_ptr<Collective>>* out);

}  // namespace verity::parallel::nccl

// Stores the NCCL collective over *bootstrap's ranks (or the error) in *out.
// Defined in libverity_nccl.so only.
extern "C" void verity_nccl_make_collective_v2(verity::parallel::Collective* bootstrap,
                                               verity::parallel::ReduceDType dtype,
                                               verity::Result<std::unique_ptr<verity::parallel::Collective>>* out);
