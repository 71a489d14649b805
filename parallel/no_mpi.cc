// A build without MPI (CMake's FindMPI found none): the MPI collective is refused by name.
#include "parallel/collective.h"

namespace verity::parallel {

bool HaveMpi() { return false; }

Result<std::unique_ptr<Collective>> MakeMpiCollective(int, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("mpi", dtype));
  return Status::Error(
      "--tp-backend mpi: this verity was built without MPI (install libopenmpi-dev and "
      "openmpi-bin, scripts/setup.sh, and reconfigure)");
}

}  // namespace verity::parallel
