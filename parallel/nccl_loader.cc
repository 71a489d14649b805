// A build with CUDA and NCCL: the NCCL collective lives in the run-time plugin
// libverity_nccl.so (nccl_plugin.h), loaded here on first use only.
#include "base/plugin.h"
#include "parallel/collective.h"
#include "parallel/nccl_plugin.h"

namespace verity::parallel {

bool HaveNccl() { return true; }

Result<std::unique_ptr<Collective>> MakeNcclCollective(Collective& bootstrap, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("nccl", dtype));  // refused before any library is loaded
  auto sym = plugin::Symbol(nccl::kPluginFile, nccl::kPluginSymbol);
  if (!sym.ok()) return Status::Error("--tp-backend nccl: " + sym.status().message());
  Result<std::unique_ptr<Collective>> made = Status::Error("--tp-backend nccl: the plugin returned nothing");
  reinterpret_cast<nccl::PluginFn> (*sym)(&bootstrap, dtype, &made);
  return made;
}

}  // namespace verity::parallel
