// Continuous batching: requests wait in a bounded queue, take a free KV
// slot between decode steps (their prompt prefilled into it), and leave when
// they finish or their client goes away; each step decodes every running
// sequence at once (SlotDecoder::Step). The probe's requests take the same
// path as users'. One thread runs the loop; HTTP handler threads submit Jobs
// and read their events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/slots.h"
#include "serve/metrics.h"
#include "serve/text.h"

namespace verity::serve {

struct JobParams {
  std::vector<int> prompt;
  int max_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  int logprobs = -1;  // alternatives per token; -1: none
};

// One sampled token, with its log-probability under the model (before
// temperature) and the `logprobs` most likely alternatives when asked.
struct TokenEvent {
  int token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int, float>> top;
};

enum class FinishReason { kLength, kEos, kCancelled, kError };
const char* FinishReasonName(FinishReason r);  // OpenAI's: "length", "stop", ...

struct JobEvent {
  std::optional<TokenEvent> token;  // else the job finished
  FinishReason finish = FinishReason::kLength;
  std::string error;
};

class Job {
 public:
  explicit Job(JobParams p) : params(std::move(p)), queued_at(std::chrono::steady_clock::now()) {}
  const JobParams params;
  const std::chrono::steady_clock::time_point queued_at;

  // Handler side: the next event, or nullopt when none came before `deadline`.
  std::optional<JobEvent> Next(std::chrono::steady_clock::time_point deadline);
  // Handler side: whether an event is waiting by `deadline` (it stays queued for Next).
  bool Ready(std::chrono::steady_clock::time_point deadline);
  // Handler side: stop generating (client gone, stop string reached); the
  // slot is freed before the next step.
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Scheduler side.
  void Push(JobEvent e);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  std::atomic<bool> cancelled_{false};
};

class Scheduler {
 public:
  // `queue_limit` requests may wait beyond the running ones.
  Scheduler(SlotDecoder& decoder, const TextCodec& codec, Metrics& metrics, int queue_limit);
  ~Scheduler();

  enum class Admission { kQueued, kFull, kDraining };
  // A probe's job is never refused for a full queue: health must be measured
  // most of all under load.
  Admission Submit(std::shared_ptr<Job> job, bool probe = false);
  // No more submissions (kDraining); queued and running jobs go on.
  void Drain();
  // Cancels what is left and ends the loop.
  void Stop();
  // Jobs queued or running.
  int pending() const;

 private:
  struct Running {
    std::shared_ptr<Job> job;
    int slot = 0, pos = 0, next = 0, generated = 0;
    Sampler sampler;
    std::chrono::steady_clock::time_point last;
  };
  void Loop();
  // Prefills the admitted jobs' prompts together, each into a free slot; each
  // one's first token comes from its row of logits.
  void Start(std::vector<std::shared_ptr<Job>> jobs);
  void StepRunning();
  // Samples from `logits` for `r`, emits the token or the finish; false when r finished.
  bool Advance(Running& r, float* logits);
  void Finish(Running& r, FinishReason why);
  void Publish();

  SlotDecoder& d_;
  const TextCodec& codec_;
  Metrics& metrics_;
  const int queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<Running> running_;  // touched by the loop thread only
  std::vector<int> free_slots_;   // likewise
  int active_ = 0;                // jobs queued or running (probes too)
  bool draining_ = false, stopping_ = false;
  std::vector<float> logits_;  // one row per slot: a step's or a prefill's
  std::thread thread_;
};

}  // namespace verity::serve
