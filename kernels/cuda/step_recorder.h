// Recorded decode steps (Backend::BeginDecodeStep; docs/cuda.md, "Decode as a
// recorded graph"). Between BeginDecodeStep and EndDecodeStep the backend
// keeps its calls here, each with a signature of its arguments. At the end,
// the first step of a signature runs as issued (its uploads and plans happen
// then), the second is captured into a CUDA graph, and every later one is a
// single launch of that graph. This class keeps the calls, the signatures and
// the graphs, and decides which of the three a step gets; the backend runs
// the calls, with its own error handling. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::kernels::cuda {

class StepRecorder {
 public:
  using Tape = std::vector<std::function<void()>>;
  enum class Ending { kRunAsIssued, kCapture, kLaunchGraph };

  StepRecorder() = default;
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;
  ~StepRecorder() { DropGraphs(); }

  // A step at `pos` begins: calls are kept from now on.
  void Begin(int pos);
  [[nodiscard]] bool recording() const { return recording_; }
  [[nodiscard]] int pos() const { return pos_; }
  // Keeps a call and the signature of its arguments.
  void Keep(const int64_t* sig, size_t n, std::function<void()> call);
  // The step has a call a graph cannot hold (cuBLAS): it runs as issued.
  void Uncapturable() { capturable_ = false; }
  // Stops recording and hands over the kept calls: for a flush (a result the
  // host needs inside the step) or for the step's end.
  [[nodiscard]] Tape Stop();
  // How the step just stopped ends. `healthy`: the backend has no error (a
  // failed backend runs as issued, where its calls fill their outputs with
  // NaN). kLaunchGraph sets *graph.
  [[nodiscard]] Ending Decide(bool healthy, cudaGraphExec_t* graph);
  // Captures the step Decide asked to capture: `run_kept` runs its calls on
  // `stream` under capture and returns their error. On success the graph is
  // kept for the signature and returned; on failure (CUDA refused something
  // under capture) the signature runs as issued from now on, and the error
  // CUDA left for the next launch check is cleared.
  Status Capture(cudaStream_t stream, const std::function<Status()>& run_kept, cudaGraphExec_t* graph);
  // Graphs hold the pointers they were recorded with: all are dropped when a
  // buffer they read moves (a cache grows), and signatures start over.
  void DropGraphs();
  // Counts for the summary line.
  void CountIssued() { issued_++; }
  void CountGraphed() { graphed_++; }
  // "N decode steps launched as recorded graphs (G recorded), M run as
  // issued", or "" when no step was recorded: proof that the graphs ran. G
  // counts every capture made, dropped graphs included (a buffer that moved
  // drops them; the steps they launched still ran as graphs).
  [[nodiscard]] std::string Summary() const;

 private:
  Status CaptureImpl(cudaStream_t stream, const std::function<Status()>& run_kept, cudaGraphExec_t* graph);

  bool recording_ = false, capturable_ = true;
  int pos_ = 0;
  std::vector<int64_t> sig_;
  Tape tape_;
  std::map<std::vector<int64_t>, cudaGraphExec_t> graphs_;
  std::set<std::vector<int64_t>> seen_, uncapturable_;
  long graphed_ = 0, issued_ = 0, recorded_ = 0;
};

}  // namespace verity::kernels::cuda
