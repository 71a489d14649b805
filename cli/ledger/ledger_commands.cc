// submit, confirm, remeasure, revert, reapply, retract, calibrate: thin wiring over
// ledger/ (show, frontier, history: query_commands.cc; ledger verify|migrate:
// ledger_admin_commands.cc).
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "base/env.h"
#include "base/terminal.h"
#include "ledger/format.h"
#include "measure/measure.h"
#include "cli/ledger/commands.h"
#include "cli/ledger/ref_flow.h"
#include "ledger/bisect.h"
#include "ledger/calibrate.h"
#include "ledger/ledger.h"
#include "ledger/read_model.h"
#include "render/pr_comment.h"

namespace verity::cli {
namespace {
using ledger::ChangeRequest;
using ledger::Ledger;
using ledger::MeasureOptions;
using ledger::Outcome;

struct Common {
  std::string path = env::LedgerPath();
  bool json = false;
};

void AddCommon(CLI::App* sub, Common& c, bool with_json = true) {
  sub->add_option("--ledger", c.path, "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER)")
      ->capture_default_str();
  if (with_json) sub->add_flag("--json", c.json, "print one JSON object on stdout");
}

void AddMeasureOptions(CLI::App* sub, MeasureOptions& m) {
  sub->add_option("--min-rounds", m.min_rounds,
                  "ABBA rounds before the first look (default: the policy's floor; fewer is refused)");
  sub->add_option("--max-rounds", m.max_rounds,
                  "ABBA rounds at most (default: the policy's; the rule may decide at an earlier look)");
}

Result<std::unique_ptr<Ledger>> OpenLedger(const Common& c) { return Ledger::Open(c.path); }

std::string Pct(const std::optional<double>& f) {
  return ledger::OrMissing(
      f, [](double x) { return ledger::PctText(x); }, "n/a");
}
std::string Num(const std::optional<double>& v) {
  return ledger::OrMissing(
      v, [](double x) { return ledger::NumText(x, 6); }, "n/a");
}

// Prints an outcome (one JSON object, or one summary line) and returns the exit code.
int Report(const char* cmd, const Outcome& o, bool json) {
  if (json) {
    std::printf("%s\n", JsonLine(o.ToJson()).c_str());
  } else {
    std::printf("%s: change=%lld run=%lld verdict=%s tier=%s gain=%s ci=[%s, %s] gate=%s frontier=%s->%s rounds=%d\n",
                cmd, static_cast<long long>(o.change), static_cast<long long>(o.run), ledger::VerdictName(o.verdict),
                ledger::TierName(o.tier), Pct(o.gain).c_str(), Pct(o.ci_low).c_str(), Pct(o.ci_high).c_str(),
                Num(o.gate).c_str(), Num(o.frontier_before).c_str(), Num(o.frontier_after).c_str(), o.rounds);
    if (!o.note.empty()) std::printf("  note: %s\n", terminal::Visible(o.note).c_str());
  }
  if (!o.completed())
    std::fprintf(stderr, "verity: error: run %lld failed: %s\n", static_cast<long long>(o.run),
                 terminal::Visible(o.note).c_str());
  return o.completed() ? 0 : 1;
}

// The exit code of `--exit-by-verdict`, one per verdict class (docs/ci.md): a
// CI job gates on it without parsing the summary line. `submit` records
// changes, so `refused` here means no new frontier step (its base already
// carries a counted gain): parked (3), rebasing decides it.
int VerdictExitCode(const Outcome& o) {
  switch (o.verdict) {
    case ledger::Verdict::kAccepted: return 0;
    case ledger::Verdict::kNone:
    case ledger::Verdict::kHeldSurprise:
    case ledger::Verdict::kRefused: return 3;
    case ledger::Verdict::kRejectedParity:
    case ledger::Verdict::kRejectedImplausible:
    case ledger::Verdict::kRejectedRegression:
    case ledger::Verdict::kUnverified: return 4;  // correctness not shown, or a regression
    case ledger::Verdict::kFailed: return 1;
  }
  return 1;
}

// Writes the change's pull-request comment (render/pr_comment.h) to `path`.
Status WritePrComment(Ledger& l, int64_t change, const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(ledger::ChangeView v, ledger::LoadChangeView(l.db(), change));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Error("--markdown " + path + ": cannot write");
  const std::string text = reports::PrComment(v);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return Status::Error("--markdown " + path + ": write failed");
  return OkStatus();
}

MeasureOptions WithProgress(MeasureOptions m) {
  m.timeout_s = env::CommandTimeoutSeconds();
  m.lock_dir = env::LockDir();
  m.cache_dir = env::CacheDir();
  m.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", terminal::Visible(line).c_str()); };
  return m;
}

// submit: record a change with its prediction, gate it on parity, measure and score it.
void RegisterSubmit(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("submit",
                                 "Record a change with its prediction, gate it on parity, measure it "
                                 "against its base (ABBA, same box) and score it.");
  auto c = std::make_shared<Common>();
  auto req = std::make_shared<ChangeRequest>();
  auto m = std::make_shared<MeasureOptions>();
  auto predict = std::make_shared<double>(), claim = std::make_shared<double>();
  AddCommon(sub, *c);
  sub->add_option("--title", req->title, "one-line title")->required();
  sub->add_option("--author", req->author, "who submits it")->capture_default_str();
  auto* p =
      sub->add_option("--predict", *predict, "predicted gain in percent of the frontier (required), e.g. 3.5 or -1")
          ->required();
  (void)p;
  auto* cl = sub->add_option("--claim", *claim, "claimed gain in percent (what the author says in the PR)");
  sub->add_flag("--claim-bit-identical", req->claim_bit_identical,
                "claim the head's logits are byte-identical to the base's (proved with --base-parity-cmd)");
  sub->add_option("--base-cmd", req->base_cmd, "bench-protocol command for the base");
  sub->add_option("--head-cmd", req->head_cmd, "bench-protocol command for the head");
  sub->add_option("--parity-cmd", req->parity_cmd,
                  "parity-protocol command for the head (the correctness gate); with refs, default: the head's "
                  "own `verity parity --json`");
  sub->add_option("--base-parity-cmd", req->base_parity_cmd, "parity-protocol command for the base (bit identity)");
  auto refs = std::make_shared<RefOptions>();
  sub->add_option("--base", refs->base,
                  "git ref of the base (instead of --base-cmd): built into a cached worktree "
                  "as the repository's verity.toml says");
  sub->add_option("--head", refs->head, "git ref of the head (instead of --head-cmd)");
  AddRefFlowOptions(sub, *refs);
  auto* metric = sub->add_option("--metric", req->metric,
                                 "metric to score; every other reported metric is a guard (with refs: the workload's)")
                     ->capture_default_str();
  sub->add_option("--accept-regression", req->accept_regressions,
                  "a guard metric this change may regress (declared up front, shown in the changelog); repeatable");
  sub->add_option("--reference-dtype", req->reference_dtype,
                  "parity evidence of this dtype may stand for the bench workload's own (an intended mismatch, "
                  "recorded); without it the evidence's dtype must be the workload's")
      ->check(CLI::Validator([](std::string& s) { return ledger::DtypeNameError(s); }, "DTYPE"));
  auto markdown = std::make_shared<std::string>();
  auto by_verdict = std::make_shared<bool>(false);
  sub->add_option("--markdown", *markdown,
                  "also write the verdict as a pull-request comment (markdown) to this file (docs/ci.md)");
  sub->add_flag("--exit-by-verdict", *by_verdict,
                "exit 0 accepted; 3 parked or held (none, held-surprise, refused as no new step); 4 rejected "
                "(rejected-parity, -implausible, -regression, unverified); 1 failed; 2 usage (docs/ci.md)");
  AddMeasureOptions(sub, *m);
  reg.On(sub, [=] {
    req->predict_pct = *predict;
    if (cl->count()) req->claim_pct = *claim;
    ChangeRequest r = *req;
    refs->given = RefOnlyFlagsGiven(sub);
    Status prepared = PrepareRefs(*refs, metric->count() > 0, &r);
    if (!prepared.ok()) return Fail(prepared);
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto o = (*l)->Submit(r, WithProgress(*m));
    if (!o.ok()) return Fail(o.status());
    const int code = Report("submit", o.value(), c->json);
    if (!markdown->empty()) {
      Status written = WritePrComment(**l, o->change, *markdown);
      if (!written.ok()) return Fail(written);
    }
    return *by_verdict ? VerdictExitCode(o.value()) : code;
  });
}

// bisect: the first commit between a good and a bad ref that made the metric slower (or broke parity).
void RegisterBisect(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("bisect",
                                 "Find the first commit between a good and a bad ref that made METRIC slower "
                                 "than good by more than the threshold (or that broke parity): each commit "
                                 "built once into the ref-build cache, gated on parity, measured ABBA "
                                 "against good; every step recorded (`verity history bisect`).");
  auto c = std::make_shared<Common>();
  auto m = std::make_shared<MeasureOptions>();
  auto refs = std::make_shared<RefOptions>();
  auto req = std::make_shared<ledger::BisectRequest>();
  auto threshold = std::make_shared<double>();
  AddCommon(sub, *c);
  sub->add_option("--good", req->good, "a ref whose METRIC is good (it must pass parity)")->required();
  sub->add_option("--bad", req->bad, "a later ref on its first-parent line that is slower (or fails parity)")
      ->required();
  auto* metric = sub->add_option("--metric", req->metric, "the metric searched (default: the workload's)");
  auto* th = sub->add_option("--threshold", *threshold,
                             "a commit is bad when slower than good by more than this many percent (default: the "
                             "policy's gate, 2)");
  AddRefFlowOptions(sub, *refs);
  AddMeasureOptions(sub, *m);
  reg.On(sub, [=] {
    ledger::BisectRequest r = *req;
    if (th->count()) r.threshold_pct = *threshold;
    auto prepared = PrepareBisect(*refs, metric->count() > 0, r);
    if (!prepared.ok()) return Fail(prepared.status());
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto res = ledger::Bisect(**l, *prepared, WithProgress(*m));
    if (!res.ok()) return Fail(res.status());
    if (c->json) std::printf("%s\n", JsonLine(res->ToJson()).c_str());
    else std::printf("%s\n", terminal::Visible(res->summary).c_str());
    if (!res->searched()) {
      std::fprintf(stderr, "verity: error: %s\n", terminal::Visible(res->summary).c_str());
      return 1;
    }
    return 0;
  });
}

// confirm: bank a held-surprise change once deep parity passes.
void RegisterConfirm(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("confirm", "Bank a held-surprise change after its parity passes in deep mode.");
  auto c = std::make_shared<Common>();
  auto id = std::make_shared<int64_t>();
  auto m = std::make_shared<MeasureOptions>();
  AddCommon(sub, *c);
  sub->add_option("ID", *id, "change id")->required();
  reg.On(sub, [=] {
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto o = (*l)->Confirm(*id, WithProgress(*m));
    if (!o.ok()) return Fail(o.status());
    return Report("confirm", o.value(), c->json);
  });
}

// calibrate: an A/A on this box, recorded as its noise profile.
void RegisterCalibrate(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("calibrate",
                                 "Run an A/A (the same bench command as base and head) on this box "
                                 "and record its noise profile; submissions use it to choose rounds.");
  auto c = std::make_shared<Common>();
  auto m = std::make_shared<MeasureOptions>();
  auto req = std::make_shared<ledger::CalibrateRequest>();
  AddCommon(sub, *c);
  sub->add_option("--cmd", req->cmd, "the bench command (prints verity.bench/1)")->required();
  sub->add_option("--metric", req->metric, "the metric whose noise is recorded")->capture_default_str();
  sub->add_option("--rounds", req->rounds, "ABBA rounds after the warm-up, 5..200")->capture_default_str();
  reg.On(sub, [=] {
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto p = ledger::Calibrate(**l, *req, WithProgress(*m));
    if (!p.ok()) return Fail(p.status());
    auto pol = (*l)->CurrentPolicy();
    if (!pol.ok()) return Fail(pol.status());
    const int needed = ledger::RoundsToResolve(p->sigma, pol->gate_frac, ledger::LookAlpha(ledger::PlanFor(*pol), 0));
    if (c->json) {
      nlohmann::json j = ledger::ToJson(*p);
      j["rounds_to_resolve_gate"] = needed;
      std::printf("%s\n", JsonLine(j).c_str());
    } else {
      std::printf("calibrate: box %s workload '%s' %s: %s; about %d rounds resolve the %.0f%% gate (profile %lld)\n",
                  p->box.substr(0, 16).c_str(), terminal::Visible(p->workload).c_str(),
                  terminal::Visible(p->metric).c_str(), terminal::Visible(ledger::NoiseText(*p)).c_str(), needed,
                  100.0 * pol->gate_frac, static_cast<long long>(p->id));
    }
    return 0;
  });
}

// remeasure: every parked change queued since the frontier moved.
void RegisterRemeasure(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("remeasure", "Re-measure every parked change queued since the frontier moved.");
  auto c = std::make_shared<Common>();
  auto m = std::make_shared<MeasureOptions>();
  AddCommon(sub, *c);
  AddMeasureOptions(sub, *m);
  reg.On(sub, [=] {
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto os = (*l)->Remeasure(WithProgress(*m));
    if (!os.ok()) return Fail(os.status());
    int code = 0;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& o : os.value()) {
      if (c->json) arr.push_back(o.ToJson());
      else code |= Report("remeasure", o, false);
      if (!o.completed()) code = 1;
    }
    if (c->json) std::printf("%s\n", JsonLine(nlohmann::json{{"remeasured", arr}}).c_str());
    else std::printf("remeasure: %zu queued change(s) re-measured\n", os->size());
    return code;
  });
}

// revert: undo a change, with evidence of its own or refused.
void RegisterRevert(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("revert",
                                 "Revert a change: needs its own evidence (the change costs at least the "
                                 "gate, or parity shows main is wrong); otherwise refused and recorded.");
  auto c = std::make_shared<Common>();
  auto id = std::make_shared<int64_t>();
  auto req = std::make_shared<ChangeRequest>();
  auto m = std::make_shared<MeasureOptions>();
  AddCommon(sub, *c);
  sub->add_option("ID", *id, "change id to revert")->required();
  sub->add_option("--reason", req->reason, "why")->required();
  sub->add_option("--title", req->title, "title (default: Revert \"<change title>\")");
  sub->add_option("--author", req->author, "who")->capture_default_str();
  sub->add_option("--base-cmd", req->base_cmd, "bench command for main (with the change)")->required();
  sub->add_option("--head-cmd", req->head_cmd, "bench command for main without the change")->required();
  sub->add_option("--parity-cmd", req->parity_cmd,
                  "parity command for main without the change (the head: it must pass the gate)")
      ->required();
  sub->add_option("--base-parity-cmd", req->base_parity_cmd,
                  "parity command for main (a FAIL is evidence main is wrong: accepted without speed)");
  AddMeasureOptions(sub, *m);
  reg.On(sub, [=] {
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    auto o = (*l)->Revert(*id, *req, WithProgress(*m));
    if (!o.ok()) return Fail(o.status());
    return Report("revert", o.value(), c->json);
  });
}

// reapply: undo a revert, saying why it was wrong.
void RegisterReapply(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("reapply", "Reapply a reverted change, recording why the revert was wrong.");
  auto c = std::make_shared<Common>();
  auto id = std::make_shared<int64_t>();
  auto retract = std::make_shared<int64_t>();
  auto req = std::make_shared<ChangeRequest>();
  auto m = std::make_shared<MeasureOptions>();
  AddCommon(sub, *c);
  sub->add_option("ID", *id, "the revert's change id")->required();
  sub->add_option("--reason", req->reason, "why the revert was wrong")->required();
  auto* rt = sub->add_option("--retract", *retract, "retract this run (the revert's bad evidence)");
  sub->add_option("--title", req->title, "title");
  sub->add_option("--author", req->author, "who")->capture_default_str();
  sub->add_option("--base-cmd", req->base_cmd, "bench command for main (without the change)")->required();
  sub->add_option("--head-cmd", req->head_cmd, "bench command for main with the change reapplied")->required();
  sub->add_option("--parity-cmd", req->parity_cmd, "parity command for the head")->required();
  auto predict = std::make_shared<double>();
  sub->add_option("--predict", *predict, "predicted gain in percent (required: a reapply is scored like a change)")
      ->required();
  AddMeasureOptions(sub, *m);
  reg.On(sub, [=] {
    req->predict_pct = *predict;
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    std::optional<int64_t> r;
    if (rt->count()) r = *retract;
    auto o = (*l)->Reapply(*id, *req, r, WithProgress(*m));
    if (!o.ok()) return Fail(o.status());
    return Report("reapply", o.value(), c->json);
  });
}

// retract: a run's number marked wrong, kept, out of the frontier.
void RegisterRetract(CLI::App& app, Registry& reg) {
  auto* sub =
      app.add_subcommand("retract", "Retract a run's number: kept, marked with its cause, out of the frontier.");
  auto c = std::make_shared<Common>();
  auto run = std::make_shared<int64_t>(), by = std::make_shared<int64_t>();
  auto reason = std::make_shared<std::string>();
  AddCommon(sub, *c, false);
  sub->add_option("RUN", *run, "run id")->required();
  sub->add_option("--reason", *reason, "what produced the wrong number")->required();
  auto* rb = sub->add_option("--replaced-by", *by, "the run whose number replaces it");
  reg.On(sub, [=] {
    auto l = OpenLedger(*c);
    if (!l.ok()) return Fail(l.status());
    std::optional<int64_t> r;
    if (rb->count()) r = *by;
    Status s = (*l)->Retract(*run, *reason, r);
    if (!s.ok()) return Fail(s);
    std::printf("retract: run %lld retracted\n", static_cast<long long>(*run));
    return 0;
  });
}

}  // namespace

void RegisterLedgerCommands(CLI::App& app, Registry& reg) {
  RegisterSubmit(app, reg);
  RegisterBisect(app, reg);
  RegisterConfirm(app, reg);
  RegisterCalibrate(app, reg);
  RegisterRemeasure(app, reg);
  RegisterRevert(app, reg);
  RegisterReapply(app, reg);
  RegisterRetract(app, reg);
}

}  // namespace verity::cli
