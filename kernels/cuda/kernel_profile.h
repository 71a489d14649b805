// Device time per kind of call (VERITY_CUDA_PROFILE=1; docs/cuda.md,
// "Profile"). The backend brackets each call it runs with two events on its
// stream; at the end the pairs are read and summed by label (the call's
// operation and shape, the layer dropped), with the bytes the call must move
// at least, so each row gives its achieved GB/s. Steps run as issued while
// profiling (no graphs): the table is where the device time goes, and the
// sum against the wall time per token is what launches cost.
// Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace verity::kernels::cuda {

// The table's arithmetic, apart from the events (tested on the CPU): calls
// summed by label; one-time costs set apart, since they would swamp the mean
// of the rest: a kind's first call (cuBLAS loading its kernels) and every
// call that uploaded a matrix. Each layer's call of one shape shares a row,
// so a prompt run first in a process uploads every layer's weights in that
// row's calls after the first: counted in the mean, they once made a
// prompt's GEMMs read ~10 GB/s (the H200 run of 2026-12-04).
class ProfileTable {
 public:
  // One call: `label` (ProfileLabel's), its device ms, the bytes it moves at
  // least (0: not counted), whether it uploaded a copy of the model's.
  void Add(const std::string& label, double ms, double bytes, bool uploaded);
  // "verity: cuda profile: ..." lines, the largest share first; `steps`
  // steps (decode steps and batched passes) divide the per-step column.
  // Empty when nothing was added.
  std::string Text(long steps) const;

 private:
  struct Row {
    long calls = 0, apart = 0;
    double ms = 0, bytes = 0, apart_ms = 0;
  };
  std::map<std::string, Row> rows_;
};

class KernelProfile {
 public:
  explicit KernelProfile(cudaStream_t stream) : stream_(stream) {}
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;
  ~KernelProfile();

  // Before a call's launches on the stream.
  void Begin();
  // After them: `label` names the kind and shape, `bytes` what it reads and
  // writes at least (0: not counted); `uploaded`: the call uploaded a copy
  // of the model's (its first use of a matrix), so it is set apart.
  void End(const std::string& label, double bytes, bool uploaded = false);
  // A decode step or a batched pass began (the table's per-step column
  // divides by these; a batched pass is counted at its first layer's attention).
  void CountStep() { steps_++; }
  // Waits for the stream, reads every pair and returns ProfileTable's text.
  std::string Table();

 private:
  struct Pending {
    cudaEvent_t begin, end;
    std::string label;
    double bytes;
    bool uploaded;
  };
  cudaEvent_t Event();
  void Resolve();  // reads the pending pairs (after a wait) and returns their events to the pool

  cudaStream_t stream_;
  cudaEvent_t open_ = nullptr;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> pool_;
  ProfileTable table_;
  long steps_ = 0;
  bool failed_ = false;  // an event call failed: no table (the reason is printed once)
};

// "layer 3 matmul rows=64 ... pos=7": the layer and any position dropped, so
// every layer's call of one shape shares a row.
std::string ProfileLabel(const std::string& where);

}  // namespace verity::kernels::cuda
