// The MPI collective: one process per rank (`mpirun -np N`). Compiled only
// when CMake's FindMPI finds MPI (no_mpi.cc otherwise).
//
// The sum is an MPI_Allgather followed by a local sum in rank order, not
// MPI_Allreduce: the standard lets MPI_Allreduce add in any order (and
// OpenMPI's algorithms differ by message size), while the rank-order sum gives
// every rank the same bits, the same bits as the in-process collective, and
// the same bits on every run. The cost is tp x n floats per call; the tensors
// reduced here are one residual row wide.
#include <mpi.h>

#include <cstring>

#include "parallel/collective.h"

namespace verity::parallel {
namespace {

class MpiCollective : public Collective {
 public:
  MpiCollective(int rank, int size) : rank_(rank), size_(size) {}
  ~MpiCollective() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  void AllReduceSum(float* x, size_t n) override {
    if (size_ == 1) return;
    gathered_.resize(n * size_);
    MPI_Allgather(x, static_cast<int>(n), MPI_FLOAT, gathered_.data(), static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
      float sum = gathered_[i];
      for (int r = 1; r < size_; r++) sum += gathered_[static_cast<size_t>(r) * n + i];
      x[i] = sum;
    }
  }
  void Barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

 private:
  int rank_, size_;
  std::vector<float> gathered_;
};

}  // namespace

bool HaveMpi() { return true; }

Result<std::unique_ptr<Collective>> MakeMpiCollective(int expected_size, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("mpi", dtype));
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return Status::Error("mpi: MPI_Init failed");
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto c = std::make_unique<MpiCollective>(rank, size);  // finalizes MPI, error or not
  if (size != expected_size)
    return Status::Error("--tp " + std::to_string(expected_size) + " --tp-backend mpi: the MPI world has " +
                         std::to_string(size) + " process(es); run under mpirun -np " + std::to_string(expected_size) +
                         ", or give --tp " + std::to_string(size));
  return std::unique_ptr<Collective>(std::move(c));
}

}  // namespace verity::parallel
