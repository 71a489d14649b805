// The NCCL collective: ranks on GPUs (rank r on device r % count). Compiled
// only where CMake finds CUDA and NCCL (no_nccl.cc otherwise), into the
// run-time plugin libverity_nccl.so (nccl_plugin.h; nccl_loader.cc loads it). It reduces the
// caller's host buffers (copy to the device, ncclAllReduce in f32, copy back)
// and a device backend's state in place, on that backend's stream.
// NCCL's ring or tree order is its own, so unlike inproc and mpi the bits
// may differ from a rank-order sum by float rounding (never by dtype: f32 only).
// Every CUDA and NCCL call is checked (base/cuda_check.h, nccl_check.h).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/cuda_check.h"
#include "parallel/collective.h"
#include "parallel/nccl_check.h"
#include "parallel/nccl_plugin.h"

namespace verity::parallel {
namespace {

class NcclCollective : public Collective {
 public:
  NcclCollective(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}
  ~NcclCollective() override {
    if (device_buf_) VERITY_CUDA_CALL_LOG(cudaFree(device_buf_), Where("teardown"));
    if (comm_) VERITY_NCCL_CALL_LOG(ncclCommDestroy(comm_), Where("teardown"));
    if (stream_) VERITY_CUDA_CALL_LOG(cudaStreamDestroy(stream_), Where("teardown"));
  }

  // Creates the stream and joins the communicator `id` names (every rank at once).
  Status Init(const ncclUniqueId& id) {
    VERITY_CUDA_CALL(cudaSetDevice(device_), Where("set-up"));
    VERITY_CUDA_CALL(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), Where("set-up"));
    // comm_ is set only once the communicator exists (the destructor frees it).
    ncclComm_t comm = nullptr;
    VERITY_NCCL_CALL(ncclCommInitRank(&comm, size_, id, rank_), Where("set-up"));
    comm_ = comm;
    return OkStatus();
  }

  // A failed reduce cannot be returned: every rank is inside a step, and one
  // that went on would compute from a partial sum. It is printed, naming the
  // call, and the process exits 1 (under mpirun, that ends every rank).
  void AllReduceSum(float* x, size_t n) override {
    const Status s = Reduce(x, n);
    if (s.ok()) return;
    std::fprintf(stderr, "verity: error: %s\n", s.message().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  // x is device memory of this rank's device (a device backend's state):
  // reduced in place on the caller's stream, which orders it after the
  // backend's work that wrote x and before the work that reads it; nothing
  // waits on the host. A failure is fatal, as above.
  bool reduces_device_memory() const override { return true; }
  void AllReduceSumOnDevice(float* x, size_t n, void* stream) override {
    const Status s = ReduceOnDevice(x, n, static_cast<cudaStream_t>(stream));
    if (s.ok()) return;
    std::fprintf(stderr, "verity: error: %s\n", s.message().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  void Barrier() override {
    float one = 0.0f;
    AllReduceSum(&one, 1);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "nccl"; }

 private:
  std::string Where(const std::string& what) const {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " on device " + std::to_string(device_) +
           ", " + what;
  }

  Status Reduce(float* x, size_t n) {
    // The calling thread may not be the one that set the rank up (in-process
    // ranks serve on their own threads), and the device is per thread.
    VERITY_CUDA_CALL(cudaSetDevice(device_), Where("all-reduce"));
    if (n > capacity_) {
      if (device_buf_) VERITY_CUDA_CALL(cudaFree(device_buf_), Where("all-reduce"));
      device_buf_ = nullptr;
      VERITY_CUDA_CALL(cudaMalloc(&device_buf_, n * sizeof(float)), Where("all-reduce of " + std::to_string(n)));
      capacity_ = n;
    }
    VERITY_CUDA_CALL(cudaMemcpyAsync(device_buf_, x, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
                     Where("all-reduce"));
    VERITY_NCCL_CALL(ncclAllReduce(device_buf_, device_buf_, n, ncclFloat32, ncclSum, comm_, stream_),
                     Where("all-reduce of " + std::to_string(n) + " floats"));
    VERITY_CUDA_CALL(cudaMemcpyAsync(x, device_buf_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                     Where("all-reduce"));
    VERITY_CUDA_CALL(cudaStreamSynchronize(stream_), Where("all-reduce of " + std::to_string(n) + " floats"));
    // A peer's failure reaches this rank as the communicator's asynchronous error.
    ncclResult_t async = ncclSuccess;
    VERITY_NCCL_CALL(ncclCommGetAsyncError(comm_, &async), Where("all-reduce"));
    if (async != ncclSuccess)
      return Status::Error("nccl: " + Where("all-reduce") + ": the communicator failed: " + ncclGetErrorString(async));
    return OkStatus();
  }

  Status ReduceOnDevice(float* x, size_t n, cudaStream_t stream) {
    // The state must live on this rank's device (a backend on another one
    // would hand NCCL memory its communicator cannot reduce): refused by name.
    cudaPointerAttributes at{};
    VERITY_CUDA_CALL(cudaPointerGetAttributes(&at, x), Where("all-reduce on the device"));
    if (at.type != cudaMemoryTypeDevice || at.device != device_)
      return Status::Error("nccl: " + Where("all-reduce on the device") + ": the backend's state is " +
                           (at.type == cudaMemoryTypeDevice ? "on device " + std::to_string(at.device)
                                                            : std::string("not device memory")) +
                           ", not this rank's device");
    int previous = 0;
    VERITY_CUDA_CALL(cudaGetDevice(&previous), Where("all-reduce on the device"));
    VERITY_CUDA_CALL(cudaSetDevice(device_), Where("all-reduce on the device"));
    VERITY_NCCL_CALL(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm_, stream),
                     Where("all-reduce of " + std::to_string(n) + " device floats"));
    // Enqueued, not finished: a peer's failure that is already known is
    // reported here; a later one surfaces at the next reduce or the
    // backend's next synchronizing call (its logits download).
    ncclResult_t async = ncclSuccess;
    VERITY_NCCL_CALL(ncclCommGetAsyncError(comm_, &async), Where("all-reduce on the device"));
    if (async != ncclSuccess)
      return Status::Error("nccl: " + Where("all-reduce on the device") +
                           ": the communicator failed: " + ncclGetErrorString(async));
    VERITY_CUDA_CALL(cudaSetDevice(previous), Where("all-reduce on the device"));  // the backend's own
    return OkStatus();
  }

  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* device_buf_ = nullptr;
  size_t capacity_ = 0;
};

// Rank 0's unique id, sent to every rank as floats through `bootstrap` (one
// byte each, the other ranks adding zeros: exact). The last float says
// whether rank 0 made one: it takes part in the exchange either way, so no
// rank waits for a rank that has already given up.
Status ShareUniqueId(Collective& bootstrap, ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  const size_t n = sizeof id->internal;
  std::vector<float> bytes(n + 1, 0.0f);
  Status made = OkStatus();
  if (bootstrap.rank() == 0) {
    made = [&]() -> Status {
      VERITY_NCCL_CALL(ncclGetUniqueId(id), "rank 0, set-up");
      return OkStatus();
    }();
    for (size_t i = 0; i < n; i++) bytes[i] = static_cast<unsigned char>(id->internal[i]);
    bytes[n] = made.ok() ? 0.0f : 1.0f;
  }
  bootstrap.AllReduceSum(bytes.data(), bytes.size());
  VERITY_RETURN_IF_ERROR(made);
  if (bytes[n] != 0.0f) return Status::Error("nccl: rank 0 could not make the communicator's unique id");
  for (size_t i = 0; i < n; i++) id->internal[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]));
  return OkStatus();
}

// Rank 0's line saying which NCCL and which device the collective runs on.
Status PrintSetUp(int size, int devices) {
  int version = 0, device = 0;
  VERITY_NCCL_CALL(ncclGetVersion(&version), "rank 0, set-up");
  VERITY_CUDA_CALL(cudaGetDevice(&device), "rank 0, set-up");
  cudaDeviceProp prop;
  VERITY_CUDA_CALL(cudaGetDeviceProperties(&prop, device), "rank 0, set-up");
  std::fprintf(stderr, "nccl: %d rank(s) over %d device(s) here, NCCL %d.%d.%d, rank 0 on device %d (%s)\n", size,
               devices, version / 10000, version / 100 % 100, version % 100, device, prop.name);
  return OkStatus();
}

Result<std::unique_ptr<Collective>> MakeNccl(Collective& bootstrap, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("nccl", dtype));
  const int rank = bootstrap.rank(), size = bootstrap.size();
  int devices = 0;
  VERITY_CUDA_CALL(cudaGetDeviceCount(&devices), "rank " + std::to_string(rank) + ", set-up");
  if (devices < 1) return Status::Error("nccl: no CUDA device (cudaGetDeviceCount found 0)");
  // In-process ranks share this host, and NCCL (since 2.5) refuses two ranks
  // of one communicator on one GPU ("Duplicate GPU detected"): say so plainly,
  // before any rank joins. Ranks under MPI may live on other hosts; NCCL
  // checks those, and its message is passed on.
  if (std::strcmp(bootstrap.name(), "inproc") == 0 && size > devices)
    return Status::Error("nccl: --tp " + std::to_string(size) + " in-process ranks need " + std::to_string(size) +
                         " CUDA devices, one per rank (NCCL refuses two ranks of one communicator on one GPU); " +
                         "this machine has " + std::to_string(devices));
  auto coll = std::make_unique<NcclCollective>(rank, size, rank % devices);
  ncclUniqueId id;
  VERITY_RETURN_IF_ERROR(ShareUniqueId(bootstrap, &id));
  VERITY_RETURN_IF_ERROR(coll->Init(id));
  if (rank == 0) VERITY_RETURN_IF_ERROR(PrintSetUp(size, devices));
  return std::unique_ptr<Collective>(std::move(coll));
}

}  // namespace
}  // namespace verity::parallel

extern "C" void verity_nccl_make_collective_v2(verity::parallel::Collective* bootstrap,
                                               verity::parallel::ReduceDType dtype,
                                               verity::Result<std::unique_ptr<verity::parallel::Collective>>* out) {
  *out = verity::parallel::MakeNccl(*bootstrap, dtype);
}
