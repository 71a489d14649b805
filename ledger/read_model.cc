// The typed read model: bulk loaders, and the JSON and text printers of
// `show`, `frontier` and `history` over it. Ledger::Show, Frontier and
// History are these printers; no printer runs SQL.
#include "ledger/read_model.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/ledger.h"
#include "measure/measure.h"

namespace verity::ledger {
// Defined in ledger.cc beside CurrentPolicy: the step and budget rules policy
// `p->version` states (policy_counting, v4 on), read into *p.
Status LoadCountingRules(Db& d, Policy* p);
// ... and the parity kinds' floors (policy_parity_kinds, v5 on).
Status LoadParityFloors(Db& d, Policy* p);
}  // namespace verity::ledger

namespace verity::ledger {

const char* SideName(Side s) { return s == Side::kBase ? "base" : "head"; }
const char* ParityModeName(ParityMode m) { return m == ParityMode::kDeep ? "deep" : "standard"; }
const char* PurposeName(Purpose p) {
  switch (p) {
    case Purpose::kRemeasure: return "remeasure";
    case Purpose::kConfirm: return "confirm";
    case Purpose::kRevert: return "revert";
    case Purpose::kReapply: return "reapply";
    case Purpose::kSubmit: break;
  }
  return "submit";
}
const char* RunStatusName(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return "complete";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kIncomplete: break;
  }
  return "incomplete";
}
std::optional<Side> SideFromName(const std::string& name) {
  for (Side s : {Side::kBase, Side::kHead})
    if (name == SideName(s)) return s;
  return std::nullopt;
}
std::optional<ParityMode> ParityModeFromName(const std::string& name) {
  for (ParityMode m : {ParityMode::kStandard, ParityMode::kDeep})
    if (name == ParityModeName(m)) return m;
  return std::nullopt;
}
std::optional<Purpose> PurposeFromName(const std::string& name) {
  for (Purpose p : {Purpose::kSubmit, Purpose::kRemeasure, Purpose::kConfirm, Purpose::kRevert, Purpose::kReapply})
    if (name == PurposeName(p)) return p;
  return std::nullopt;
}
std::string ScoreDecisionName(const std::optional<Decision>& d) { return d ? DecisionName(*d) : "none"; }

std::string RunView::StateName() const {
  if (const ScoreView* s = latest()) return VerdictName(s->verdict);
  return RunStatusName(status);
}

std::string ChangeView::StateName() const {
  if (runs.empty()) return "unscored";
  // A retracted run's verdict no longer stands: say so rather than repeat it.
  return runs.back().retracted() ? "retracted (" + runs.back().StateName() + ")" : runs.back().StateName();
}

const LadderStep* LadderView::last_counted() const {
  for (const auto& s : ladder.steps)
    if (s.event.event_id == ladder.last_event && s.counted) return &s;
  return nullptr;
}

int LadderView::counted_events() const {
  int n = 0;
  for (const auto& s : ladder.steps) n += s.counted;
  return n;
}

const ChangeView* LedgerView::FindChange(int64_t id) const {
  auto it = std::lower_bound(changes.begin(), changes.end(), id,
                             [](const ChangeView& c, int64_t v) { return c.change.id < v; });
  return it != changes.end() && it->change.id == id ? &*it : nullptr;
}

const RunView* LedgerView::FindRun(int64_t id) const {
  auto it = run_index.find(id);
  return it == run_index.end() ? nullptr : &changes[it->second.first].runs[it->second.second];
}

const ScoreView* LedgerView::ScoreOfStep(const LadderStep& step) const {
  if (step.event.reason == "seed") return nullptr;
  const RunView* r = FindRun(step.event.run_id);
  if (!r) return nullptr;
  for (auto it = r->scores.rbegin(); it != r->scores.rend(); ++it)
    if (it->verdict == Verdict::kAccepted) return &*it;
  return nullptr;
}

namespace {

std::optional<double> OptD(const Value& v) { return IsNull(v) ? std::nullopt : std::optional<double>(AsDouble(v)); }
std::optional<int64_t> OptI(const Value& v) { return IsNull(v) ? std::nullopt : std::optional<int64_t>(AsInt(v)); }
std::optional<std::string> OptS(const Value& v) {
  return IsNull(v) ? std::nullopt : std::optional<std::string>(AsText(v));
}

// A stored name that must be one of a fixed set; an error names the row.
template <class E>
Result<E> Named(std::optional<E> e, Db& d, const std::string& what, const Value& v) {
  if (!e) return Status::Error(d.path() + ": " + what + " has an unknown value '" + AsText(v) + "'");
  return *e;
}

Result<bool> HasTable(Db& d, const char* name) {
  return d.HasTable(name);
}

// Whether the schema has the issue-9 tables (score_stats, score_guards, ...): a
// ledger opened at an older schema version has none.
Result<bool> HasV3Tables(Db& d) {
  return d.HasTable("score_stats");
}

// A read transaction: every query of one load sees the same snapshot (WAL), so
// a writer committing meanwhile cannot tear a view (or its tip from its rows).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Db& d) : d_(d), open_(d.BeginRead().ok()) {}
  ~ReadSnapshot() {
    if (open_) d_.EndRead();
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Db& d_;
  bool open_;
};

Result<ChangeRow> ParseChange(Db& d, const Row& r) {
  ChangeRow c;
  c.id = AsInt(r[0]);
  VERITY_ASSIGN_OR_RETURN(c.kind, Named(KindFromName(AsText(r[1])), d, "change " + std::to_string(c.id) + " kind", r[1]));
  c.title = AsText(r[2]);
  c.author = AsText(r[3]);
  c.claim_pct = OptD(r[4]);
  c.predict_pct = OptD(r[5]);
  c.claim_bit_identical = AsInt(r[6]) != 0;
  c.metric = AsText(r[7]);
  c.base_cmd = AsText(r[8]);
  c.head_cmd = AsText(r[9]);
  c.parity_cmd = OptS(r[10]);
  c.base_parity_cmd = OptS(r[11]);
  c.base_ref = OptS(r[12]);
  c.head_ref = OptS(r[13]);
  c.base_sha = OptS(r[14]);
  c.head_sha = OptS(r[15]);
  c.target_change = OptI(r[16]);
  c.reason = OptS(r[17]);
  c.created_at = AsText(r[18]);
  return c;
}
const char* kChangeCols =
    "c.id, c.kind, c.title, c.author, c.claim_pct, c.predict_pct, c.claim_bit_identical, c.metric, c.base_cmd, "
    "c.head_cmd, c.parity_cmd, c.base_parity_cmd, c.base_ref, c.head_ref, c.base_sha, c.head_sha, c.target_change, "
    "c.reason, c.created_at";

void FillEvidence(ParityView* p, int exit_code, const Value& raw) {
  if (IsNull(raw)) return;
  measure::CommandOutput out;
  out.exit_code = exit_code;
  out.out = AsText(raw);
  auto ev = measure::ParseParity(out, "recorded parity");
  if (!ev.ok()) return;
  p->has_evidence = true;
  p->build_id = ev->build_id;
  p->artifact_sha256 = ev->artifact_sha256;
  p->stated_mode = ev->mode;
  p->all_rows_sha256 = ev->all_rows_sha256;
  p->depths = static_cast<int>(ev->depths.size());
  p->window = ev->window;
  p->tokens = ev->tokens;
}

// Loads every change (only == nullopt) or one, with runs, artifacts, parity,
// sample counts, scores (with statistics and guards), failures and retractions:
// one query per table, whatever the number of rows.
Result<std::vector<ChangeView>> LoadChanges(Db& d, std::optional<int64_t> only) {
  VERITY_ASSIGN_OR_RETURN(const bool v3, HasV3Tables(d));
  std::vector<Value> args;
  if (only) args.push_back(*only);
  // Restricts a table with a run_id column (alias x) to the runs of `only`.
  const std::string by_run = only ? " JOIN runs r ON r.id = x.run_id WHERE r.change_id = ?" : "";

  std::vector<ChangeView> out;
  std::map<int64_t, size_t> change_at;
  VERITY_ASSIGN_OR_RETURN(auto cs, d.Query(std::string("SELECT ") + kChangeCols + " FROM changes c" +
                                               (only ? " WHERE c.id = ?" : "") + " ORDER BY c.id",
                                           args));
  for (const auto& r : cs) {
    ChangeView v;
    VERITY_ASSIGN_OR_RETURN(v.change, ParseChange(d, r));
    change_at[v.change.id] = out.size();
    out.push_back(std::move(v));
  }
  if (out.empty()) return out;

  // Related: the changes that target each one.
  if (only) {
    VERITY_ASSIGN_OR_RETURN(auto rel, d.Query("SELECT id, kind, title, reason FROM changes WHERE target_change = ? ORDER BY id", args));
    for (const auto& r : rel) {
      RelatedChange x;
      x.id = AsInt(r[0]);
      VERITY_ASSIGN_OR_RETURN(x.kind, Named(KindFromName(AsText(r[1])), d, "change " + std::to_string(x.id) + " kind", r[1]));
      x.title = AsText(r[2]);
      x.reason = OptS(r[3]);
      out[0].related.push_back(x);
    }
  } else {
    for (const auto& c : out) {
      if (!c.change.target_change) continue;
      auto it = change_at.find(*c.change.target_change);
      if (it != change_at.end())
        out[it->second].related.push_back(RelatedChange{c.change.id, c.change.kind, c.change.title, c.change.reason});
    }
  }

  if (v3) {
    VERITY_ASSIGN_OR_RETURN(auto ar, d.Query(std::string("SELECT change_id, metric FROM accepted_regressions") +
                                                 (only ? " WHERE change_id = ?" : "") + " ORDER BY id",
                                             args));
    for (const auto& r : ar)
      if (auto it = change_at.find(AsInt(r[0])); it != change_at.end()) out[it->second].accept_regressions.push_back(AsText(r[1]));
  }

  // Runs, and where each one lives.
  std::map<int64_t, std::pair<size_t, size_t>> run_at;
  VERITY_ASSIGN_OR_RETURN(auto rs, d.Query(std::string("SELECT r.id, r.change_id, r.purpose, r.box_id, b.fingerprint, "
                                                       "r.started_at, r.policy_version, r.min_rounds, r.max_rounds, "
                                                       "r.queue_id FROM runs r JOIN boxes b ON b.id = r.box_id") +
                                               (only ? " WHERE r.change_id = ?" : "") + " ORDER BY r.id",
                                           args));
  for (const auto& r : rs) {
    auto it = change_at.find(AsInt(r[1]));
    if (it == change_at.end()) continue;
    RunView v;
    v.id = AsInt(r[0]);
    v.change_id = AsInt(r[1]);
    VERITY_ASSIGN_OR_RETURN(v.purpose, Named(PurposeFromName(AsText(r[2])), d, "run " + std::to_string(v.id) + " purpose", r[2]));
    v.box_id = AsInt(r[3]);
    v.box = AsText(r[4]);
    v.started_at = AsText(r[5]);
    v.policy_version = static_cast<int>(AsInt(r[6]));
    v.min_rounds = static_cast<int>(AsInt(r[7]));
    v.max_rounds = static_cast<int>(AsInt(r[8]));
    v.queue_id = OptI(r[9]);
    auto& runs = out[it->second].runs;
    run_at[v.id] = {it->second, runs.size()};
    runs.push_back(std::move(v));
  }
  auto run_of = [&](const Value& id) -> RunView* {
    auto it = run_at.find(AsInt(id));
    return it == run_at.end() ? nullptr : &out[it->second.first].runs[it->second.second];
  };
  // Workloads and noise profiles in two reads, not two per run (on a
  // PostgreSQL ledger of 10k runs those were 20k round trips).
  VERITY_ASSIGN_OR_RETURN(auto wl, d.Query("SELECT x.run_id, x.workload FROM run_workloads x" + by_run, args));
  for (const auto& r : wl)
    if (RunView* run = run_of(r[0])) run->workload = AsText(r[1]);
  VERITY_ASSIGN_OR_RETURN(const auto profiles, LoadNoiseProfiles(d));
  std::map<std::tuple<std::string, std::string, std::string>, const NoiseProfile*> latest_noise;  // box, metric, workload
  for (const auto& n : profiles) latest_noise[{n.box, n.metric, n.workload}] = &n;  // ascending ids: the last is latest
  for (auto& cv : out)
    for (auto& r : cv.runs) {
      auto it = latest_noise.find({r.box, cv.change.metric, r.workload});
      if (it != latest_noise.end() && it->second->recorded_at <= r.started_at) r.noise = *it->second;
    }

  VERITY_ASSIGN_OR_RETURN(auto arts, d.Query("SELECT x.run_id, x.side, x.build_id, x.artifact_sha256 FROM artifacts x" +
                                                 by_run + " ORDER BY x.id",
                                             args));
  for (const auto& r : arts) {
    RunView* run = run_of(r[0]);
    if (!run) continue;
    ArtifactView a;
    VERITY_ASSIGN_OR_RETURN(a.side, Named(SideFromName(AsText(r[1])), d, "artifact side of run " + std::to_string(run->id), r[1]));
    a.build_id = AsText(r[2]);
    a.artifact_sha256 = AsText(r[3]);
    run->artifacts.push_back(a);
  }

  VERITY_ASSIGN_OR_RETURN(auto par, d.Query("SELECT x.run_id, x.id, x.side, x.mode, x.exit_code, x.passed, x.worst_top1, "
                                            "x.worst_mean_kl, x.logits_sha256, x.message, x.seconds, x.raw_json "
                                            "FROM parity_results x" + by_run + " ORDER BY x.id",
                                            args));
  for (const auto& r : par) {
    RunView* run = run_of(r[0]);
    if (!run) continue;
    ParityView p;
    p.id = AsInt(r[1]);
    const std::string what = "parity result " + std::to_string(p.id);
    VERITY_ASSIGN_OR_RETURN(p.side, Named(SideFromName(AsText(r[2])), d, what + " side", r[2]));
    VERITY_ASSIGN_OR_RETURN(p.mode, Named(ParityModeFromName(AsText(r[3])), d, what + " mode", r[3]));
    p.exit_code = static_cast<int>(AsInt(r[4]));
    p.passed = AsInt(r[5]) != 0;
    p.worst_top1 = OptD(r[6]);
    p.worst_mean_kl = OptD(r[7]);
    p.logits_sha256 = OptS(r[8]);
    p.message = AsText(r[9]);
    p.seconds = AsDouble(r[10]);
    FillEvidence(&p, p.exit_code, r[11]);
    run->parity.push_back(std::move(p));
  }

  VERITY_ASSIGN_OR_RETURN(auto cnt, d.Query(only ? "SELECT x.run_id, count(*), sum(CASE WHEN x.round = 0 THEN 1 ELSE 0 END) FROM samples x JOIN runs r "
                                                   "ON r.id = x.run_id WHERE r.change_id = ? GROUP BY x.run_id"
                                                 : "SELECT x.run_id, count(*), sum(CASE WHEN x.round = 0 THEN 1 ELSE 0 END) FROM samples x GROUP BY x.run_id",
                                            args));
  for (const auto& r : cnt)
    if (RunView* run = run_of(r[0])) {
      run->samples = AsInt(r[1]);
      run->warmup_samples = AsInt(r[2]);
    }

  std::map<int64_t, ScoreView*> score_at;  // filled after every score is in place
  VERITY_ASSIGN_OR_RETURN(
      auto sc, d.Query(std::string("SELECT x.id, x.run_id, x.policy_version, x.verdict, x.tier, x.gain, x.ci_low, x.ci_high, "
                                   "x.gate, x.frontier_before, x.frontier_after, x.base_median, x.head_median, x.rounds, "
                                   "x.surprise, x.note, x.scored_at, ") +
                           (v3 ? "st.score_id, st.metric, st.attempt, st.alpha, st.ratio, st.ratio_low, st.ratio_high, "
                                 "st.decision FROM scores x LEFT JOIN score_stats st ON st.score_id = x.id"
                               : "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM scores x") +
                           by_run + " ORDER BY x.id",
                       args));
  for (const auto& r : sc) {
    RunView* run = run_of(r[1]);
    if (!run) continue;
    ScoreView s;
    s.id = AsInt(r[0]);
    s.run_id = run->id;
    const std::string what = "score " + std::to_string(s.id);
    s.policy_version = static_cast<int>(AsInt(r[2]));
    VERITY_ASSIGN_OR_RETURN(s.verdict, Named(VerdictFromName(AsText(r[3])), d, what + " verdict", r[3]));
    VERITY_ASSIGN_OR_RETURN(s.tier, Named(TierFromName(AsText(r[4])), d, what + " tier", r[4]));
    s.gain = OptD(r[5]);
    s.ci_low = OptD(r[6]);
    s.ci_high = OptD(r[7]);
    s.gate = OptD(r[8]);
    s.frontier_before = OptD(r[9]);
    s.frontier_after = OptD(r[10]);
    s.base_median = OptD(r[11]);
    s.head_median = OptD(r[12]);
    s.rounds = static_cast<int>(AsInt(r[13]));
    s.surprise = AsInt(r[14]) != 0;
    s.note = AsText(r[15]);
    s.scored_at = AsText(r[16]);
    if (!IsNull(r[17])) {
      ScoreStatsView st;
      st.metric = AsText(r[18]);
      st.attempt = static_cast<int>(AsInt(r[19]));
      st.alpha = OptD(r[20]);
      st.ratio = OptD(r[21]);
      st.ratio_low = OptD(r[22]);
      st.ratio_high = OptD(r[23]);
      const std::string dec = AsText(r[24]);
      if (dec != "none") {
        std::optional<Decision> found;
        for (Decision x : {Decision::kAbove, Decision::kBelow, Decision::kUnresolved, Decision::kContinue})
          if (dec == DecisionName(x)) found = x;
        VERITY_ASSIGN_OR_RETURN(st.decision, Named(found, d, what + " decision", r[24]));
      }
      s.stats = st;
    }
    run->scores.push_back(std::move(s));
  }
  for (auto& c : out)
    for (auto& run : c.runs)
      for (auto& s : run.scores) score_at[s.id] = &s;

  if (v3) {
    VERITY_ASSIGN_OR_RETURN(const bool floors, HasTable(d, "score_guard_floors"));
    VERITY_ASSIGN_OR_RETURN(auto gs, d.Query(std::string("SELECT g.score_id, g.metric, g.higher_is_better, g.ratio, "
                                                         "g.ratio_low, g.ratio_high, g.regressed, g.declared, ") +
                                                 (floors ? "f.base_median, f.head_median, f.amount, f.unit, f.beyond_gate "
                                                           "FROM score_guards g LEFT JOIN score_guard_floors f ON "
                                                           "f.guard_id = g.id"
                                                         : "NULL, NULL, NULL, NULL, NULL FROM score_guards g") +
                                                 (only ? " JOIN scores x ON x.id = g.score_id" + by_run : "") +
                                                 " ORDER BY g.id",
                                             args));
    for (const auto& r : gs) {
      auto it = score_at.find(AsInt(r[0]));
      if (it == score_at.end()) continue;
      GuardView g;
      g.metric = AsText(r[1]);
      g.higher_is_better = AsInt(r[2]) != 0;
      g.ratio = AsDouble(r[3]);
      g.ratio_low = OptD(r[4]);
      g.ratio_high = OptD(r[5]);
      g.regressed = AsInt(r[6]) != 0;
      g.declared = AsInt(r[7]) != 0;
      if (!IsNull(r[8]))
        g.floor = GuardFloorView{AsDouble(r[8]), AsDouble(r[9]), AsDouble(r[10]), AsText(r[11]), AsInt(r[12]) != 0};
      it->second->guards.push_back(g);
    }
  }

  VERITY_ASSIGN_OR_RETURN(auto fl, d.Query("SELECT x.run_id, x.message FROM run_failures x" + by_run + " ORDER BY x.id", args));
  for (const auto& r : fl)
    if (RunView* run = run_of(r[0]); run && !run->failure) run->failure = AsText(r[1]);

  VERITY_ASSIGN_OR_RETURN(auto rt, d.Query("SELECT x.id, x.run_id, x.reason, x.replaced_by_run, x.by_change, x.retracted_at "
                                           "FROM retractions x" + by_run + " ORDER BY x.id",
                                           args));
  for (const auto& r : rt)
    if (RunView* run = run_of(r[1]); run && !run->retraction)
      run->retraction = RetractionView{AsInt(r[0]), AsInt(r[1]), AsText(r[2]), AsText(r[5]), OptI(r[3]), OptI(r[4])};

  for (auto& c : out)
    for (auto& run : c.runs)
      run.status = !run.scores.empty() ? RunStatus::kComplete : run.failure ? RunStatus::kFailed : RunStatus::kIncomplete;
  return out;
}

// ---- JSON ----

template <class T>
nlohmann::json J(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json Nonempty(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
nlohmann::json OptVerdict(const std::optional<Verdict>& v) { return v ? nlohmann::json(VerdictName(*v)) : nlohmann::json(nullptr); }
std::optional<double> Minus1(const std::optional<double>& r) {
  return r ? std::optional<double>(*r - 1.0) : std::nullopt;
}

nlohmann::json ToJson(const ChangeRow& c, const std::vector<std::string>& accept_regressions) {
  return {{"id", c.id},
          {"kind", KindName(c.kind)},
          {"title", c.title},
          {"author", c.author},
          {"claim_pct", J(c.claim_pct)},
          {"predict_pct", J(c.predict_pct)},
          {"claim_bit_identical", int64_t{c.claim_bit_identical}},
          {"metric", c.metric},
          {"base_cmd", c.base_cmd},
          {"head_cmd", c.head_cmd},
          {"parity_cmd", J(c.parity_cmd)},
          {"base_parity_cmd", J(c.base_parity_cmd)},
          {"base_ref", J(c.base_ref)},
          {"head_ref", J(c.head_ref)},
          {"base_sha", J(c.base_sha)},
          {"head_sha", J(c.head_sha)},
          {"target_change", J(c.target_change)},
          {"reason", J(c.reason)},
          {"created_at", c.created_at},
          {"accept_regressions", accept_regressions}};
}

nlohmann::json ToJson(const GuardView& g) {
  nlohmann::json j = {{"metric", g.metric},
                      {"higher_is_better", g.higher_is_better},
                      {"gain", g.gain()},
                      {"low", J(Minus1(g.ratio_low))},
                      {"high", J(Minus1(g.ratio_high))},
                      {"regressed", g.regressed},
                      {"declared", g.declared}};
  if (g.floor)
    j.update({{"base_median", g.floor->base_median},
              {"head_median", g.floor->head_median},
              {"floor", g.floor->amount},
              {"unit", g.floor->unit},
              {"beyond_gate", g.floor->beyond_gate},
              {"within_floor", g.within_floor()}});
  return j;
}

nlohmann::json ToJson(const ScoreView& s) {
  nlohmann::json guards = nlohmann::json::array();
  for (const auto& g : s.guards) guards.push_back(ToJson(g));
  const ScoreStatsView* st = s.stats ? &*s.stats : nullptr;
  return {{"id", s.id},
          {"verdict", VerdictName(s.verdict)},
          {"tier", TierName(s.tier)},
          {"gain", J(s.gain)},
          {"ci_low", J(s.ci_low)},
          {"ci_high", J(s.ci_high)},
          {"gate", J(s.gate)},
          {"frontier_before", J(s.frontier_before)},
          {"frontier_after", J(s.frontier_after)},
          {"base_median", J(s.base_median)},
          {"head_median", J(s.head_median)},
          {"rounds", s.rounds},
          {"surprise", int64_t{s.surprise}},
          {"policy_version", s.policy_version},
          {"note", s.note},
          {"scored_at", s.scored_at},
          {"attempt", st ? nlohmann::json(st->attempt) : nlohmann::json(nullptr)},
          {"alpha", st ? J(st->alpha) : nlohmann::json(nullptr)},
          {"ratio", st ? J(st->ratio) : nlohmann::json(nullptr)},
          {"ratio_low", st ? J(st->ratio_low) : nlohmann::json(nullptr)},
          {"ratio_high", st ? J(st->ratio_high) : nlohmann::json(nullptr)},
          {"decision", st ? nlohmann::json(ScoreDecisionName(st->decision)) : nlohmann::json(nullptr)},
          {"guards", guards}};
}

nlohmann::json ToJson(const ParityView& p) {
  return {{"side", SideName(p.side)},
          {"mode", ParityModeName(p.mode)},
          {"exit_code", p.exit_code},
          {"passed", int64_t{p.passed}},
          {"worst_top1", J(p.worst_top1)},
          {"worst_mean_kl", J(p.worst_mean_kl)},
          {"logits_sha256", J(p.logits_sha256)},
          {"all_rows_sha256", p.has_evidence ? Nonempty(p.all_rows_sha256) : nlohmann::json(nullptr)},
          {"message", p.message},
          {"evidence", p.has_evidence},
          {"build_id", p.has_evidence ? Nonempty(p.build_id) : nlohmann::json(nullptr)},
          {"artifact_sha256", p.has_evidence ? Nonempty(p.artifact_sha256) : nlohmann::json(nullptr)},
          {"stated_mode", p.has_evidence ? Nonempty(p.stated_mode) : nlohmann::json(nullptr)},
          {"depths", p.has_evidence ? nlohmann::json(p.depths) : nlohmann::json(nullptr)},
          {"window", p.has_evidence ? nlohmann::json(p.window) : nlohmann::json(nullptr)},
          {"tokens", p.has_evidence ? nlohmann::json(p.tokens) : nlohmann::json(nullptr)}};
}

nlohmann::json ToJson(const RetractionView& t) {
  return {{"reason", t.reason}, {"replaced_by_run", J(t.replaced_by_run)}, {"by_change", J(t.by_change)},
          {"retracted_at", t.retracted_at}};
}

nlohmann::json ToJson(const RunView& r) {
  nlohmann::json j = {{"run", r.id},
                      {"purpose", PurposeName(r.purpose)},
                      {"started_at", r.started_at},
                      {"box", r.box},
                      {"queue_id", J(r.queue_id)},
                      {"min_rounds", r.min_rounds},
                      {"max_rounds", r.max_rounds},
                      {"policy_version", r.policy_version},
                      {"samples", r.samples},
                      {"warmup_samples", r.warmup_samples},
                      {"status", RunStatusName(r.status)},
                      {"workload", r.workload},
                      {"noise", r.noise ? ToJson(*r.noise) : nlohmann::json(nullptr)},
                      {"retraction", r.retraction ? ToJson(*r.retraction) : nlohmann::json(nullptr)}};
  j["artifacts"] = nlohmann::json::array();
  for (const auto& a : r.artifacts)
    j["artifacts"].push_back({{"side", SideName(a.side)}, {"build_id", a.build_id}, {"artifact_sha256", a.artifact_sha256}});
  j["parity"] = nlohmann::json::array();
  for (const auto& p : r.parity) j["parity"].push_back(ToJson(p));
  j["scores"] = nlohmann::json::array();
  for (const auto& s : r.scores) j["scores"].push_back(ToJson(s));
  if (r.status == RunStatus::kFailed) j["failure"] = r.failure.value_or("");
  return j;
}

// ---- text ----

std::string Pct(const std::optional<double>& f) { return f ? PctText(*f) : "n/a"; }
std::string Num(const std::optional<double>& v) { return v ? NumText(*v, 6) : "n/a"; }
std::string Ratio(const std::optional<double>& v) {
  if (!v) return "none";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", *v);
  return b;
}
std::string Or(const std::optional<std::string>& s, const char* dflt = "n/a") { return s ? *s : dflt; }
std::string Id(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "n/a"; }
// The shortest form that round-trips, as the JSON printer writes it (15.0, 3.5).
std::string Plain(double v) { return nlohmann::json(v).dump(); }
std::string V(const std::string& s) { return terminal::Visible(s); }
std::string Prefix(const std::string& s, size_t n) { return s.empty() ? "(not stated)" : s.substr(0, n); }

std::string Line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Line(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf) + "\n";
}

std::string GuardText(const GuardView& g) {
  std::string s = g.metric + " " + Pct(g.gain()) + " [" + (g.ratio_low ? Pct(Minus1(g.ratio_low)) : "none") + ", " +
                  (g.ratio_high ? Pct(Minus1(g.ratio_high)) : "none") + "]";
  const std::string floor = FloorText(g);
  if (g.within_floor()) return s + ": " + floor + (g.declared ? " (declared up front, not needed)" : "");
  s += g.regressed ? ": regressed" : ": not regressed";
  if (!floor.empty()) s += ", " + floor;
  if (g.declared) s += g.regressed ? " (declared up front)" : " (declared up front, not needed)";
  else if (g.regressed) s += " (undeclared)";
  return s;
}

}  // namespace

std::string BitIdentityText(const RunView& r) {
  // The standard evidence of each side, as the gate judged it (a confirm's deep evidence is not the claim's).
  const ParityView *head = nullptr, *base = nullptr;
  for (const auto& p : r.parity)
    if (p.mode == ParityMode::kStandard) (p.side == Side::kHead ? head : base) = &p;
  const std::string h = head ? head->all_rows_sha256 : "", b = base ? base->all_rows_sha256 : "";
  if (h.empty() || b.empty())
    return std::string("bit identity claimed, not proved: no evidence hashing every logit row (all_rows_sha256) on the ") +
           (h.empty() && b.empty() ? "head or base" : h.empty() ? "head" : "base") + " side";
  if (h != b)
    return "bit identity claimed, not proved: the logit rows differ (head " + h.substr(0, 16) + " vs base " + b.substr(0, 16) + ")";
  return "bit identity proved: every logit row hashes to " + h.substr(0, 16) + " on both sides";
}

std::string FloorText(const GuardView& g) {
  if (!g.floor) return "";
  GuardResult r;
  r.higher_is_better = g.higher_is_better;
  r.base_median = g.floor->base_median;
  r.head_median = g.floor->head_median;
  r.floor = GuardFloor{"", g.floor->amount, g.floor->unit};
  r.beyond_gate = g.floor->beyond_gate;
  r.regressed = g.regressed;
  return ledger::FloorText(r);
}

// ---- loaders ----

Result<ChangeView> LoadChangeView(Db& d, int64_t change_id) {
  ReadSnapshot snap(d);
  VERITY_ASSIGN_OR_RETURN(auto v, LoadChanges(d, change_id));
  if (v.empty()) return Status::Error("show: change " + std::to_string(change_id) + " does not exist in " + d.path());
  return std::move(v[0]);
}

Result<std::vector<ChangeView>> LoadChangeViews(Db& d) {
  ReadSnapshot snap(d);
  return LoadChanges(d, std::nullopt);
}

Result<std::vector<LadderView>> LoadLadders(Db& d) {
  VERITY_ASSIGN_OR_RETURN(auto boxes, d.Query("SELECT id, fingerprint FROM boxes"));
  std::map<int64_t, std::string> fingerprint;
  for (const auto& b : boxes) fingerprint[AsInt(b[0])] = AsText(b[1]);
  VERITY_ASSIGN_OR_RETURN(auto ladders, LoadEveryLadder(d));
  std::vector<LadderView> out;
  for (auto& [key, ladder] : ladders) {
    LadderView v;
    v.metric = key.metric;
    v.box_id = key.box_id;
    v.box = fingerprint[key.box_id];
    v.workload = key.workload;
    v.ladder = std::move(ladder);
    out.push_back(std::move(v));
  }
  return out;
}

Result<FrontierView> LoadFrontierView(Ledger& l) {
  VERITY_ASSIGN_OR_RETURN(Policy pol, l.CurrentPolicy());
  FrontierView f;
  f.policy_version = pol.version;
  f.gate_frac = pol.gate_frac;
  ReadSnapshot snap(l.db());
  VERITY_ASSIGN_OR_RETURN(f.ladders, LoadLadders(l.db()));
  return f;
}

Result<HistoryView> LoadHistory(Db& d, const std::string& what) {
  if (what != "reverts" && what != "retractions" && what != "none" && what != "all")
    return Status::Error("history: unknown kind '" + what + "' (expected reverts, retractions, none or all)");
  ReadSnapshot snap(d);
  VERITY_ASSIGN_OR_RETURN(const bool v3, HasV3Tables(d));
  HistoryView h;
  if (what == "reverts" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT c.id, c.kind, c.title, c.target_change, c.reason, c.created_at "
                                               "FROM changes c WHERE c.kind IN ('revert', 'reapply') ORDER BY c.id"));
    VERITY_ASSIGN_OR_RETURN(auto runs, d.Query("SELECT r.change_id, r.id FROM runs r JOIN changes c ON c.id = r.change_id "
                                               "WHERE c.kind IN ('revert', 'reapply') ORDER BY r.id"));
    VERITY_ASSIGN_OR_RETURN(auto verdicts, d.Query("SELECT r.change_id, s.verdict, s.id FROM scores s JOIN runs r ON "
                                                   "r.id = s.run_id JOIN changes c ON c.id = r.change_id WHERE c.kind "
                                                   "IN ('revert', 'reapply') ORDER BY s.id"));
    std::vector<RevertEntry> list;
    std::map<int64_t, size_t> at;
    for (const auto& r : rows) {
      RevertEntry e;
      e.id = AsInt(r[0]);
      VERITY_ASSIGN_OR_RETURN(e.kind, Named(KindFromName(AsText(r[1])), d, "change " + std::to_string(e.id) + " kind", r[1]));
      e.title = AsText(r[2]);
      e.target = OptI(r[3]);
      e.reason = OptS(r[4]);
      e.created_at = AsText(r[5]);
      at[e.id] = list.size();
      list.push_back(std::move(e));
    }
    for (const auto& r : runs)
      if (auto it = at.find(AsInt(r[0])); it != at.end()) list[it->second].runs.push_back(AsInt(r[1]));
    for (const auto& r : verdicts)
      if (auto it = at.find(AsInt(r[0])); it != at.end()) {
        VERITY_ASSIGN_OR_RETURN(Verdict v, Named(VerdictFromName(AsText(r[1])), d, "score " + std::to_string(AsInt(r[2])) + " verdict", r[1]));
        list[it->second].verdict = v;
      }
    // A revert was found wrong only by a reapply that was accepted, not by any attempt.
    for (const auto& e : list)
      if (e.kind == Kind::kReapply && e.target && e.verdict == Verdict::kAccepted)
        if (auto it = at.find(*e.target); it != at.end() && list[it->second].kind == Kind::kRevert &&
                                          !list[it->second].reapplied_by)
          list[it->second].reapplied_by = e.id;
    h.reverts = std::move(list);
  }
  if (what == "retractions" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT t.id, t.run_id, r.change_id, c.title, t.reason, t.replaced_by_run, t.by_change, "
                           "t.retracted_at, s.verdict, s.gain, s.base_median, s.head_median FROM retractions t "
                           "JOIN runs r ON r.id = t.run_id JOIN changes c ON c.id = r.change_id "
                           "LEFT JOIN scores s ON s.id = (SELECT max(id) FROM scores WHERE run_id = t.run_id) ORDER BY t.id"));
    std::vector<RetractionEntry> list;
    for (const auto& r : rows) {
      RetractionEntry e;
      e.retraction = RetractionView{AsInt(r[0]), AsInt(r[1]), AsText(r[4]), AsText(r[7]), OptI(r[5]), OptI(r[6])};
      e.change = AsInt(r[2]);
      e.title = AsText(r[3]);
      if (!IsNull(r[8])) {
        VERITY_ASSIGN_OR_RETURN(e.verdict, Named(VerdictFromName(AsText(r[8])), d, "verdict of run " + std::to_string(AsInt(r[1])), r[8]));
      }
      e.gain = OptD(r[9]);
      e.base_median = OptD(r[10]);
      e.head_median = OptD(r[11]);
      list.push_back(std::move(e));
    }
    h.retractions = std::move(list);
  }
  if (what == "none" || what == "all") {
    // Every change ever parked, with each attempt and the frontier it faced.
    const std::string parked =
        "SELECT DISTINCT r2.change_id FROM scores s2 JOIN runs r2 ON r2.id = s2.run_id JOIN changes c2 ON c2.id = "
        "r2.change_id WHERE s2.verdict = 'none' AND c2.kind = 'change'";
    VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT c.id, c.title FROM changes c WHERE c.id IN (" + parked + ") ORDER BY c.id"));
    VERITY_ASSIGN_OR_RETURN(
        auto att, d.Query(std::string("SELECT r.change_id, r.id, r.purpose, s.verdict, s.tier, s.gain, s.frontier_before, "
                                      "s.scored_at, s.id, ") +
                              (v3 ? "st.attempt, st.alpha FROM scores s JOIN runs r ON r.id = s.run_id LEFT JOIN "
                                    "score_stats st ON st.score_id = s.id"
                                  : "NULL, NULL FROM scores s JOIN runs r ON r.id = s.run_id") +
                              " WHERE r.change_id IN (" + parked + ") ORDER BY s.id"));
    VERITY_ASSIGN_OR_RETURN(auto queued, d.Query("SELECT q.change_id, count(*) FROM remeasure_queue q WHERE q.id NOT IN "
                                                 "(SELECT r.queue_id FROM runs r JOIN scores s ON s.run_id = r.id WHERE "
                                                 "r.queue_id IS NOT NULL) GROUP BY q.change_id"));
    std::vector<ParkedChange> list;
    std::map<int64_t, size_t> at;
    for (const auto& r : rows) {
      at[AsInt(r[0])] = list.size();
      list.push_back(ParkedChange{AsInt(r[0]), AsText(r[1]), {}, false});
    }
    for (const auto& r : att) {
      auto it = at.find(AsInt(r[0]));
      if (it == at.end()) continue;
      ParkedAttempt a;
      a.run = AsInt(r[1]);
      a.score = AsInt(r[8]);
      const std::string what_s = "score " + std::to_string(a.score);
      VERITY_ASSIGN_OR_RETURN(a.purpose, Named(PurposeFromName(AsText(r[2])), d, "run " + std::to_string(a.run) + " purpose", r[2]));
      VERITY_ASSIGN_OR_RETURN(a.verdict, Named(VerdictFromName(AsText(r[3])), d, what_s + " verdict", r[3]));
      VERITY_ASSIGN_OR_RETURN(a.tier, Named(TierFromName(AsText(r[4])), d, what_s + " tier", r[4]));
      a.gain = OptD(r[5]);
      a.frontier_before = OptD(r[6]);
      a.scored_at = AsText(r[7]);
      if (!IsNull(r[9])) a.attempt = static_cast<int>(AsInt(r[9]));
      a.alpha = OptD(r[10]);
      list[it->second].attempts.push_back(a);
    }
    for (const auto& r : queued)
      if (auto it = at.find(AsInt(r[0])); it != at.end()) list[it->second].queued = AsInt(r[1]) > 0;
    h.none = std::move(list);
  }
  if (what == "all") {
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT s.scored_at, c.id, c.kind, c.title, r.id, r.purpose, s.verdict, s.tier, s.gain, "
                           "s.frontier_before, s.frontier_after, s.id FROM scores s JOIN runs r ON r.id = s.run_id JOIN "
                           "changes c ON c.id = r.change_id ORDER BY s.id"));
    std::vector<TimelineEntry> list;
    list.reserve(rows.size());
    for (const auto& r : rows) {
      TimelineEntry t;
      const std::string what_s = "score " + std::to_string(AsInt(r[11]));
      t.at = AsText(r[0]);
      t.change = AsInt(r[1]);
      VERITY_ASSIGN_OR_RETURN(t.kind, Named(KindFromName(AsText(r[2])), d, "change " + std::to_string(t.change) + " kind", r[2]));
      t.title = AsText(r[3]);
      t.run = AsInt(r[4]);
      VERITY_ASSIGN_OR_RETURN(t.purpose, Named(PurposeFromName(AsText(r[5])), d, "run " + std::to_string(t.run) + " purpose", r[5]));
      VERITY_ASSIGN_OR_RETURN(t.verdict, Named(VerdictFromName(AsText(r[6])), d, what_s + " verdict", r[6]));
      VERITY_ASSIGN_OR_RETURN(t.tier, Named(TierFromName(AsText(r[7])), d, what_s + " tier", r[7]));
      t.gain = OptD(r[8]);
      t.frontier_before = OptD(r[9]);
      t.frontier_after = OptD(r[10]);
      list.push_back(std::move(t));
    }
    h.timeline = std::move(list);
  }
  return h;
}

Result<std::vector<PolicyView>> LoadPolicies(Db& d) {
  VERITY_ASSIGN_OR_RETURN(const bool v3, HasV3Tables(d));
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      d.Query(std::string("SELECT p.version, p.gate_frac, p.tiers, p.ceiling_ratio, p.parity_min_top1, "
                          "p.parity_max_mean_kl, p.surprise_factor, ") +
              (v3 ? "r.version, r.min_rounds, r.max_rounds, r.look_every, r.alpha, r.parity_min_depths, "
                    "r.parity_min_positions, r.deep_factor, r.gain_rule FROM policy p LEFT JOIN policy_rules r ON "
                    "r.version = p.version"
                  : "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM policy p") +
              " ORDER BY p.version"));
  VERITY_ASSIGN_OR_RETURN(auto counts, d.Query("SELECT policy_version, count(*) FROM scores GROUP BY policy_version"));
  std::map<int64_t, int64_t> scored;
  for (const auto& r : counts) scored[AsInt(r[0])] = AsInt(r[1]);
  std::vector<PolicyView> out;
  for (const auto& r : rows) {
    PolicyView v;
    Policy& p = v.policy;
    p.version = static_cast<int>(AsInt(r[0]));
    p.gate_frac = AsDouble(r[1]);
    try {
      for (const auto& t : nlohmann::json::parse(AsText(r[2]))) {
        auto tier = TierFromName(t.at(0).get<std::string>());
        if (!tier) return Status::Error(d.path() + ": policy v" + std::to_string(p.version) + " names an unknown tier");
        p.tiers.emplace_back(*tier, t.at(1).get<double>());
      }
    } catch (const std::exception&) {
      return Status::Error(d.path() + ": policy v" + std::to_string(p.version) + " tiers are unreadable");
    }
    p.ceiling_ratio = AsDouble(r[3]);
    p.parity_min_top1 = AsDouble(r[4]);
    p.parity_max_mean_kl = AsDouble(r[5]);
    p.surprise_factor = AsDouble(r[6]);
    v.has_rules = !IsNull(r[7]);
    if (v.has_rules) {
      p.min_rounds = static_cast<int>(AsInt(r[8]));
      p.max_rounds = static_cast<int>(AsInt(r[9]));
      p.look_every = static_cast<int>(AsInt(r[10]));
      p.alpha = AsDouble(r[11]);
      p.parity_min_depths = static_cast<int>(AsInt(r[12]));
      p.parity_min_positions = static_cast<int>(AsInt(r[13]));
      p.deep_factor = AsDouble(r[14]);
      p.gain_rule = AsText(r[15]);
    }
    VERITY_ASSIGN_OR_RETURN(p.guard_floors, LoadGuardFloors(d, p.version));
    VERITY_RETURN_IF_ERROR(LoadCountingRules(d, &p));
    VERITY_RETURN_IF_ERROR(LoadParityFloors(d, &p));
    v.scores = scored.count(p.version) ? scored[p.version] : 0;
    out.push_back(std::move(v));
  }
  return out;
}

Result<LedgerView> LoadLedgerView(Ledger& l) {
  Db& d = l.db();
  ReadSnapshot snap(d);  // the tip and the rows it seals, from one snapshot
  LedgerView v;
  VERITY_ASSIGN_OR_RETURN(v.tip, l.Tip());
  VERITY_ASSIGN_OR_RETURN(auto n, d.Query("SELECT count(*) FROM seal_chain"));
  v.records = AsInt(n[0][0]);
  VERITY_ASSIGN_OR_RETURN(v.policies, LoadPolicies(d));
  if (v.policies.empty()) return Status::Error(d.path() + ": no policy recorded");
  VERITY_ASSIGN_OR_RETURN(v.changes, LoadChanges(d, std::nullopt));
  for (size_t c = 0; c < v.changes.size(); c++)
    for (size_t r = 0; r < v.changes[c].runs.size(); r++) v.run_index[v.changes[c].runs[r].id] = {c, r};
  VERITY_ASSIGN_OR_RETURN(v.ladders, LoadLadders(d));
  for (const auto& c : v.changes)
    for (const auto& r : c.runs)
      if (r.retraction) v.retractions.push_back(*r.retraction);
  std::sort(v.retractions.begin(), v.retractions.end(),
            [](const RetractionView& a, const RetractionView& b) { return a.id < b.id; });
  VERITY_ASSIGN_OR_RETURN(v.drift, LoadDrift(d));
  VERITY_ASSIGN_OR_RETURN(v.noise, LoadNoiseProfiles(d));
  return v;
}

Result<std::map<int64_t, std::vector<SampleView>>> LoadSamplesByRun(Db& d) {
  std::map<int64_t, std::vector<SampleView>> out;
  std::vector<SampleView>* run = nullptr;  // the last row's run: a run's samples are mostly together
  int64_t run_id = 0;
  VERITY_RETURN_IF_ERROR(d.ForEachRow("SELECT run_id, round, ord, side, value FROM samples ORDER BY id", {},
                                      [&](const Row& r) -> Status {
                                        SampleView s;
                                        s.round = static_cast<int>(AsInt(r[1]));
                                        s.ord = static_cast<int>(AsInt(r[2]));
                                        const std::string* side = std::get_if<std::string>(&r[3]);
                                        VERITY_ASSIGN_OR_RETURN(s.side, Named(side ? SideFromName(*side) : std::nullopt,
                                                                              d, "samples.side", r[3]));
                                        s.value = AsDouble(r[4]);
                                        if (!run || AsInt(r[0]) != run_id) run = &out[run_id = AsInt(r[0])];
                                        run->push_back(s);
                                        return OkStatus();
                                      }));
  return out;
}

// ---- JSON printers ----

nlohmann::json ToJson(const ChangeView& c) {
  nlohmann::json j;
  j["change"] = ToJson(c.change, c.accept_regressions);
  j["accept_regressions"] = c.accept_regressions;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : c.runs) j["runs"].push_back(ToJson(r));
  j["state"] = c.StateName();
  j["related"] = nlohmann::json::array();
  for (const auto& x : c.related)
    j["related"].push_back({{"id", x.id}, {"kind", KindName(x.kind)}, {"title", x.title}, {"reason", J(x.reason)}});
  return j;
}

nlohmann::json ToJson(const FrontierView& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : f.ladders) {
    const LadderStep* last = l.last_counted();
    if (!l.ladder.value || !last) continue;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : l.ladder.steps) {
      nlohmann::json e;  // field by field, as the history timeline
      e["event"] = s.event.event_id;
      e["run"] = s.event.run_id;
      e["change"] = s.event.change_id;
      e["reason"] = s.event.reason;
      e["ratio"] = J(s.event.ratio);
      e["undoes_run"] = J(s.event.undoes_run);
      e["retracted"] = s.event.retracted;
      e["counted"] = s.counted;
      e["why"] = s.why;
      e["before"] = s.before;
      e["after"] = s.after;
      e["recorded"] = s.event.recorded;
      e["at"] = s.event.at;
      steps.push_back(std::move(e));
    }
    out.push_back({{"metric", l.metric},
                   {"box", l.box},
                   {"workload", l.workload},
                   {"value", *l.ladder.value},
                   {"gate", f.gate_frac * *l.ladder.value},
                   {"policy_version", f.policy_version},
                   {"event", last->event.event_id},
                   {"run", last->event.run_id},
                   {"change", last->event.change_id},
                   {"reason", last->event.reason},
                   {"at", last->event.at},
                   {"counted_events", l.counted_events()},
                   {"steps", std::move(steps)}});
  }
  return nlohmann::json{{"frontier", std::move(out)}};
}

nlohmann::json ToJson(const HistoryView& h) {
  nlohmann::json j = nlohmann::json::object();
  if (h.reverts) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : *h.reverts) {
      nlohmann::json e = {{"id", r.id},
                          {"kind", KindName(r.kind)},
                          {"title", r.title},
                          {"target", J(r.target)},
                          {"reason", J(r.reason)},
                          {"created_at", r.created_at},
                          {"verdict", OptVerdict(r.verdict)},
                          {"runs", r.runs}};
      if (r.kind == Kind::kRevert) {
        e["found_wrong"] = r.reapplied_by.has_value();
        e["reapplied_by"] = J(r.reapplied_by);
      }
      list.push_back(std::move(e));
    }
    j["reverts"] = std::move(list);
  }
  if (h.retractions) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : *h.retractions)
      list.push_back({{"id", r.retraction.id},
                      {"run", r.retraction.run_id},
                      {"change", r.change},
                      {"title", r.title},
                      {"reason", r.retraction.reason},
                      {"replaced_by_run", J(r.retraction.replaced_by_run)},
                      {"by_change", J(r.retraction.by_change)},
                      {"retracted_at", r.retraction.retracted_at},
                      {"verdict", OptVerdict(r.verdict)},
                      {"gain", J(r.gain)},
                      {"base_median", J(r.base_median)},
                      {"head_median", J(r.head_median)}});
    j["retractions"] = std::move(list);
  }
  if (h.none) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : *h.none) {
      nlohmann::json atts = nlohmann::json::array();
      for (const auto& a : c.attempts)
        atts.push_back({{"run", a.run},
                        {"purpose", PurposeName(a.purpose)},
                        {"verdict", VerdictName(a.verdict)},
                        {"tier", TierName(a.tier)},
                        {"gain", J(a.gain)},
                        {"frontier_before", J(a.frontier_before)},
                        {"scored_at", a.scored_at},
                        {"attempt", J(a.attempt)},
                        {"alpha", J(a.alpha)}});
      list.push_back({{"id", c.id}, {"title", c.title}, {"attempts", std::move(atts)}, {"queued", c.queued}});
    }
    j["none"] = std::move(list);
  }
  if (h.timeline) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : *h.timeline) {
      // Field by field: an initializer list builds a two-element array per
      // field first, and the timeline has one entry per score.
      nlohmann::json e;
      e["at"] = t.at;
      e["change"] = t.change;
      e["kind"] = KindName(t.kind);
      e["title"] = t.title;
      e["run"] = t.run;
      e["purpose"] = PurposeName(t.purpose);
      e["verdict"] = VerdictName(t.verdict);
      e["tier"] = TierName(t.tier);
      e["gain"] = J(t.gain);
      e["frontier_before"] = J(t.frontier_before);
      e["frontier_after"] = J(t.frontier_after);
      list.push_back(std::move(e));
    }
    j["timeline"] = std::move(list);
  }
  return j;
}

// ---- text printers ----
// Every string a submitter, a bench or a parity command wrote goes through V:
// controls are shown visibly, never sent to the terminal (base/terminal.h).

std::string ToText(const ChangeView& v) {
  const ChangeRow& c = v.change;
  std::string o;
  o += Line("change %lld: %s [%s] by %s, recorded %s", static_cast<long long>(c.id), V(c.title).c_str(), KindName(c.kind),
            V(c.author).c_str(), V(c.created_at).c_str());
  if (c.target_change)
    o += Line("  of change %lld; reason: %s", static_cast<long long>(*c.target_change), V(Or(c.reason)).c_str());
  o += Line("  claim %s  prediction %s  bit identity %s", c.claim_pct ? (Plain(*c.claim_pct) + "%").c_str() : "n/a",
            c.predict_pct ? (Plain(*c.predict_pct) + "%").c_str() : "n/a",
            c.claim_bit_identical ? "claimed" : "not claimed");
  if (!v.accept_regressions.empty()) {
    std::string list;
    for (const auto& m : v.accept_regressions) list += (list.empty() ? "" : ", ") + V(m);
    o += Line("  declared regressions: %s", list.c_str());
  }
  o += Line("  state: %s", v.StateName().c_str());
  for (const auto& r : v.runs) {
    o += Line("  run %lld (%s, box %s, %s): %lld samples (%lld warm-up)", static_cast<long long>(r.id),
              PurposeName(r.purpose), V(r.box).c_str(), RunStatusName(r.status), static_cast<long long>(r.samples),
              static_cast<long long>(r.warmup_samples));
    if (!r.workload.empty()) o += Line("    workload: %s", V(r.workload).c_str());
    if (r.noise)
      o += Line("    box noise: profile %lld (%s): %s", static_cast<long long>(r.noise->id), V(r.noise->recorded_at).c_str(),
                V(NoiseText(*r.noise)).c_str());
    for (const auto& a : r.artifacts)
      o += Line("    artifact %s: build %s, sha256 %.16s", SideName(a.side), V(a.build_id).c_str(), V(a.artifact_sha256).c_str());
    for (const auto& p : r.parity) {
      o += Line("    parity %s %s: %s", SideName(p.side), ParityModeName(p.mode), V(p.message).c_str());
      if (p.has_evidence)
        o += Line("      evidence: build %s, artifact %s, mode %s, %d depths, window %d", V(Prefix(p.build_id, 12)).c_str(),
                  V(Prefix(p.artifact_sha256, 16)).c_str(), p.stated_mode.empty() ? "(not stated)" : V(p.stated_mode).c_str(),
                  p.depths, p.window);
      else
        o += Line("      evidence: none recorded");
    }
    for (const auto& sc : r.scores) {
      o += Line("    score: %s tier %s gain %s ci [%s, %s] gate %s frontier %s -> %s rounds %d (policy v%d)",
                VerdictName(sc.verdict), TierName(sc.tier), Pct(sc.gain).c_str(), Pct(sc.ci_low).c_str(),
                Pct(sc.ci_high).c_str(), Num(sc.gate).c_str(), Num(sc.frontier_before).c_str(),
                Num(sc.frontier_after).c_str(), sc.rounds, sc.policy_version);
      if (sc.stats)
        o += Line("      decision: %s at attempt %d, alpha %s; median ratio %s, bounds [%s, %s]",
                  ScoreDecisionName(sc.stats->decision).c_str(), sc.stats->attempt, Num(sc.stats->alpha).c_str(),
                  Ratio(sc.stats->ratio).c_str(), Ratio(sc.stats->ratio_low).c_str(), Ratio(sc.stats->ratio_high).c_str());
      for (const auto& g : sc.guards) o += Line("      guard %s", V(GuardText(g)).c_str());
      if (!sc.note.empty()) o += Line("      note: %s", V(sc.note).c_str());
    }
    if (r.status == RunStatus::kFailed) o += Line("    failed: %s", V(r.failure.value_or("")).c_str());
    if (r.retraction)
      o += Line("    RETRACTED: %s%s", V(r.retraction->reason).c_str(),
                r.retraction->replaced_by_run
                    ? (" (replaced by run " + std::to_string(*r.retraction->replaced_by_run) + ")").c_str()
                    : "");
  }
  for (const auto& x : v.related)
    o += Line("  related: change %lld %s \"%s\" (%s)", static_cast<long long>(x.id), KindName(x.kind), V(x.title).c_str(),
              V(Or(x.reason)).c_str());
  return o;
}

std::string ToText(const FrontierView& f) {
  std::string o;
  size_t n = 0;
  for (const auto& l : f.ladders) {
    const LadderStep* last = l.last_counted();
    if (!l.ladder.value || !last) continue;
    n++;
    o += Line("frontier: %s on box %s%s = %s (gate %s under policy v%d), set by change %lld run %lld (%s)", V(l.metric).c_str(),
              V(l.box).c_str(), l.workload.empty() ? "" : (" workload '" + V(l.workload) + "'").c_str(), Num(*l.ladder.value).c_str(), Num(f.gate_frac * *l.ladder.value).c_str(), f.policy_version,
              static_cast<long long>(last->event.change_id), static_cast<long long>(last->event.run_id),
              V(last->event.reason).c_str());
    const int not_counted = static_cast<int>(l.ladder.steps.size()) - l.counted_events();
    if (not_counted > 0)
      for (const auto& s : l.ladder.steps)
        if (!s.counted)
          o += Line("  not counted: change %lld run %lld (%s): %s", static_cast<long long>(s.event.change_id),
                    static_cast<long long>(s.event.run_id), V(s.event.reason).c_str(), V(s.why).c_str());
  }
  o += Line("frontier: %zu metric/box pair%s", n, n == 1 ? "" : "s");
  return o;
}

std::string ToText(const HistoryView& h) {
  std::string o;
  if (h.reverts) {
    o += Line("reverts and reapplies (%zu):", h.reverts->size());
    for (const auto& r : *h.reverts) {
      std::string line = "  change " + std::to_string(r.id) + " " + KindName(r.kind) + " of " + Id(r.target) + ": " +
                         (r.verdict ? VerdictName(*r.verdict) : "n/a") + "; reason: " + V(Or(r.reason));
      if (r.kind == Kind::kRevert)
        line += "; later found wrong: " +
                (r.reapplied_by ? "yes, reapplied by change " + std::to_string(*r.reapplied_by) : std::string("no"));
      o += line + "\n";
    }
  }
  if (h.retractions) {
    o += Line("retractions (%zu):", h.retractions->size());
    for (const auto& r : *h.retractions)
      o += Line("  run %lld of change %lld \"%s\": gain %s (base %s, head %s); cause: %s%s",
                static_cast<long long>(r.retraction.run_id), static_cast<long long>(r.change), V(r.title).c_str(),
                Pct(r.gain).c_str(), Num(r.base_median).c_str(), Num(r.head_median).c_str(), V(r.retraction.reason).c_str(),
                r.retraction.replaced_by_run ? ("; replaced by run " + std::to_string(*r.retraction.replaced_by_run)).c_str()
                                             : "");
  }
  if (h.none) {
    o += Line("parked changes (%zu):", h.none->size());
    for (const auto& c : *h.none) {
      o += Line("  change %lld \"%s\"%s", static_cast<long long>(c.id), V(c.title).c_str(),
                c.queued ? " (queued for re-measure)" : "");
      for (const auto& a : c.attempts) {
        std::string line = "    run " + std::to_string(a.run) + " " + PurposeName(a.purpose) + ": " +
                           VerdictName(a.verdict) + " " + TierName(a.tier) + " gain " + Pct(a.gain) +
                           " against frontier " + Num(a.frontier_before);
        if (a.attempt) line += " (attempt " + std::to_string(*a.attempt) + ", alpha " + Num(a.alpha) + ")";
        o += line + "\n";
      }
    }
  }
  if (h.timeline) {
    o += Line("timeline (%zu scores):", h.timeline->size());
    for (const auto& t : *h.timeline)
      o += Line("  %s change %lld %s \"%s\" run %lld (%s): %s %s gain %s frontier %s -> %s", V(t.at).c_str(),
                static_cast<long long>(t.change), KindName(t.kind), V(t.title).c_str(), static_cast<long long>(t.run),
                PurposeName(t.purpose), VerdictName(t.verdict), TierName(t.tier), Pct(t.gain).c_str(),
                Num(t.frontier_before).c_str(), Num(t.frontier_after).c_str());
  }
  return o;
}

// ---- the Ledger's queries: printers over the read model ----

Result<nlohmann::json> Ledger::Show(int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(ChangeView v, LoadChangeView(*db_, change_id));
  return ToJson(v);
}

Result<nlohmann::json> Ledger::Frontier() {
  VERITY_ASSIGN_OR_RETURN(FrontierView f, LoadFrontierView(*this));
  return ToJson(f);
}

Result<nlohmann::json> Ledger::History(const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(HistoryView h, LoadHistory(*db_, what));
  return ToJson(h);
}

}  // namespace verity::ledger
