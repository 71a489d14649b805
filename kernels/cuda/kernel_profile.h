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

class KernelProfile {
 public:
  explicit KernelProfile(cudaStream_t stream) : stream_(stream) {}
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;
  ~KernelProfile();

  // Before a call's launches on the stream.
  void Begin();
  // After them: `label` names the kind and shape, `bytes` what it reads and
  // writes at least (0: not counted).
  void End(const std::string& label, double bytes);
  // A decode step began (the table's per-token column divides by these).
  void CountStep() { steps_++; }
  // Waits for the stream, reads every pair and returns the table:
  // "verity: cuda profile: ..." lines, the largest share first; each kind's
  // first call is shown apart and left out of its mean, share and per-step time.
  std::string Table();

 private:
  struct Pending {
    cudaEvent_t begin, end;
    std::string label;
    double bytes;
  };
  // A kind's first call apart: it pays one-time costs (a weight's upload,
  // cuBLAS loading its kernels) that would swamp the mean of the rest.
  struct Row {
    long calls = 0;
    double ms = 0, bytes = 0, first_ms = 0;
  };
  cudaEvent_t Event();
  void Resolve();  // reads the pending pairs (after a wait) and returns their events to the pool

  cudaStream_t stream_;
  cudaEvent_t open_ = nullptr;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> pool_;
  std::map<std::string, Row> rows_;
  long steps_ = 0;
  bool failed_ = false;  // an event call failed: no table (the reason is printed once)
};

// "layer 3 matmul rows=64 ... pos=7": the layer and any position dropped, so
// every layer's call of one shape shares a row.
std::string ProfileLabel(const std::string& where);

}  // namespace verity::kernels::cuda
