// The one collective interface tensor parallelism reduces through, and its
// implementations: in-process (threads sharing memory), MPI (one process per
// rank, `mpirun -np N`), NCCL (GPUs; bootstrapped through another
// collective). Every rank of a group calls every collective in the same order
// with the same sizes; each call returns when every rank's result is ready.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::parallel {

// The element type a collective reduces in. The residual stream is f32 and a
// reduce must not round it: set-up refuses anything else (before weights load).
enum class ReduceDType { kF32, kBF16 };
const char* ReduceDTypeName(ReduceDType t);

class Collective {
 public:
  virtual ~Collective() = default;
  // x[i] <- the sum over ranks of x[i], on every rank. The in-process and MPI
  // implementations add the ranks' values in rank order (0, 1, ..., size-1),
  // so every rank reads the same bits and reruns reproduce them.
  virtual void AllReduceSum(float* x, size_t n) = 0;
  // Whether AllReduceSumOnDevice takes device memory (NCCL): a device
  // backend's state is then reduced where it lies.
  [[nodiscard]] virtual bool reduces_device_memory() const { return false; }
  // AllReduceSum of n floats of this rank's device memory (a device backend's
  // state), queued on `stream` (a cudaStream_t: Backend::device_stream) after
  // the work already queued there and before any queued later, with no wait
  // on the host. Only where reduces_device_memory(); this default (every
  // other collective) prints that it cannot and exits 1, as a failed reduce
  // does, since every rank is inside a step.
  virtual void AllReduceSumOnDevice(float* x, size_t n, void* stream);
  // Returns once every rank has called Barrier.
  virtual void Barrier() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "inproc", "mpi" or "nccl".
  virtual const char* name() const = 0;
};

// Returns an error unless `dtype` is f32 (naming `backend` and the dtype).
Status CheckReduceDType(const std::string& backend, ReduceDType dtype);

// `size` in-process ranks; Rank(r) is rank r's collective, to be used by one
// thread each. The group must outlive its ranks' use.
class InProcGroup {
 public:
  // Errors: size < 1, or a dtype other than f32.
  static Result<std::unique_ptr<InProcGroup>> Create(int size, ReduceDType dtype);
  ~InProcGroup();
  Collective& Rank(int r);
  int size() const;
  struct Shared;  // the barrier and buffers the ranks share (collective.cc)

 private:
  InProcGroup() = default;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Collective>> ranks_;
};

// Whether this build has the MPI collective (found by CMake's FindMPI).
bool HaveMpi();
// This process's rank in MPI_COMM_WORLD (initializing MPI on first use).
// Errors: no MPI in this build, a dtype other than f32, or a world size other
// than `expected_size`. MPI is finalized when the collective is destroyed.
Result<std::unique_ptr<Collective>> MakeMpiCollective(int expected_size, ReduceDType dtype);

// Whether this build has the NCCL collective (CUDA and NCCL found by CMake).
bool HaveNccl();
// A NCCL communicator over the ranks of `bootstrap` (in-process or MPI), rank
// r on GPU r % device count; the unique id travels through bootstrap.
// Reduces host buffers (copied to the device and back) and, in place, device
// memory on the caller's stream (AllReduceSumOnDevice). Errors: no NCCL in this build, no GPU, a dtype other
// than f32 (refused before any device is touched), a NCCL or CUDA failure.
Result<std::unique_ptr<Collective>> MakeNcclCollective(Collective& bootstrap, ReduceDType dtype);

// A collective that counts the calls made through it (the guards read it).
class CountingCollective : public Collective {
 public:
  explicit CountingCollective(Collective& inner) : inner_(inner) {}
  void AllReduceSum(float* x, size_t n) override {
    reduces_++;
    inner_.AllReduceSum(x, n);
  }
  bool reduces_device_memory() const override { return inner_.reduces_device_memory(); }
  void AllReduceSumOnDevice(float* x, size_t n, void* stream) override {
    reduces_++;
    inner_.AllReduceSumOnDevice(x, n, stream);
  }
  void Barrier() override { inner_.Barrier(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return inner_.name(); }
  long reduces() const { return reduces_; }

 private:
  Collective& inner_;
  long reduces_ = 0;
};

// The start-up check every rank runs: rank r contributes r + 1 in each of
// `n` elements; every rank must read size(size+1)/2 in every element. The
// ranks then agree on the outcome (a second reduce of failure counts), so
// every rank returns the same verdict. Returns an error naming the rank,
// element and value read on failure.
Status CheckAllReduce(Collective& c, size_t n = 4096);

}  // namespace verity::parallel
