// Health is a correct answer: the coherence probe (known prompts with one
// right greedy continuation, models/*.probes.json) run through the same
// scheduler and batch as user requests. A failed round makes the server
// unhealthy (/health 503 with the question, the expected and the actual
// answer), writes one ALERT line and is counted; it never restarts or exits
// the server (a restart reproduces a wrong conversion exactly). A later
// passing round makes it healthy again. The probes file is read again every
// round, so an operator can change the questions without a restart.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/text.h"

namespace verity::serve {

struct ProbeOutcome {
  std::string prompt, expect, got;
  bool pass = false;
};

struct ProbeRound {
  int64_t unix_ms = 0;
  bool pass = false;
  std::vector<ProbeOutcome> probes;
  std::string error;  // why the round could not run (probes file unreadable, server draining)
  int passed() const;
  // "probe: passed=P/N verdict=PASS|FAIL"
  std::string Summary() const;
};

class Prober {
 public:
  Prober(Scheduler& scheduler, const TextCodec& codec, std::string probes_path, Metrics& metrics);
  ~Prober();
  // Runs one round now (every probe submitted at once) and records it.
  ProbeRound RunRound();
  // Runs a round every `seconds` on a thread of its own until Stop().
  void Every(double seconds);
  void Stop();

  bool healthy() const { return healthy_; }
  ProbeRound last() const;
  // Oldest first; the last kHistory rounds.
  std::vector<ProbeRound> history() const;
  static constexpr size_t kHistory = 1000;

 private:
  Scheduler& scheduler_;
  const TextCodec& codec_;
  const std::string path_;
  Metrics& metrics_;
  std::atomic<bool> healthy_{false};
  mutable std::mutex mu_;
  std::deque<ProbeRound> rounds_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace verity::serve
