#include "serve/metrics.h"

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace verity::serve {
namespace {

std::string Num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// The process's resident and peak resident memory (VmRSS, VmHWM), in bytes.
std::pair<double, double> Rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  double rss = 0, hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stod(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stod(line.substr(6)) * 1024;
  }
  return {rss, hwm};
}

void Head(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

// A metric of one unlabelled sample: its head, then "name value".
void Single(std::ostringstream& o, const char* name, const char* type, const char* help, const std::string& value) {
  Head(o, name, type, help);
  o << name << " " << value << "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) i++;
  counts_[i]++;
  sum_ += v;
  count_++;
}

std::string Histogram::Render(const std::string& name) const {
  std::ostringstream o;
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); i++) {
    cum += counts_[i];
    o << name << "_bucket{le=\"" << Num(bounds_[i]) << "\"} " << cum << "\n";
  }
  o << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
    << name << "_sum " << Num(sum_) << "\n"
    << name << "_count " << count_ << "\n";
  return o.str();
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::Request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> l(mu_);
  requests_[{endpoint, status}]++;
}
void Metrics::Tokens(int prompt, int generated) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}
void Metrics::FirstToken(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.Observe(s);
}
void Metrics::InterToken(double s) {
  std::lock_guard<std::mutex> l(mu_);
  itl_.Observe(s);
}
void Metrics::Gauges(int queue_depth, int running, int slots_in_use, int slots_total) {
  std::lock_guard<std::mutex> l(mu_);
  // -1: that gauge is not the caller's to set.
  if (queue_depth >= 0) queue_ = queue_depth;
  if (running >= 0) running_ = running;
  if (slots_in_use >= 0) slots_used_ = slots_in_use;
  if (slots_total >= 0) slots_ = slots_total;
}
void Metrics::DecodeStep(int rows, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  decode_seconds_ += seconds;
  running_ = rows;
  running_max_ = std::max(running_max_, rows);
  decode_steps_++;
  decode_rows_ += static_cast<uint64_t>(rows);
}
void Metrics::Prefill(int prompts, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  prefill_seconds_ += seconds;
  prefills_++;
  prefill_prompts_ += static_cast<uint64_t>(prompts);
}
void Metrics::Probe(bool pass) {
  std::lock_guard<std::mutex> l(mu_);
  (pass ? probe_passes_ : probe_failures_)++;
}
void Metrics::Healthy(bool healthy) {
  std::lock_guard<std::mutex> l(mu_);
  healthy_ = healthy;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  Head(o, "verity_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [k, n] : requests_)
    o << "verity_requests_total{endpoint=\"" << k.first << "\",status=\"" << k.second << "\"} " << n << "\n";
  using std::to_string;
  Single(o, "verity_prompt_tokens_total", "counter", "Prompt tokens prefilled.", to_string(prompt_tokens_));
  Single(o, "verity_generated_tokens_total", "counter", "Tokens generated.", to_string(generated_tokens_));
  Head(o, "verity_time_to_first_token_seconds", "histogram",
       "From a request's arrival in the queue to its first token.");
  o << ttft_.Render("verity_time_to_first_token_seconds");
  Head(o, "verity_inter_token_seconds", "histogram", "Between consecutive tokens of one request.");
  o << itl_.Render("verity_inter_token_seconds");
  Single(o, "verity_queue_depth", "gauge", "Requests waiting for a slot.", to_string(queue_));
  Single(o, "verity_running_batch_size", "gauge", "Sequences in the last decode step.", to_string(running_));
  Single(o, "verity_running_batch_size_max", "gauge", "Sequences in the largest decode step since start.",
         to_string(running_max_));
  Single(o, "verity_decode_steps_total", "counter", "Batched decode steps run.", to_string(decode_steps_));
  Single(o, "verity_decode_step_rows_total", "counter",
         "Sequences decoded over all steps (divided by the steps: the mean batch).", to_string(decode_rows_));
  Single(o, "verity_decode_seconds_total", "counter", "Seconds the engine spent in decode steps.",
         Num(decode_seconds_));
  Single(o, "verity_prefill_seconds_total", "counter", "Seconds the engine spent prefilling prompts.",
         Num(prefill_seconds_));
  Single(o, "verity_prefills_total", "counter", "Prefills run (the prompts admitted between two steps share one).",
         to_string(prefills_));
  Single(o, "verity_prefill_prompts_total", "counter",
         "Prompts prefilled over all prefills (divided by the prefills: prompts per prefill).",
         to_string(prefill_prompts_));
  Single(o, "verity_kv_slots_in_use", "gauge", "KV-cache slots holding a sequence.", to_string(slots_used_));
  Single(o, "verity_kv_slots", "gauge", "KV-cache slots (--parallel).", to_string(slots_));
  Single(o, "verity_probe_passes_total", "counter", "Coherence probe rounds that passed.", to_string(probe_passes_));
  Single(o, "verity_probe_failures_total", "counter", "Coherence probe rounds that failed.",
         to_string(probe_failures_));
  Single(o, "verity_healthy", "gauge", "1 while the last probe round passed.", to_string(healthy_));
  const auto [rss, hwm] = Rss();
  Single(o, "process_resident_memory_bytes", "gauge", "Resident memory (VmRSS).", Num(rss));
  Single(o, "verity_peak_resident_memory_bytes", "gauge", "Peak resident memory (VmHWM).", Num(hwm));
  return o.str();
}

}  // namespace verity::serve
