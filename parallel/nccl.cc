// The NCCL collective: ranks on GPUs (rank r on device r % count). Compiled
// only where CMake finds CUDA and NCCL (no_nccl.cc otherwise), into the
// run-time plugin libverity_nccl.so (nccl_plugin.h; nccl_loader.cc loads it). It reduces the
// caller's host buffers: copy to the device, ncclAllReduce in f32, copy back.
// NCCL's ring or tree order is its own, so unlike inproc and mpi the bits
// may differ from a rank-order sum by float rounding (never by dtype: f32 only).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "parallel/collective.h"
#include "parallel/nccl_plugin.h"

namespace verity::parallel {
namespace {

std::string CudaError(const char* what, cudaError_t e) {
  return std::string("nccl: ") + what + ": " + cudaGetErrorString(e);
}

class NcclCollective : public Collective {
 public:
  NcclCollective(int rank, int size, ncclComm_t comm, cudaStream_t stream)
      : rank_(rank), size_(size), comm_(comm), stream_(stream) {}
  ~NcclCollective() override {
    if (device_buf_) cudaFree(device_buf_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  void AllReduceSum(float* x, size_t n) override {
    if (n > capacity_) {
      if (device_buf_) cudaFree(device_buf_);
      cudaMalloc(&device_buf_, n * sizeof(float));
      capacity_ = n;
    }
    cudaMemcpyAsync(device_buf_, x, n * sizeof(float), cudaMemcpyHostToDevice, stream_);
    ncclAllReduce(device_buf_, device_buf_, n, ncclFloat32, ncclSum, comm_, stream_);
    cudaMemcpyAsync(x, device_buf_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
  }
  void Barrier() override {
    float one = 0.0f;
    AllReduceSum(&one, 1);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "nccl"; }

 private:
  int rank_, size_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  float* device_buf_ = nullptr;
  size_t capacity_ = 0;
};

Result<std::unique_ptr<Collective>> MakeNccl(Collective& bootstrap, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("nccl", dtype));
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices < 1) return Status::Error(CudaError("no CUDA device", e));
  const int rank = bootstrap.rank(), size = bootstrap.size();
  e = cudaSetDevice(rank % devices);
  if (e != cudaSuccess) return Status::Error(CudaError("cudaSetDevice", e));
  // Rank 0's unique id reaches every rank as floats (one byte each, the other
  // ranks adding zeros: exact).
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return Status::Error("nccl: ncclGetUniqueId failed");
  std::vector<float> bytes(sizeof id.internal, 0.0f);
  if (rank == 0)
    for (size_t i = 0; i < bytes.size(); i++) bytes[i] = static_cast<unsigned char>(id.internal[i]);
  bootstrap.AllReduceSum(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); i++) id.internal[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]));
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
  if (r != ncclSuccess)
    return Status::Error(std::string("nccl: ncclCommInitRank (rank ") + std::to_string(rank) + " of " +
                         std::to_string(size) + ", " + std::to_string(devices) + " device(s)): " + ncclGetErrorString(r));
  cudaStream_t stream;
  e = cudaStreamCreate(&stream);
  if (e != cudaSuccess) return Status::Error(CudaError("cudaStreamCreate", e));
  return std::unique_ptr<Collective>(std::make_unique<NcclCollective>(rank, size, comm, stream));
}

}  // namespace
}  // namespace verity::parallel

extern "C" void verity_nccl_make_collective_v1(verity::parallel::Collective* bootstrap,
                                               verity::parallel::ReduceDType dtype,
                                               verity::Result<std::unique_ptr<verity::parallel::Collective>>* out) {
  *out = verity::parallel::MakeNccl(*bootstrap, dtype);
}
