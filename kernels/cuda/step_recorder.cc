// See step_recorder.h.
#include "kernels/cuda/step_recorder.h"

#include <cstdio>
#include <utility>

#include "kernels/cuda/check.h"

namespace verity::kernels::cuda {

void StepRecorder::Begin(int pos) {
  recording_ = true;
  capturable_ = true;
  pos_ = pos;
  sig_.clear();
  tape_.clear();
}

void StepRecorder::Keep(const int64_t* sig, size_t n, std::function<void()> call) {
  sig_.insert(sig_.end(), sig, sig + n);
  tape_.push_back(std::move(call));
}

StepRecorder::Tape StepRecorder::Stop() {
  recording_ = false;
  Tape tape = std::move(tape_);
  tape_.clear();
  return tape;
}

StepRecorder::Ending StepRecorder::Decide(bool healthy, cudaGraphExec_t* graph) {
  if (!healthy || !capturable_ || uncapturable_.count(sig_)) return Ending::kRunAsIssued;
  if (auto it = graphs_.find(sig_); it != graphs_.end()) {
    *graph = it->second;
    return Ending::kLaunchGraph;
  }
  if (seen_.insert(sig_).second) return Ending::kRunAsIssued;  // the first time: as issued
  return Ending::kCapture;
}

Status StepRecorder::Capture(cudaStream_t stream, const std::function<Status()>& run_kept, cudaGraphExec_t* graph) {
  Status made = CaptureImpl(stream, run_kept, graph);
  if (made.ok()) {
    graphs_.emplace(sig_, *graph);
    recorded_++;
    return made;
  }
  uncapturable_.insert(sig_);
  // Reading the last error clears it; what it says is already in `made`.
  const Status cleared = []() -> Status {
    VERITY_CUDA_CALL(cudaGetLastError(), "clearing a refused capture's error");
    return OkStatus();
  }();
  (void)cleared;
  return made;
}

Status StepRecorder::CaptureImpl(cudaStream_t stream, const std::function<Status()>& run_kept, cudaGraphExec_t* graph) {
  VERITY_CUDA_CALL(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "recording a decode step");
  Status made = run_kept();
  cudaGraph_t recorded = nullptr;
  VERITY_CUDA_CALL(cudaStreamEndCapture(stream, &recorded), "recording a decode step");
  if (made.ok()) {
    made = [&]() -> Status {
      VERITY_CUDA_CALL(cudaGraphInstantiate(graph, recorded, 0), "instantiating a decode step's graph");
      return OkStatus();
    }();
  }
  VERITY_CUDA_CALL_LOG(cudaGraphDestroy(recorded), "a recorded decode step");
  return made;
}

void StepRecorder::DropGraphs() {
  for (auto& [sig, exec] : graphs_) VERITY_CUDA_CALL_LOG(cudaGraphExecDestroy(exec), "a decode step's graph");
  graphs_.clear();
  seen_.clear();
}

std::string StepRecorder::Summary() const {
  if (graphed_ + issued_ == 0) return "";
  char line[160];
  std::snprintf(line, sizeof line, "%ld decode steps launched as recorded graphs (%ld recorded), %ld run as issued",
                graphed_, recorded_, issued_);
  return line;
}

}  // namespace verity::kernels::cuda
