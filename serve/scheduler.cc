#include "serve/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace verity::serve {

namespace {
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "stop";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "error";
}

std::optional<JobEvent> Job::Next(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_until(l, deadline, [&] { return !events_.empty(); })) return std::nullopt;
  JobEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool Job::Ready(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_until(l, deadline, [&] { return !events_.empty(); });
}

void Job::Push(JobEvent e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

Scheduler::Scheduler(SlotDecoder& decoder, const TextCodec& codec, Metrics& metrics, int queue_limit)
    : d_(decoder), codec_(codec), metrics_(metrics), queue_limit_(queue_limit) {
  for (int s = d_.slots() - 1; s >= 0; s--) free_slots_.push_back(s);
  logits_.resize(static_cast<size_t>(d_.slots()) * d_.model().config.vocab_size);
  Publish();
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() { Stop(); }

Scheduler::Admission Scheduler::Submit(std::shared_ptr<Job> job, bool probe) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (draining_ || stopping_) return Admission::kDraining;
    if (!probe && active_ >= queue_limit_ + d_.slots()) return Admission::kFull;
    active_++;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Admission::kQueued;
}

void Scheduler::Drain() {
  std::lock_guard<std::mutex> l(mu_);
  draining_ = true;
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = draining_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Scheduler::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return active_;
}

// Between steps: admit queued jobs into free slots, then one step of
// everything running. Idle, it sleeps until a job arrives.
void Scheduler::Loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !running_.empty() || !queue_.empty(); });
      if (stopping_) break;
      while (!queue_.empty() && admitted.size() < free_slots_.size()) {
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const bool joined = !admitted.empty();
    Start(std::move(admitted));
    // Published before the step too, so /metrics shows an admitted request's
    // slot in use before its second token reaches the client.
    if (joined) Publish();
    StepRunning();
    Publish();
  }
  for (Running& r : running_) r.job->Push({std::nullopt, FinishReason::kCancelled, "the server is shutting down"});
  std::lock_guard<std::mutex> l(mu_);
  for (auto& job : queue_) job->Push({std::nullopt, FinishReason::kCancelled, "the server is shutting down"});
}

// Between steps, so a request waits at most one step to join; the prompts
// admitted together share their prefill's passes over the weights.
void Scheduler::Start(std::vector<std::shared_ptr<Job>> jobs) {
  std::vector<Running> starting;
  std::vector<SlotDecoder::Prompt> prompts;
  for (auto& job : jobs) {
    const JobParams& p = job->params;
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    Running r{job,
              slot,
              static_cast<int>(p.prompt.size()),
              0,
              0,
              Sampler(d_.model().config.vocab_size, p.temperature, p.top_p, p.seed),
              std::chrono::steady_clock::now()};
    if (job->cancelled()) {
      Finish(r, FinishReason::kCancelled);
      continue;
    }
    // The HTTP parser refuses such prompts; a probe file may not. A decoder
    // error would be kept for every later step, so it never gets one.
    if (p.prompt.empty() || static_cast<int>(p.prompt.size()) >= d_.context()) {
      Finish(r, FinishReason::kError);
      r.job->Push({std::nullopt, FinishReason::kError,
                   "a prompt of " + std::to_string(p.prompt.size()) + " tokens does not fit the context of " +
                       std::to_string(d_.context())});
      continue;
    }
    prompts.push_back({slot, p.prompt.data(), static_cast<int>(p.prompt.size()), 0});
    starting.push_back(std::move(r));
  }
  // Prompts of as many prefill blocks share a prefill, fewest blocks first:
  // a short prompt's first token does not wait for a long one's last block.
  std::map<int, std::vector<size_t>> by_blocks;
  for (size_t i = 0; i < prompts.size(); i++)
    by_blocks[(prompts[i].T + Transformer::kPrefillBlock - 1) / Transformer::kPrefillBlock].push_back(i);
  const size_t vocab = d_.model().config.vocab_size;
  for (const auto& [blocks, group] : by_blocks) {
    std::vector<SlotDecoder::Prompt> batch;
    for (size_t i : group) batch.push_back(prompts[i]);
    const auto t0 = std::chrono::steady_clock::now();
    d_.PrefillMany(batch.data(), static_cast<int>(batch.size()), logits_.data());
    metrics_.Prefill(static_cast<int>(batch.size()), SecondsSince(t0));
    for (size_t k = 0; k < group.size(); k++) {
      Running& r = starting[group[k]];
      metrics_.Tokens(prompts[group[k]].T, 0);
      if (Advance(r, logits_.data() + k * vocab)) running_.push_back(std::move(r));
    }
  }
}

void Scheduler::StepRunning() {
  // A cancelled job leaves before the step: its client is gone.
  for (size_t i = 0; i < running_.size();) {
    if (running_[i].job->cancelled()) {
      Finish(running_[i], FinishReason::kCancelled);
      running_.erase(running_.begin() + i);
    } else {
      i++;
    }
  }
  if (running_.empty()) return;
  std::vector<int> slot, token, pos;
  for (const Running& r : running_) slot.push_back(r.slot), token.push_back(r.next), pos.push_back(r.pos);
  const auto t0 = std::chrono::steady_clock::now();
  d_.Step(slot.data(), token.data(), pos.data(), static_cast<int>(running_.size()), logits_.data());
  metrics_.DecodeStep(static_cast<int>(running_.size()), SecondsSince(t0));
  const size_t vocab = d_.model().config.vocab_size;
  std::vector<Running> still;
  for (size_t i = 0; i < running_.size(); i++) {
    running_[i].pos++;
    if (Advance(running_[i], logits_.data() + i * vocab)) still.push_back(std::move(running_[i]));
  }
  running_ = std::move(still);
}

namespace {
// log-softmax of the logits at `token`, and the k most likely tokens'.
TokenEvent LogProbs(const float* logits, int vocab, int token, int k) {
  double mx = *std::max_element(logits, logits + vocab), sum = 0;
  for (int i = 0; i < vocab; i++) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  TokenEvent e;
  e.token = token;
  e.logprob = static_cast<float>(logits[token] - lse);
  if (k > 0) {
    std::vector<int> ids(vocab);
    for (int i = 0; i < vocab; i++) ids[i] = i;
    std::partial_sort(ids.begin(), ids.begin() + std::min(k, vocab), ids.end(),
                      [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    for (int i = 0; i < std::min(k, vocab); i++) e.top.push_back({ids[i], static_cast<float>(logits[ids[i]] - lse)});
  }
  return e;
}
}  // namespace

bool Scheduler::Advance(Running& r, float* logits) {
  const JobParams& p = r.job->params;
  if (!d_.status().ok()) {
    Finish(r, FinishReason::kError);
    r.job->Push({std::nullopt, FinishReason::kError, d_.status().message()});
    return false;
  }
  const int vocab = d_.model().config.vocab_size;
  // Sample() scales the logits in place: log-probabilities come from a copy.
  std::vector<float> raw;
  if (p.logprobs >= 0) raw.assign(logits, logits + vocab);
  const int token = r.sampler.Sample(logits);
  TokenEvent e = p.logprobs >= 0 ? LogProbs(raw.data(), vocab, token, p.logprobs) : TokenEvent{};
  const auto now = std::chrono::steady_clock::now();
  if (r.generated == 0) metrics_.FirstToken(std::chrono::duration<double>(now - r.job->queued_at).count());
  else metrics_.InterToken(std::chrono::duration<double>(now - r.last).count());
  r.last = now;
  if (codec_.Ends(token) && !p.ignore_eos) {
    Finish(r, FinishReason::kEos);
    return false;
  }
  e.token = token;
  r.job->Push({std::move(e), FinishReason::kLength, ""});
  metrics_.Tokens(0, 1);
  r.generated++;
  r.next = token;
  if (r.generated >= p.max_tokens || r.pos >= d_.context()) {  // r.pos: where `next` is fed
    Finish(r, FinishReason::kLength);
    return false;
  }
  return true;
}

// The job leaves the count, and /metrics' slots in use, before its client
// hears it finished: a client that sends its next request at once finds the
// room it left, and one that reads /metrics after a request (the startup
// probe's last one before the port opens) never sees its slot still held.
void Scheduler::Finish(Running& r, FinishReason why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    active_--;
  }
  free_slots_.push_back(r.slot);
  Publish();
  if (why != FinishReason::kError) r.job->Push({std::nullopt, why, ""});
}

void Scheduler::Publish() {
  int queued = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    queued = static_cast<int>(queue_.size());
  }
  metrics_.Gauges(queued, -1, d_.slots() - static_cast<int>(free_slots_.size()), d_.slots());
}

}  // namespace verity::serve
