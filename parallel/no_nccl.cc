// A build without CUDA and NCCL: the NCCL collective is refused by name.
#include "parallel/collective.h"

namespace verity::parallel {

bool HaveNccl() { return false; }

Result<std::unique_ptr<Collective>> MakeNcclCollective(Collective&, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("nccl", dtype));
  return Status::Error("nccl: this verity was built without CUDA and NCCL (CMake found none)");
}

}  // namespace verity::parallel
