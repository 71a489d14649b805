// `verity bisect`; see bisect.h. The search is a plain binary search over the
// first-parent commits with git-bisect-style skips; what is particular is
// the step: parity first (a failure starts a search for the first commit that
// fails parity), then ABBA rounds against good decided by the sign-test
// bounds against the threshold, re-measured once when they straddle it.
#include "ledger/bisect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "base/env.h"
#include "base/strings.h"
#include "base/terminal.h"
#include "ledger/evidence.h"
#include "ledger/format.h"
#include "ledger/record.h"
#include "ledger/score.h"
#include "ledger/stats.h"
#include "ledger/units.h"
#include "measure/box_lock.h"

namespace verity::ledger {
namespace {

using measure::ShellQuote;

std::string Short(const std::string& sha) { return sha.substr(0, 12); }
Value Opt(const std::optional<double>& v) { return v && std::isfinite(*v) ? Value(*v) : Value(); }

struct Commit {
  std::string sha, subject;
};

Result<std::string> Git(const std::string& repo, const std::string& args) {
  measure::CommandOutput o = measure::RunCommand("git -C " + ShellQuote(repo) + " " + args, 120);
  if (o.exit_code != 0) return Status::Error("git " + args + " failed in " + repo + ": " + TrimRight(o.err));
  return o.out;
}

Result<std::string> ResolveCommit(const std::string& repo, const std::string& ref) {
  measure::CommandOutput o = measure::RunCommand(
      "git -C " + ShellQuote(repo) + " rev-parse --verify --quiet " + ShellQuote(ref + "^{commit}"), 60);
  const std::string sha = TrimRight(o.out);
  if (o.exit_code != 0 || sha.size() != 40) return Status::Error("ref '" + ref + "' is not a commit in " + repo);
  return sha;
}

// The first-parent commits in (good, bad], oldest first, with their subjects.
Result<std::vector<Commit>> FirstParentRange(const std::string& repo, const std::string& good, const std::string& bad,
                                             const std::string& good_ref, const std::string& bad_ref) {
  if (good == bad)
    return Status::Error("--good " + good_ref + " and --bad " + bad_ref + " are the same commit: nothing to bisect");
  measure::CommandOutput anc =
      measure::RunCommand("git -C " + ShellQuote(repo) + " merge-base --is-ancestor " + good + " " + bad, 60);
  if (anc.exit_code != 0)
    return Status::Error("--good " + good_ref + " (" + Short(good) + ") is not an ancestor of --bad " + bad_ref + " (" +
                         Short(bad) + ")");
  VERITY_ASSIGN_OR_RETURN(std::string log,
                          Git(repo, "log --first-parent --reverse --format=%H%x09%s " + good + ".." + bad));
  std::vector<Commit> out;
  size_t at = 0;
  while (at < log.size()) {
    size_t nl = log.find('\n', at);
    if (nl == std::string::npos) nl = log.size();
    const std::string line = log.substr(at, nl - at);
    at = nl + 1;
    if (line.size() < 40) continue;
    out.push_back({line.substr(0, 40), line.size() > 41 ? line.substr(41) : ""});
  }
  if (out.empty()) return Status::Error("no first-parent commits between " + good_ref + " and " + bad_ref);
  VERITY_ASSIGN_OR_RETURN(std::string parent, Git(repo, "rev-parse " + out.front().sha + "^"));
  if (TrimRight(parent) != good)
    return Status::Error("--good " + good_ref + " (" + Short(good) + ") is not on the first-parent line of --bad " +
                         bad_ref + " (it was merged in from a side branch): give a good commit on that line");
  return out;
}

std::string EvidenceSummary(const measure::ParityEvidence& e) {
  return "worst top-1 " + NumText(e.worst_top1) + ", worst mean KL " + NumText(e.worst_mean_kl) + " over " +
         std::to_string(e.depths.size()) + " depths, exit " + std::to_string(e.exit_code);
}

std::string CiText(const BisectStep& s) {
  if (!s.ratio) return "";
  auto pct = [](const std::optional<double>& r) {
    return r && std::isfinite(*r) ? PctText(*r - 1) : std::string("none");
  };
  return pct(s.ratio) + " [" + pct(s.ci_low) + ", " + pct(s.ci_high) + "]";
}

// One bisect session in progress.
class Session {
 public:
  Session(Ledger& l, const BisectRequest& req, const MeasureOptions& opt) : l_(l), d_(l.db()), req_(req), opt_(opt) {}

  Result<BisectResult> Run();

 private:
  // Checks the request, lists the commits and records the session.
  Status Start();
  // The result once the search left (lo, hi]: one culprit or the candidates.
  Result<BisectResult> Conclude(std::pair<int, int> left, const std::string& search, const std::string& preface);
  std::string Counts() const {
    return "; " + std::to_string(result_.search_steps) + " steps, " + std::to_string(result_.skipped) + " skipped";
  }
  struct Built {
    measure::BuiltRef ref;
    CommitCommands cmds;
  };
  // What a step measures.
  enum class Mode { kParityOnly, kSpeed };

  void Say(const std::string& s) const {
    if (opt_.progress) opt_.progress(s);
  }
  Result<Built> Build(const std::string& sha);
  Result<BisectStep> Step(const Commit& c, const std::string& role, const std::string& search, Mode mode);
  // Records the step's run (its commands, "" when the build failed); its id.
  Result<int64_t> RecordRun(const Commit& c, const std::string& bench, const std::string& parity);
  // A step's parity run, judged at the policy's standard tier.
  struct ParityOutcome {
    explicit ParityOutcome(Result<measure::ParityEvidence> e) : ev(std::move(e)) {}
    Result<measure::ParityEvidence> ev;
    std::string message;  // the evidence and its judgement, or why there is none
    bool passed = false;
  };
  // Runs the parity command, judges and records it.
  Result<ParityOutcome> CheckParity(int64_t run, const std::string& parity);
  Status RecordParity(int64_t run, const measure::CommandOutput& out, const ParityOutcome& p);
  // Records the step as decided by `by` without (more) measuring.
  Result<BisectStep> Settle(int64_t run, BisectStep s, const std::string& verdict, const std::string& by,
                            const std::string& note);
  // The speed part of a step (parity passed): fills verdict and evidence.
  // `bound`: the artifact the step's parity evidence came from ("" = not stated).
  Status MeasureSpeed(int64_t run, const Built& step, const std::string& bound, BisectStep* s);
  // What the samples of one speed step must agree on, checked as they come.
  struct Sampler {
    Sampler(const Built& g, const Built& st, const std::string& b, int64_t r) : good(g), step(st), bound(b), run(r) {}
    const Built& good;
    const Built& step;
    const std::string& bound;
    int64_t run = 0;
    std::map<std::string, std::string> artifact;  // side -> artifact seen first
    std::string workload;
    bool first = true;
  };
  // One bench sample of `side` ("good" or "step") and its command's seconds.
  Result<std::pair<measure::BenchSample, double>> TakeSample(Sampler& sm, const std::string& side);
  // Round `n`: one sample per side in `order`, recorded together; their values.
  Result<std::vector<double>> MeasureRound(Sampler& sm, int n, const std::vector<std::string>& order);
  // The timed rounds of a speed step and where the sequential test left them.
  struct SpeedRounds {
    std::vector<double> ratios;
    Decision dec = Decision::kContinue;
    int attempt = 0;
    SequentialPlan plan;  // the plan the last look was taken under
  };
  Result<SpeedRounds> TimeRounds(Sampler& sm, BisectStep* s);
  // The step's verdict and evidence from its rounds.
  void JudgeSpeed(const SpeedRounds& r, const std::string& workload, BisectStep* s) const;
  Result<BisectStep> Record(int64_t run, BisectStep s);
  Result<BisectResult> Finish(const std::string& kind, std::vector<std::string> candidates, const std::string& summary);
  // A binary search for the first commit in (lo, hi] that is bad under the
  // search's rule; hi is known bad and lo known good. Returns (lo, hi) as left.
  // A speed step that fails parity stops it (*parity_fail gets the index).
  Result<std::pair<int, int>> Search(int lo, int hi, const std::string& search, std::optional<int>* parity_fail);

  Ledger& l_;
  Db& d_;
  const BisectRequest& req_;
  const MeasureOptions& opt_;
  Policy pol_;
  SequentialPlan plan_;
  double thr_ = 0.02;  // as a fraction
  std::string repo_, cache_;
  measure::Box box_;
  int64_t box_id_ = 0, session_ = 0;
  std::vector<Commit> commits_;  // [0] = good, then (good, bad] oldest first
  std::map<std::string, Result<Built>> built_;
  std::set<int> skipped_;
  BisectResult result_;
};

Result<Session::Built> Session::Build(const std::string& sha) {
  auto it = built_.find(sha);
  if (it != built_.end()) return it->second;
  Result<Built> b = [&]() -> Result<Built> {
    VERITY_ASSIGN_OR_RETURN(measure::BuiltRef ref, measure::BuildRef(repo_, sha, cache_, req_.recipe,
                                                                     [&](const std::string& s) { Say("  " + s); }));
    VERITY_ASSIGN_OR_RETURN(CommitCommands cmds, req_.commands(ref));
    return Built{ref, cmds};
  }();
  built_.emplace(sha, b);
  return b;
}

Result<BisectStep> Session::Record(int64_t run, BisectStep s) {
  s.run = run;
  VERITY_RETURN_IF_ERROR(d_.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(
        s.id, d_.InsertSealed("bisect_steps", {{"session_id", session_},
                                               {"run_id", run},
                                               {"role", s.role},
                                               {"search", s.search},
                                               {"commit_sha", s.sha},
                                               {"subject", s.subject},
                                               {"verdict", s.verdict},
                                               {"decided_by", s.decided_by},
                                               {"workload", s.workload.empty() ? Value() : Value(s.workload)},
                                               {"ratio", Opt(s.ratio)},
                                               {"ci_low", Opt(s.ci_low)},
                                               {"ci_high", Opt(s.ci_high)},
                                               {"alpha", Opt(s.alpha)},
                                               {"rounds", int64_t{s.rounds}},
                                               {"remeasured", int64_t{s.remeasured}},
                                               {"note", s.note},
                                               {"decided_at", NowUtc()}}));
    return OkStatus();
  }));
  result_.steps.push_back(s);
  if (s.role == "step") {
    result_.search_steps++;
    if (s.verdict == "untestable") result_.skipped++;
  }
  std::string line = (s.role == "step" ? "bisect step " + std::to_string(result_.search_steps) : "bisect " + s.role) +
                     " (" + s.search + "): " + Short(s.sha) + " " + s.subject + ": " + s.verdict;
  if (s.ratio) line += " " + CiText(s) + " vs good, " + std::to_string(s.rounds) + " rounds";
  if (s.decided_by == "median") line += ", decided by its median (the CI straddled the threshold after re-measuring)";
  if (!s.note.empty()) line += "; " + s.note;
  line += " (run " + std::to_string(run) + ")";
  Say(line);
  return s;
}

Result<BisectStep> Session::Step(const Commit& c, const std::string& role, const std::string& search, Mode mode) {
  BisectStep s;
  s.role = role;
  s.search = search;
  s.sha = c.sha;
  s.subject = c.subject;
  Say("bisect: testing " + Short(c.sha) + " " + c.subject +
      (mode == Mode::kSpeed ? " (parity, then speed vs good)" : " (parity)"));
  Result<Built> b = Build(c.sha);
  const std::string bench = b.ok() ? b->cmds.bench_cmd : "", parity = b.ok() ? b->cmds.parity_cmd : "";
  VERITY_ASSIGN_OR_RETURN(const int64_t run, RecordRun(c, bench, parity));
  auto untestable = [&](const std::string& by, const std::string& why) {
    return Settle(run, s, "untestable", by, "skipped: " + why);
  };
  if (!b.ok()) return untestable("build", b.status().message());
  if (parity.empty())
    return untestable("parity", b->cmds.note.empty() ? "the build has no parity command" : b->cmds.note);

  // 1. Parity: the gate comes first, as in a submission.
  VERITY_ASSIGN_OR_RETURN(ParityOutcome p, CheckParity(run, parity));
  // A command that printed no evidence could not run: nothing is known about the commit.
  if (!p.ev.ok()) return untestable("parity", "its parity command could not run: " + p.message);
  if (!p.ev->build_id.empty() && p.ev->build_id != c.sha)
    return untestable("parity",
                      "its parity evidence names build " + p.ev->build_id + ", not " + c.sha + " (stale build)");
  if (!p.passed) return Settle(run, s, "parity-fail", "parity", p.message);
  if (mode == Mode::kParityOnly) return Settle(run, s, "good", "parity", p.message);
  // 2. Speed against good (whose build the session made first).
  if (p.ev->artifact_sha256.empty())
    s.note = "its parity evidence names no artifact (not bound to the benchmarked binary)";
  Status m = MeasureSpeed(run, *b, p.ev->artifact_sha256, &s);
  if (!m.ok()) return untestable("build", m.message());
  return Record(run, s);
}

Result<int64_t> Session::RecordRun(const Commit& c, const std::string& bench, const std::string& parity) {
  int64_t run = 0;
  VERITY_RETURN_IF_ERROR(d_.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(run,
                            d_.InsertSealed("bisect_runs", {{"session_id", session_},
                                                            {"purpose", std::string("bisect")},
                                                            {"commit_sha", c.sha},
                                                            {"against_sha", commits_[0].sha},
                                                            {"bench_cmd", bench.empty() ? Value() : Value(bench)},
                                                            {"parity_cmd", parity.empty() ? Value() : Value(parity)},
                                                            {"min_rounds", int64_t{plan_.min_rounds}},
                                                            {"max_rounds", int64_t{plan_.max_rounds}},
                                                            {"started_at", NowUtc()}}));
    return OkStatus();
  }));
  return run;
}

Result<Session::ParityOutcome> Session::CheckParity(int64_t run, const std::string& parity) {
  measure::CommandOutput out = measure::RunCommand(parity, opt_.timeout_s);
  ParityOutcome p(measure::ParseParity(out, "parity command"));
  if (p.ev.ok()) {
    const std::string why = JudgeParity(pol_, *p.ev, "standard");
    p.passed = why.empty();
    p.message = EvidenceSummary(*p.ev) + (p.passed ? ": pass" : ": FAIL (" + why + ")");
  } else {
    p.message = p.ev.status().message();
  }
  VERITY_RETURN_IF_ERROR(RecordParity(run, out, p));
  return p;
}

Status Session::RecordParity(int64_t run, const measure::CommandOutput& out, const ParityOutcome& p) {
  return d_.Transaction([&]() -> Status {
    const auto* e = p.ev.ok() ? &p.ev.value() : nullptr;
    auto num = [](double v) { return std::isfinite(v) ? Value(v) : Value(); };
    return d_
        .InsertSealed("bisect_parity",
                      {{"run_id", run},
                       {"exit_code", int64_t{out.exit_code}},
                       {"passed", int64_t{p.passed}},
                       {"worst_top1", e ? num(e->worst_top1) : Value()},
                       {"worst_mean_kl", e ? num(e->worst_mean_kl) : Value()},
                       {"artifact_sha256", e && !e->artifact_sha256.empty() ? Value(e->artifact_sha256) : Value()},
                       {"message", p.message},
                       {"raw_json", e ? Value(e->raw) : Value()}})
        .status();
  });
}

Result<BisectStep> Session::Settle(int64_t run, BisectStep s, const std::string& verdict, const std::string& by,
                                   const std::string& note) {
  s.verdict = verdict;
  s.decided_by = by;
  s.note = note;
  return Record(run, s);
}

Status Session::MeasureSpeed(int64_t run, const Built& step, const std::string& bound, BisectStep* s) {
  VERITY_ASSIGN_OR_RETURN(Built good, Build(commits_[0].sha));
  Sampler sm(good, step, bound, run);
  VERITY_ASSIGN_OR_RETURN(auto lock, measure::BoxLock::Acquire(opt_.lock_dir, box_.Machine(),
                                                               [&](const std::string& w) { Say("  " + w); }));
  VERITY_RETURN_IF_ERROR(MeasureRound(sm, 0, {"good", "step"}).status());
  VERITY_ASSIGN_OR_RETURN(const SpeedRounds r, TimeRounds(sm, s));
  lock.reset();
  JudgeSpeed(r, sm.workload, s);
  return OkStatus();
}

Result<std::pair<measure::BenchSample, double>> Session::TakeSample(Sampler& sm, const std::string& side) {
  const Built& b = side == "good" ? sm.good : sm.step;
  measure::CommandOutput out = measure::RunCommand(b.cmds.bench_cmd, opt_.timeout_s);
  VERITY_ASSIGN_OR_RETURN(auto x, measure::ParseBench(out, req_.metric, side + " bench command"));
  if (side == "step" && !sm.bound.empty() && x.artifact_sha256 != sm.bound)
    return Status::Error("its parity evidence came from artifact " + sm.bound.substr(0, 16) + " but its bench ran " +
                         x.artifact_sha256.substr(0, 16) + ": the evidence does not cover what was benchmarked");
  if (x.build_id != b.ref.sha)
    return Status::Error("the " + side + " binary reports build " + x.build_id + " but was built from " + b.ref.sha +
                         " (stale build)");
  if (sm.first) sm.workload = x.workload;
  else if (x.workload != sm.workload)
    return Status::Error("the " + side + " bench measured workload '" + x.workload + "' but the first sample '" +
                         sm.workload + "': good and the step must bench the same model, dtype, threads and lengths");
  sm.first = false;
  auto [it, fresh] = sm.artifact.emplace(side, x.artifact_sha256);
  if (!fresh && it->second != x.artifact_sha256)
    return Status::Error("the " + side + " artifact changed between rounds");
  return std::make_pair(x, out.seconds);
}

Result<std::vector<double>> Session::MeasureRound(Sampler& sm, int n, const std::vector<std::string>& order) {
  std::vector<std::pair<measure::BenchSample, double>> got;
  std::vector<std::string> at;
  for (const auto& side : order) {
    at.push_back(NowUtc());
    VERITY_ASSIGN_OR_RETURN(auto x, TakeSample(sm, side));
    got.push_back(x);
  }
  std::vector<double> v;
  VERITY_RETURN_IF_ERROR(d_.Transaction([&]() -> Status {
    for (size_t i = 0; i < got.size(); i++) {
      const auto& x = got[i].first;
      v.push_back(x.value);
      VERITY_RETURN_IF_ERROR(d_.InsertSealed("bisect_samples", {{"run_id", sm.run},
                                                                {"round", int64_t{n}},
                                                                {"side", order[i]},
                                                                {"ord", static_cast<int64_t>(i)},
                                                                {"value", x.value},
                                                                {"seconds", got[i].second},
                                                                {"build_id", x.build_id},
                                                                {"artifact_sha256", x.artifact_sha256},
                                                                {"taken_at", at[i]}})
                                 .status());
    }
    return OkStatus();
  }));
  return v;
}

Result<Session::SpeedRounds> Session::TimeRounds(Sampler& sm, BisectStep* s) {
  const bool higher = HigherIsBetter(req_.metric);
  SpeedRounds r;
  // The first plan, then (if its bounds straddle the threshold at its last
  // look) one re-measurement: as many rounds again, at the re-measurement's
  // smaller alpha, as the ledger spends it for a change's second attempt.
  SequentialPlan second = plan_;
  second.min_rounds = plan_.max_rounds + plan_.look_every;
  second.max_rounds = 2 * plan_.max_rounds;
  const SequentialPlan* plan = &plan_;
  for (int n = 1; n <= second.max_rounds; n++) {
    VERITY_ASSIGN_OR_RETURN(auto v, MeasureRound(sm, n, {"good", "step", "step", "good"}));
    r.ratios.push_back(RoundRatio(Round{v[0], v[1], v[2], v[3]}, higher));
    r.dec = Decide(*plan, r.ratios, -thr_, r.attempt);
    if (r.dec == Decision::kAbove || r.dec == Decision::kBelow) break;
    if (r.dec == Decision::kUnresolved && r.attempt == 0) {
      Say("  the bounds straddle the threshold after " + std::to_string(n) + " rounds: re-measuring once with up to " +
          std::to_string(second.max_rounds - n) + " more");
      plan = &second;
      r.attempt = 1;
      s->remeasured = true;
    } else if (r.dec == Decision::kUnresolved) {
      break;
    }
  }
  r.plan = *plan;
  return r;
}

void Session::JudgeSpeed(const SpeedRounds& r, const std::string& workload, BisectStep* s) const {
  const double alpha = LookAlpha(r.plan, r.attempt);
  const Bounds bnd = MedianBounds(r.ratios, alpha);
  s->workload = workload;
  s->ratio = bnd.estimate;
  s->ci_low = bnd.low;
  s->ci_high = bnd.high;
  s->alpha = alpha;
  s->rounds = static_cast<int>(r.ratios.size());
  if (r.dec == Decision::kAbove || r.dec == Decision::kBelow) {
    s->decided_by = "bounds";
    s->verdict = r.dec == Decision::kBelow ? "bad" : "good";
  } else {
    s->decided_by = "median";
    s->verdict = bnd.estimate < 1.0 - thr_ ? "bad" : "good";
  }
}

Result<std::pair<int, int>> Session::Search(int lo, int hi, const std::string& search,
                                            std::optional<int>* parity_fail) {
  for (;;) {
    std::vector<int> open;
    for (int i = lo + 1; i < hi; i++)
      if (!skipped_.count(i)) open.push_back(i);
    if (open.empty()) return std::make_pair(lo, hi);
    const double middle = 0.5 * (lo + hi);
    const int mid = *std::min_element(open.begin(), open.end(),
                                      [&](int a, int b) { return std::fabs(a - middle) < std::fabs(b - middle); });
    Say("bisect: " + std::to_string(hi - lo) + " candidates left (" + std::to_string(open.size()) +
        " testable), about " +
        std::to_string(static_cast<int>(std::ceil(std::log2(static_cast<double>(open.size() + 1))))) + " steps to go");
    VERITY_ASSIGN_OR_RETURN(BisectStep s,
                            Step(commits_[mid], "step", search, search == "speed" ? Mode::kSpeed : Mode::kParityOnly));
    if (s.verdict == "untestable") {
      skipped_.insert(mid);
    } else if (s.verdict == "parity-fail" && search == "speed") {
      *parity_fail = mid;
      return std::make_pair(lo, mid);
    } else if (s.verdict == "bad" || s.verdict == "parity-fail") {
      hi = mid;
    } else {
      lo = mid;
    }
  }
}

Result<BisectResult> Session::Finish(const std::string& kind, std::vector<std::string> candidates,
                                     const std::string& summary) {
  result_.kind = kind;
  result_.candidates = std::move(candidates);
  result_.summary = summary;
  if (result_.candidates.size() == 1) {
    result_.culprit = result_.candidates[0];
    for (const auto& c : commits_)
      if (c.sha == *result_.culprit) result_.culprit_subject = c.subject;
  }
  for (const auto& s : result_.steps)
    if (!s.workload.empty()) result_.workload = s.workload;
  nlohmann::json cands = result_.candidates;
  VERITY_RETURN_IF_ERROR(d_.Transaction([&]() -> Status {
    return d_
        .InsertSealed("bisect_results", {{"session_id", session_},
                                         {"kind", kind},
                                         {"culprit_sha", result_.culprit ? Value(*result_.culprit) : Value()},
                                         {"candidates", cands.dump()},
                                         {"workload", result_.workload.empty() ? Value() : Value(result_.workload)},
                                         {"steps", int64_t{result_.search_steps}},
                                         {"skipped", int64_t{result_.skipped}},
                                         {"summary", summary},
                                         {"finished_at", NowUtc()}})
        .status();
  }));
  return result_;
}

Result<BisectResult> Session::Conclude(std::pair<int, int> left, const std::string& search,
                                       const std::string& preface) {
  std::vector<std::string> cands;
  for (int i = left.first + 1; i <= left.second; i++) cands.push_back(commits_[i].sha);
  const std::string vs = " vs good " + Short(commits_[0].sha);
  if (cands.size() > 1) {
    std::string list;
    for (int i = left.first + 1; i <= left.second; i++)
      list += (list.empty() ? "" : ", ") + Short(commits_[i].sha) + (skipped_.count(i) ? " (untestable)" : "");
    return Finish(search, cands,
                  std::string("bisect: ") +
                      (search == "speed" ? "the first bad commit" : "the first commit failing parity") + " is one of " +
                      std::to_string(cands.size()) + ": " + list + " (skipped commits make it ambiguous)" + preface +
                      vs + Counts());
  }
  const Commit& culprit = commits_[left.second];
  const BisectStep* evidence = nullptr;
  for (const auto& s : result_.steps)
    if (s.sha == culprit.sha && (s.verdict == "bad" || s.verdict == "parity-fail")) evidence = &s;
  if (search == "speed")
    return Finish(search, cands,
                  "bisect: first bad commit " + culprit.sha + " " + culprit.subject + ": " +
                      (evidence ? CiText(*evidence) : "") + vs + Counts());
  return Finish(search, cands,
                "bisect: first commit failing parity " + culprit.sha + " " + culprit.subject +
                    ": a correctness break, " + "not a speed one (" + (evidence ? evidence->note : "") + ")" + preface +
                    vs + Counts());
}

Status Session::Start() {
  if (!req_.commands) return Status::Error("bisect: no command builder");
  if (auto unit = UnitOf(req_.metric); !unit.ok()) return Status::Error("--metric: " + unit.status().message());
  VERITY_ASSIGN_OR_RETURN(pol_, l_.CurrentPolicy());
  if (auto bad = RoundsRequestError(pol_, opt_)) return Status::Error(*bad);
  plan_ = PlanFor(pol_, opt_.min_rounds, opt_.max_rounds);
  const double pct = req_.threshold_pct.value_or(100.0 * pol_.gate_frac);
  if (!(pct > 0 && pct < 100))
    return Status::Error("--threshold " + NumText(pct) + ": must be a percentage in (0, 100)");
  thr_ = pct / 100.0;
  measure::CommandOutput top =
      measure::RunCommand("git -C " + ShellQuote(req_.repo) + " rev-parse --show-toplevel", 60);
  if (top.exit_code != 0) return Status::Error("--repo " + req_.repo + ": not a git repository");
  repo_ = TrimRight(top.out);
  cache_ = req_.cache_dir.empty() ? env::WorktreeCache(repo_) : req_.cache_dir;
  VERITY_ASSIGN_OR_RETURN(std::string good, ResolveCommit(repo_, req_.good));
  VERITY_ASSIGN_OR_RETURN(std::string bad, ResolveCommit(repo_, req_.bad));
  VERITY_ASSIGN_OR_RETURN(auto range, FirstParentRange(repo_, good, bad, req_.good, req_.bad));
  VERITY_ASSIGN_OR_RETURN(std::string good_subject, Git(repo_, "log -1 --format=%s " + good));
  commits_.push_back({good, TrimRight(good_subject)});
  commits_.insert(commits_.end(), range.begin(), range.end());
  const int n = static_cast<int>(range.size());
  box_ = measure::ThisBox();
  VERITY_RETURN_IF_ERROR(d_.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(box_id_, EnsureBox(d_, box_));
    VERITY_ASSIGN_OR_RETURN(session_, d_.InsertSealed("bisect_sessions", {{"repo", repo_},
                                                                          {"good_ref", req_.good},
                                                                          {"good_sha", good},
                                                                          {"bad_ref", req_.bad},
                                                                          {"bad_sha", bad},
                                                                          {"metric", req_.metric},
                                                                          {"threshold_pct", pct},
                                                                          {"commits", int64_t{n}},
                                                                          {"box_id", box_id_},
                                                                          {"policy_version", int64_t{pol_.version}},
                                                                          {"bench_args", req_.bench_args},
                                                                          {"started_at", NowUtc()}}));
    return OkStatus();
  }));
  result_.session = session_;
  result_.good_sha = good;
  result_.bad_sha = bad;
  result_.metric = req_.metric;
  result_.threshold_pct = pct;
  Say("bisect session " + std::to_string(session_) + ": " + std::to_string(n) + " first-parent commits in (" +
      req_.good + " " + Short(good) + ", " + req_.bad + " " + Short(bad) + "], " + req_.metric + " threshold " +
      NumText(pct) + "% slower than good");
  return OkStatus();
}

Result<BisectResult> Session::Run() {
  VERITY_RETURN_IF_ERROR(Start());
  const int n = static_cast<int>(commits_.size()) - 1;
  const std::string &good = commits_[0].sha, &bad = commits_[n].sha;
  const double pct = result_.threshold_pct;
  auto nothing = [&](const std::string& why) { return Finish("nothing", {}, "bisect: nothing to bisect: " + why); };

  // The endpoints: good must pass parity; bad must fail it (a correctness
  // search) or be measurably slower than good by more than the threshold.
  VERITY_ASSIGN_OR_RETURN(BisectStep g, Step(commits_[0], "endpoint", "correctness", Mode::kParityOnly));
  if (g.verdict != "good")
    return nothing("--good " + req_.good + " (" + Short(good) + ") " +
                   (g.verdict == "untestable" ? "cannot be tested (" + g.note + ")" : "fails parity (" + g.note + ")") +
                   ": a search needs a good end that passes parity");
  VERITY_ASSIGN_OR_RETURN(BisectStep b, Step(commits_[n], "endpoint", "speed", Mode::kSpeed));
  if (b.verdict == "untestable")
    return nothing("--bad " + req_.bad + " (" + Short(bad) + ") cannot be tested (" + b.note + ")");
  std::string search = "speed";
  std::pair<int, int> left;
  std::string preface;
  if (b.verdict == "parity-fail") {
    Say("bisect: --bad " + Short(bad) +
        " fails parity: searching for the first commit that fails parity (a correctness "
        "break; no speed is measured)");
    search = "correctness";
    std::optional<int> unused;
    VERITY_ASSIGN_OR_RETURN(left, Search(0, n, search, &unused));
  } else {
    if (b.verdict != "bad" || b.decided_by != "bounds")
      return nothing("--bad " + req_.bad + " (" + Short(bad) + ") is not measurably slower than --good " + req_.good +
                     " by more than " + NumText(pct) + "%: " + req_.metric + " " + CiText(b) + " over " +
                     std::to_string(b.rounds) + " rounds" +
                     (b.decided_by == "median" ? " (the bounds straddle the threshold even after re-measuring)" : ""));
    std::optional<int> parity_fail;
    VERITY_ASSIGN_OR_RETURN(left, Search(0, n, search, &parity_fail));
    if (parity_fail) {
      search = "correctness";
      Say("bisect: " + Short(commits_[*parity_fail].sha) + " fails parity: the speed search stops, searching (good, " +
          Short(commits_[*parity_fail].sha) + "] for the first commit that fails parity");
      preface = " (found while searching for a " + req_.metric +
                " regression, whose culprit is not named: bisect "
                "again from a commit that passes parity)";
      VERITY_ASSIGN_OR_RETURN(left, Search(left.first, *parity_fail, search, &parity_fail));
    }
  }
  return Conclude(left, search, preface);
}

}  // namespace

nlohmann::json BisectStep::ToJson() const {
  auto opt = [](const std::optional<double>& v) {
    return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"id", id},
          {"run", run},
          {"role", role},
          {"search", search},
          {"commit", sha},
          {"subject", subject},
          {"verdict", verdict},
          {"decided_by", decided_by},
          {"workload", workload},
          {"ratio", opt(ratio)},
          {"ci", {opt(ci_low), opt(ci_high)}},
          {"alpha", opt(alpha)},
          {"rounds", rounds},
          {"remeasured", remeasured},
          {"note", note}};
}

nlohmann::json BisectResult::ToJson() const {
  nlohmann::json st = nlohmann::json::array();
  for (const auto& s : steps) st.push_back(s.ToJson());
  return {{"session", session},
          {"kind", kind},
          {"good", good_sha},
          {"bad", bad_sha},
          {"metric", metric},
          {"workload", workload},
          {"threshold_pct", threshold_pct},
          {"culprit", culprit ? nlohmann::json(*culprit) : nlohmann::json(nullptr)},
          {"culprit_subject", culprit_subject},
          {"candidates", candidates},
          {"search_steps", search_steps},
          {"skipped", skipped},
          {"steps", st},
          {"summary", summary}};
}

Result<BisectHistory> LoadBisectHistory(Db& d) {
  BisectHistory h;
  VERITY_ASSIGN_OR_RETURN(
      auto sessions, d.Query("SELECT id, good_sha, bad_sha, metric, threshold_pct FROM bisect_sessions ORDER BY id"));
  for (const auto& r : sessions) {
    BisectResult b;
    b.session = AsInt(r[0]);
    b.good_sha = AsText(r[1]);
    b.bad_sha = AsText(r[2]);
    b.metric = AsText(r[3]);
    b.threshold_pct = AsDouble(r[4]);
    VERITY_ASSIGN_OR_RETURN(auto steps,
                            d.Query("SELECT id, run_id, role, search, commit_sha, subject, verdict, decided_by, "
                                    "workload, ratio, ci_low, ci_high, alpha, rounds, remeasured, note "
                                    "FROM bisect_steps WHERE session_id = ? ORDER BY id",
                                    {b.session}));
    auto opt = [](const Value& v) { return IsNull(v) ? std::optional<double>() : std::optional<double>(AsDouble(v)); };
    for (const auto& s : steps) {
      BisectStep x;
      x.id = AsInt(s[0]);
      x.run = AsInt(s[1]);
      x.role = AsText(s[2]);
      x.search = AsText(s[3]);
      x.sha = AsText(s[4]);
      x.subject = AsText(s[5]);
      x.verdict = AsText(s[6]);
      x.decided_by = AsText(s[7]);
      x.workload = IsNull(s[8]) ? "" : AsText(s[8]);
      x.ratio = opt(s[9]);
      x.ci_low = opt(s[10]);
      x.ci_high = opt(s[11]);
      x.alpha = opt(s[12]);
      x.rounds = static_cast<int>(AsInt(s[13]));
      x.remeasured = AsInt(s[14]) != 0;
      x.note = AsText(s[15]);
      if (x.role == "step") {
        b.search_steps++;
        if (x.verdict == "untestable") b.skipped++;
      }
      b.steps.push_back(x);
    }
    VERITY_ASSIGN_OR_RETURN(auto res,
                            d.Query("SELECT kind, culprit_sha, candidates, workload, summary FROM bisect_results "
                                    "WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                                    {b.session}));
    if (res.empty()) {
      b.kind = "unfinished";
      b.summary = "unfinished (no result recorded: the session was interrupted)";
    } else {
      b.kind = AsText(res[0][0]);
      if (!IsNull(res[0][1])) b.culprit = AsText(res[0][1]);
      auto c = nlohmann::json::parse(AsText(res[0][2]), nullptr, false);
      if (c.is_array())
        for (const auto& x : c) b.candidates.push_back(x.get<std::string>());
      b.workload = IsNull(res[0][3]) ? "" : AsText(res[0][3]);
      b.summary = AsText(res[0][4]);
    }
    for (const auto& s : b.steps)
      if (b.culprit && s.sha == *b.culprit) b.culprit_subject = s.subject;
    h.sessions.push_back(std::move(b));
  }
  return h;
}

nlohmann::json ToJson(const BisectHistory& h) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : h.sessions) a.push_back(s.ToJson());
  return {{"bisect_sessions", a}};
}

std::string ToText(const BisectHistory& h) {
  std::string out = "bisect sessions (" + std::to_string(h.sessions.size()) + "):\n";
  if (h.sessions.empty()) out += "  none recorded\n";
  for (const auto& b : h.sessions) {
    out += "  session " + std::to_string(b.session) + ": " + terminal::Visible(b.metric) + " threshold " +
           NumText(b.threshold_pct) + "%, good " + Short(b.good_sha) + ", bad " + Short(b.bad_sha) + ": " + b.kind +
           "\n    " + terminal::Visible(b.summary) + "\n";
    for (const auto& s : b.steps) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on `" " + string` chains here.
      for (const std::string& p : {std::string("    "), s.role, std::string(" "), Short(s.sha), std::string(" "),
                                   terminal::Visible(s.subject), std::string(": "), s.verdict, std::string(" ("),
                                   s.search, std::string(", by "), s.decided_by, std::string(")")})
        out.append(p);
      if (s.ratio) {
        out.append(" ").append(CiText(s)).append(", ").append(std::to_string(s.rounds)).append(" rounds");
        if (s.remeasured) out.append(", re-measured");
      }
      out.append(", run ").append(std::to_string(s.run)).append("\n");
    }
  }
  return out;
}

Result<BisectResult> Bisect(Ledger& l, const BisectRequest& req, const MeasureOptions& opt) {
  Session s(l, req, opt);
  return s.Run();
}

}  // namespace verity::ledger
