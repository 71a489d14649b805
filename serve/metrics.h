// What /metrics reports, in the Prometheus text format (version 0.0.4):
// counters, gauges and histograms, each updated by the thread that knows the
// fact (the HTTP handlers, the scheduler, the prober) under one lock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace verity::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // The Prometheus lines of `name` (_bucket{le=...}, _sum, _count).
  std::string Render(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void Request(const std::string& endpoint, int status);
  void Tokens(int prompt, int generated);
  void FirstToken(double seconds);
  void InterToken(double seconds);
  void Gauges(int queue_depth, int running, int slots_in_use, int slots_total);
  // One batched decode step of `rows` sequences: sets the running batch
  // size, counts the step and its rows, and keeps the largest step, so a
  // reader (and the batch-invariance test) can tell that batching happened.
  // `seconds`: the step's time in the engine, so /metrics says where the
  // scheduler's time goes (and a reader can divide rows by seconds: the
  // aggregate decode rate, prefills apart).
  void DecodeStep(int rows, double seconds);
  // One prefill of `prompts` prompts admitted together (one batched pass per
  // block of positions): counts it, its prompts and its time in the engine.
  void Prefill(int prompts, double seconds);
  void Probe(bool pass);
  void Healthy(bool healthy);
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, probe_passes_ = 0, probe_failures_ = 0;
  int queue_ = 0, running_ = 0, slots_used_ = 0, slots_ = 0, healthy_ = 0, running_max_ = 0;
  uint64_t decode_steps_ = 0, decode_rows_ = 0, prefills_ = 0, prefill_prompts_ = 0;
  double decode_seconds_ = 0.0, prefill_seconds_ = 0.0;
  Histogram ttft_, itl_;
};

}  // namespace verity::serve
