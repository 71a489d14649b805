// show, frontier, history, drift: thin wiring over the ledger's read model
// (ledger/read_model.h). --json prints the Ledger's JSON; otherwise the read
// model's text printer.
#include <cstdio>
#include <memory>
#include <string>

#include "base/env.h"
#include "cli/ledger/commands.h"
#include "ledger/bisect.h"
#include "ledger/drift.h"
#include "ledger/ledger.h"
#include "ledger/predictions.h"
#include "ledger/read_model.h"
#include "render/pr_comment.h"

namespace verity::cli {
namespace {

struct Query {
  std::string path = env::LedgerPath();
  bool json = false;
  std::string verify_first;  // non-empty: the command, which refuses a ledger that fails verify
};

void AddQueryOptions(CLI::App* sub, Query& q) {
  sub->add_option("--ledger", q.path, "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER)")
      ->capture_default_str();
  sub->add_flag("--json", q.json, "print one JSON object on stdout");
}

// Opens the ledger and prints either the JSON or the text of one query.
int Run(const Query& q, const std::function<Result<nlohmann::json>(ledger::Ledger&)>& json,
        const std::function<Result<std::string>(ledger::Ledger&)>& text) {
  auto l = ledger::Ledger::Open(q.path);
  if (!l.ok()) return Fail(l.status());
  if (!q.verify_first.empty()) {
    Status sound = (*l)->RequireVerified(q.verify_first);
    if (!sound.ok()) return Fail(sound);
  }
  if (q.json) {
    auto j = json(**l);
    if (!j.ok()) return Fail(j.status());
    std::printf("%s\n", JsonLine(*j).c_str());
  } else {
    auto t = text(**l);
    if (!t.ok()) return Fail(t.status());
    std::fputs(t->c_str(), stdout);
  }
  return 0;
}

// Run over a typed view: --json prints ToJson(view), else ToText(view).
template <typename Load>
int RunView(const Query& q, Load load) {
  return Run(
      q,
      [=](ledger::Ledger& l) -> Result<nlohmann::json> {
        VERITY_ASSIGN_OR_RETURN(auto v, load(l));
        return ledger::ToJson(v);
      },
      [=](ledger::Ledger& l) -> Result<std::string> {
        VERITY_ASSIGN_OR_RETURN(auto v, load(l));
        return ledger::ToText(v);
      });
}

// show: a change with every attempt (or its pull-request comment).
void RegisterShow(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("show",
                                 "A change with every attempt: prediction, samples, parity evidence, scores "
                                 "with their decision, bounds and guards.");
  auto q = std::make_shared<Query>();
  q->verify_first = "show";
  auto id = std::make_shared<int64_t>();
  auto markdown = std::make_shared<bool>(false);
  AddQueryOptions(sub, *q);
  sub->add_option("ID", *id, "change id")->required();
  sub->add_flag("--markdown", *markdown,
                "print the latest verdict as the pull-request comment `submit --markdown` writes")
      ->excludes("--json");
  reg.On(sub, [=] {
    return Run(
        *q, [&](ledger::Ledger& l) { return l.Show(*id); },
        [&](ledger::Ledger& l) -> Result<std::string> {
          VERITY_ASSIGN_OR_RETURN(auto v, ledger::LoadChangeView(l.db(), *id));
          return *markdown ? reports::PrComment(v) : ledger::ToText(v);
        });
  });
}

// frontier: the current frontier per metric and box.
void RegisterFrontier(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("frontier",
                                 "The current frontier per metric and box, with the gate and the "
                                 "ladder steps that do not count.");
  auto q = std::make_shared<Query>();
  q->verify_first = "frontier";
  AddQueryOptions(sub, *q);
  reg.On(sub, [=] {
    return Run(
        *q, [](ledger::Ledger& l) { return l.Frontier(); },
        [](ledger::Ledger& l) -> Result<std::string> {
          VERITY_ASSIGN_OR_RETURN(auto v, ledger::LoadFrontierView(l));
          return ledger::ToText(v);
        });
  });
}

// drift: change points in main's measured speed over history.
void RegisterDrift(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("drift",
                                 "Change points in main's measured speed over history (E-divisive means "
                                 "with a permutation test), per metric, box and workload, with the "
                                 "changes recorded around each.");
  auto q = std::make_shared<Query>();
  q->verify_first = "drift";
  auto metric = std::make_shared<std::string>(), box = std::make_shared<std::string>();
  auto opt = std::make_shared<ledger::DriftOptions>();
  AddQueryOptions(sub, *q);
  sub->add_option("--metric", *metric, "only this metric");
  sub->add_option("--box", *box, "only this box fingerprint");
  sub->add_option("--alpha", opt->alpha, "significance of each change point")
      ->check(CLI::Range(0.001, 0.5))
      ->capture_default_str();
  sub->add_option("--permutations", opt->permutations, "per tested split")
      ->check(CLI::Range(19, 9999))
      ->capture_default_str();
  sub->add_option("--min-segment", opt->min_segment, "points on each side of a change point")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  reg.On(sub, [=] {
    return RunView(*q, [=](ledger::Ledger& l) { return ledger::LoadDrift(l.db(), *metric, *box, *opt); });
  });
}

// triage: a regression's triage state, recorded.
void RegisterTriage(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("triage",
                                 "Record a regression's triage state (acknowledged, investigating, "
                                 "wontfix, fixed) with who and why; each change is a sealed record.");
  auto q = std::make_shared<Query>();
  auto key = std::make_shared<std::string>(), state = std::make_shared<std::string>();
  auto by = std::make_shared<std::string>(), reason = std::make_shared<std::string>();
  auto fixed_by = std::make_shared<int64_t>(0);
  AddQueryOptions(sub, *q);
  sub->add_option("KEY", *key, "the regression, as `verity drift` names it in brackets")->required();
  sub->add_option("--state", *state, "acknowledged | investigating | wontfix | fixed")->required();
  sub->add_option("--by", *by, "who changes the state")->required();
  sub->add_option("--reason", *reason, "why")->required();
  auto* fixed = sub->add_option("--fixed-by", *fixed_by, "with --state fixed: the change that fixed it");
  reg.On(sub, [=] {
    auto l = ledger::Ledger::Open(q->path);
    if (!l.ok()) return Fail(l.status());
    auto id = ledger::RecordTriage((*l)->db(), *key, *state, *by, *reason,
                                   fixed->count() ? std::optional<int64_t>(*fixed_by) : std::nullopt);
    if (!id.ok()) return Fail(id.status());
    std::printf("triage: %s -> %s by %s (record %lld)\n", key->c_str(), state->c_str(), by->c_str(),
                static_cast<long long>(*id));
    return 0;
  });
}

// history: reverts, retractions, parked changes; predictions; bisect sessions.
void RegisterHistory(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "history",
      "Reverts (and whether later found wrong), retractions, parked changes; or `predictions`: each author's "
      "predicted vs measured gains; or `bisect`: every bisect session with its steps.");
  auto q = std::make_shared<Query>();
  q->verify_first = "history";
  auto what = std::make_shared<std::string>("all");
  AddQueryOptions(sub, *q);
  sub->add_option("KIND", *what, "reverts | retractions | none | all | predictions | bisect")
      ->check(CLI::IsMember({"reverts", "retractions", "none", "all", "predictions", "bisect"}))
      ->capture_default_str();
  reg.On(sub, [=] {
    if (*what == "predictions") {
      // Each author's predicted vs measured gains: bias, median error, share within 2x.
      return RunView(*q, [](ledger::Ledger& l) -> Result<ledger::PredictionsView> {
        VERITY_ASSIGN_OR_RETURN(auto changes, ledger::LoadChangeViews(l.db()));
        return ledger::PredictionRecord(changes);
      });
    }
    if (*what == "bisect") return RunView(*q, [](ledger::Ledger& l) { return ledger::LoadBisectHistory(l.db()); });
    return Run(
        *q, [&](ledger::Ledger& l) { return l.History(*what); },
        [&](ledger::Ledger& l) -> Result<std::string> {
          VERITY_ASSIGN_OR_RETURN(auto v, ledger::LoadHistory(l.db(), *what));
          return ledger::ToText(v);
        });
  });
}

}  // namespace

void RegisterQueryCommands(CLI::App& app, Registry& reg) {
  RegisterShow(app, reg);
  RegisterFrontier(app, reg);
  RegisterDrift(app, reg);
  RegisterTriage(app, reg);
  RegisterHistory(app, reg);
}

}  // namespace verity::cli
