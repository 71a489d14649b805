#include "serve/health.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "verify/audit.h"

namespace verity::serve {

int ProbeRound::passed() const {
  int n = 0;
  for (const ProbeOutcome& p : probes) n += p.pass;
  return n;
}

std::string ProbeRound::Summary() const {
  return "probe: passed=" + std::to_string(passed()) + "/" + std::to_string(probes.size()) +
         " verdict=" + (pass ? "PASS" : "FAIL");
}

Prober::Prober(Scheduler& scheduler, const TextCodec& codec, std::string probes_path, Metrics& metrics)
    : scheduler_(scheduler), codec_(codec), path_(std::move(probes_path)), metrics_(metrics) {}

Prober::~Prober() { Stop(); }

namespace {

struct Pending {
  Probe probe;
  std::shared_ptr<Job> job;
  std::unique_ptr<TextStream> text;
};

// Greedy, long enough for the expected text and a few tokens more: as many
// tokens as its bytes (a model may spell it one byte-piece at a time, as a
// random one does, where the tokenizer would use fewer), capped by the context.
Result<Pending> Submit(Scheduler& s, const TextCodec& codec, const Probe& p) {
  VERITY_ASSIGN_OR_RETURN(auto prompt, codec.EncodePrompt(p.prompt));
  auto want = codec.tokenizer().Encode(p.expect, /*add_special=*/false);
  JobParams jp;
  jp.prompt = prompt;
  const int want_tokens = want.ok() ? static_cast<int>(want->size()) : 0;
  jp.max_tokens = std::max(want_tokens, static_cast<int>(p.expect.size())) + 4;
  jp.temperature = 0.0f;
  Pending out{p, std::make_shared<Job>(jp), std::make_unique<TextStream>(codec, prompt, std::vector<std::string>{})};
  if (s.Submit(out.job, /*probe=*/true) != Scheduler::Admission::kQueued)
    return Status::Error("the scheduler is draining: probe not run");
  return out;
}

// Reads the job's tokens to its end (a probe waits as long as it takes).
std::string Collect(Pending& p) {
  for (;;) {
    auto e = p.job->Next(std::chrono::steady_clock::now() + std::chrono::hours(1));
    if (!e) continue;
    if (!e->token) break;
    p.text->Add(e->token->token);
  }
  return p.text->Take(/*final=*/true);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ProbeRound Prober::RunRound() {
  ProbeRound round;
  round.unix_ms = NowMs();
  auto probes = ReadProbes(path_);
  if (!probes.ok()) round.error = probes.status().message();
  std::vector<Pending> pending;
  for (const Probe& p : probes.ok() ? *probes : std::vector<Probe>{}) {
    auto s = Submit(scheduler_, codec_, p);
    if (!s.ok()) {
      round.error = s.status().message();
      break;
    }
    pending.push_back(std::move(s).value());
  }
  for (Pending& p : pending) {
    ProbeOutcome o{p.probe.prompt, p.probe.expect, Collect(p), false};
    o.pass = o.got.rfind(o.expect, 0) == 0;
    round.probes.push_back(o);
  }
  if (round.error.rfind("the scheduler is draining", 0) == 0) return round;  // shutting down: not a verdict
  round.pass = round.error.empty() && !round.probes.empty() && round.passed() == static_cast<int>(round.probes.size());
  if (round.error.empty() && round.probes.empty()) round.error = path_ + ": no probes";
  if (!round.pass) {
    std::string what = round.error;
    for (const ProbeOutcome& o : round.probes)
      if (!o.pass && what.empty()) what = "\"" + o.prompt + "\" expected \"" + o.expect + "\" got \"" + o.got + "\"";
    std::fprintf(stderr, "verity: ALERT: coherence probe failed (%d/%zu passed): %s\n", round.passed(),
                 round.probes.size(), what.c_str());
  }
  healthy_ = round.pass;
  metrics_.Probe(round.pass);
  metrics_.Healthy(round.pass);
  std::lock_guard<std::mutex> l(mu_);
  rounds_.push_back(round);
  if (rounds_.size() > kHistory) rounds_.pop_front();
  return round;
}

void Prober::Every(double seconds) {
  thread_ = std::thread([this, seconds] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_cv_.wait_for(l, std::chrono::duration<double>(seconds), [&] { return stop_; })) {
      l.unlock();
      RunRound();
      l.lock();
    }
  });
}

void Prober::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ProbeRound Prober::last() const {
  std::lock_guard<std::mutex> l(mu_);
  return rounds_.empty() ? ProbeRound{} : rounds_.back();
}

std::vector<ProbeRound> Prober::history() const {
  std::lock_guard<std::mutex> l(mu_);
  return {rounds_.begin(), rounds_.end()};
}

}  // namespace verity::serve
