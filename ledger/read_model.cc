// The typed read model's loaders: every view `show`, `frontier`, `history`,
// the changelog and the dashboard print, read from the store in one snapshot
// and one query per table (the printers: read_model_print.cc).
#include "ledger/read_model.h"

#include <algorithm>
#include <map>
#include <tuple>

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

Result<bool> HasTable(Db& d, const char* name) { return d.HasTable(name); }

// Whether the schema has the issue-9 tables (score_stats, score_guards, ...): a
// ledger opened at an older schema version has none.
Result<bool> HasV3Tables(Db& d) { return d.HasTable("score_stats"); }

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
  VERITY_ASSIGN_OR_RETURN(c.kind,
                          Named(KindFromName(AsText(r[1])), d, "change " + std::to_string(c.id) + " kind", r[1]));
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
// one query per table, whatever the number of rows. Each step reads one table
// into the views the earlier steps made.
class ChangesLoader {
 public:
  ChangesLoader(Db& d, std::optional<int64_t> only)
      : d_(d), only_(only), by_run_(only ? " JOIN runs r ON r.id = x.run_id WHERE r.change_id = ?" : "") {
    if (only) args_.push_back(*only);
  }

  Result<std::vector<ChangeView>> Load() {
    VERITY_ASSIGN_OR_RETURN(v3_, HasV3Tables(d_));
    VERITY_RETURN_IF_ERROR(Changes());
    if (out_.empty()) return std::move(out_);
    VERITY_RETURN_IF_ERROR(Related());
    VERITY_RETURN_IF_ERROR(AcceptedRegressions());
    VERITY_RETURN_IF_ERROR(Runs());
    VERITY_RETURN_IF_ERROR(WorkloadsAndNoise());
    VERITY_RETURN_IF_ERROR(Artifacts());
    VERITY_RETURN_IF_ERROR(Parity());
    VERITY_RETURN_IF_ERROR(SampleCounts());
    VERITY_RETURN_IF_ERROR(Scores());
    VERITY_RETURN_IF_ERROR(Guards());
    VERITY_RETURN_IF_ERROR(FailuresAndRetractions());
    for (auto& c : out_)
      for (auto& run : c.runs)
        run.status = !run.scores.empty() ? RunStatus::kComplete
                     : run.failure       ? RunStatus::kFailed
                                         : RunStatus::kIncomplete;
    return std::move(out_);
  }

 private:
  Status Changes() {
    VERITY_ASSIGN_OR_RETURN(auto cs, d_.Query(std::string("SELECT ") + kChangeCols + " FROM changes c" +
                                                  (only_ ? " WHERE c.id = ?" : "") + " ORDER BY c.id",
                                              args_));
    for (const auto& r : cs) {
      ChangeView v;
      VERITY_ASSIGN_OR_RETURN(v.change, ParseChange(d_, r));
      change_at_[v.change.id] = out_.size();
      out_.push_back(std::move(v));
    }
    return OkStatus();
  }

  // The changes that target each one (reverts, reapplies).
  Status Related() {
    if (!only_) {
      for (const auto& c : out_) {
        if (!c.change.target_change) continue;
        auto it = change_at_.find(*c.change.target_change);
        if (it != change_at_.end())
          out_[it->second].related.push_back(
              RelatedChange{c.change.id, c.change.kind, c.change.title, c.change.reason});
      }
      return OkStatus();
    }
    VERITY_ASSIGN_OR_RETURN(
        auto rel, d_.Query("SELECT id, kind, title, reason FROM changes WHERE target_change = ? ORDER BY id", args_));
    for (const auto& r : rel) {
      RelatedChange x;
      x.id = AsInt(r[0]);
      VERITY_ASSIGN_OR_RETURN(x.kind,
                              Named(KindFromName(AsText(r[1])), d_, "change " + std::to_string(x.id) + " kind", r[1]));
      x.title = AsText(r[2]);
      x.reason = OptS(r[3]);
      out_[0].related.push_back(x);
    }
    return OkStatus();
  }

  Status AcceptedRegressions() {
    if (!v3_) return OkStatus();
    VERITY_ASSIGN_OR_RETURN(auto ar, d_.Query(std::string("SELECT change_id, metric FROM accepted_regressions") +
                                                  (only_ ? " WHERE change_id = ?" : "") + " ORDER BY id",
                                              args_));
    for (const auto& r : ar)
      if (auto it = change_at_.find(AsInt(r[0])); it != change_at_.end())
        out_[it->second].accept_regressions.push_back(AsText(r[1]));
    return OkStatus();
  }

  // Runs, and where each one lives.
  Status Runs() {
    VERITY_ASSIGN_OR_RETURN(auto rs,
                            d_.Query(std::string("SELECT r.id, r.change_id, r.purpose, r.box_id, b.fingerprint, "
                                                 "r.started_at, r.policy_version, r.min_rounds, r.max_rounds, "
                                                 "r.queue_id FROM runs r JOIN boxes b ON b.id = r.box_id") +
                                         (only_ ? " WHERE r.change_id = ?" : "") + " ORDER BY r.id",
                                     args_));
    for (const auto& r : rs) {
      auto it = change_at_.find(AsInt(r[1]));
      if (it == change_at_.end()) continue;
      RunView v;
      v.id = AsInt(r[0]);
      v.change_id = AsInt(r[1]);
      VERITY_ASSIGN_OR_RETURN(
          v.purpose, Named(PurposeFromName(AsText(r[2])), d_, "run " + std::to_string(v.id) + " purpose", r[2]));
      v.box_id = AsInt(r[3]);
      v.box = AsText(r[4]);
      v.started_at = AsText(r[5]);
      v.policy_version = static_cast<int>(AsInt(r[6]));
      v.min_rounds = static_cast<int>(AsInt(r[7]));
      v.max_rounds = static_cast<int>(AsInt(r[8]));
      v.queue_id = OptI(r[9]);
      auto& runs = out_[it->second].runs;
      run_at_[v.id] = {it->second, runs.size()};
      runs.push_back(std::move(v));
    }
    return OkStatus();
  }

  RunView* RunOf(const Value& id) {
    auto it = run_at_.find(AsInt(id));
    return it == run_at_.end() ? nullptr : &out_[it->second.first].runs[it->second.second];
  }

  // Workloads and noise profiles in two reads, not two per run (on a
  // PostgreSQL ledger of 10k runs those were 20k round trips).
  Status WorkloadsAndNoise() {
    VERITY_ASSIGN_OR_RETURN(auto wl, d_.Query("SELECT x.run_id, x.workload FROM run_workloads x" + by_run_, args_));
    for (const auto& r : wl)
      if (RunView* run = RunOf(r[0])) run->workload = AsText(r[1]);
    VERITY_ASSIGN_OR_RETURN(const auto profiles, LoadNoiseProfiles(d_));
    std::map<std::tuple<std::string, std::string, std::string>, const NoiseProfile*> latest;  // box, metric, workload
    for (const auto& n : profiles) latest[{n.box, n.metric, n.workload}] = &n;  // ascending ids: the last is latest
    for (auto& cv : out_)
      for (auto& r : cv.runs) {
        auto it = latest.find({r.box, cv.change.metric, r.workload});
        if (it != latest.end() && it->second->recorded_at <= r.started_at) r.noise = *it->second;
      }
    return OkStatus();
  }

  Status Artifacts() {
    VERITY_ASSIGN_OR_RETURN(
        auto arts,
        d_.Query("SELECT x.run_id, x.side, x.build_id, x.artifact_sha256 FROM artifacts x" + by_run_ + " ORDER BY x.id",
                 args_));
    for (const auto& r : arts) {
      RunView* run = RunOf(r[0]);
      if (!run) continue;
      ArtifactView a;
      VERITY_ASSIGN_OR_RETURN(
          a.side, Named(SideFromName(AsText(r[1])), d_, "artifact side of run " + std::to_string(run->id), r[1]));
      a.build_id = AsText(r[2]);
      a.artifact_sha256 = AsText(r[3]);
      run->artifacts.push_back(a);
    }
    return OkStatus();
  }

  Status Parity() {
    VERITY_ASSIGN_OR_RETURN(auto par,
                            d_.Query("SELECT x.run_id, x.id, x.side, x.mode, x.exit_code, x.passed, x.worst_top1, "
                                     "x.worst_mean_kl, x.logits_sha256, x.message, x.seconds, x.raw_json "
                                     "FROM parity_results x" +
                                         by_run_ + " ORDER BY x.id",
                                     args_));
    for (const auto& r : par) {
      RunView* run = RunOf(r[0]);
      if (!run) continue;
      ParityView p;
      p.id = AsInt(r[1]);
      const std::string what = "parity result " + std::to_string(p.id);
      VERITY_ASSIGN_OR_RETURN(p.side, Named(SideFromName(AsText(r[2])), d_, what + " side", r[2]));
      VERITY_ASSIGN_OR_RETURN(p.mode, Named(ParityModeFromName(AsText(r[3])), d_, what + " mode", r[3]));
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
    return OkStatus();
  }

  Status SampleCounts() {
    VERITY_ASSIGN_OR_RETURN(
        auto cnt, d_.Query(only_ ? "SELECT x.run_id, count(*), sum(CASE WHEN x.round = 0 THEN 1 ELSE 0 END) FROM "
                                   "samples x JOIN runs r ON r.id = x.run_id WHERE r.change_id = ? GROUP BY x.run_id"
                                 : "SELECT x.run_id, count(*), sum(CASE WHEN x.round = 0 THEN 1 ELSE 0 END) FROM "
                                   "samples x GROUP BY x.run_id",
                           args_));
    for (const auto& r : cnt)
      if (RunView* run = RunOf(r[0])) {
        run->samples = AsInt(r[1]);
        run->warmup_samples = AsInt(r[2]);
      }
    return OkStatus();
  }

  Status Scores() {
    VERITY_ASSIGN_OR_RETURN(
        auto sc,
        d_.Query(std::string("SELECT x.id, x.run_id, x.policy_version, x.verdict, x.tier, x.gain, x.ci_low, x.ci_high, "
                             "x.gate, x.frontier_before, x.frontier_after, x.base_median, x.head_median, x.rounds, "
                             "x.surprise, x.note, x.scored_at, ") +
                     (v3_ ? "st.score_id, st.metric, st.attempt, st.alpha, st.ratio, st.ratio_low, st.ratio_high, "
                            "st.decision FROM scores x LEFT JOIN score_stats st ON st.score_id = x.id"
                          : "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM scores x") +
                     by_run_ + " ORDER BY x.id",
                 args_));
    for (const auto& r : sc) {
      RunView* run = RunOf(r[1]);
      if (!run) continue;
      VERITY_ASSIGN_OR_RETURN(ScoreView s, ParseScore(r, run->id));
      run->scores.push_back(std::move(s));
    }
    for (auto& c : out_)  // every score is in place: the addresses hold
      for (auto& run : c.runs)
        for (auto& s : run.scores) score_at_[s.id] = &s;
    return OkStatus();
  }

  Result<ScoreView> ParseScore(const Row& r, int64_t run_id) {
    ScoreView s;
    s.id = AsInt(r[0]);
    s.run_id = run_id;
    const std::string what = "score " + std::to_string(s.id);
    s.policy_version = static_cast<int>(AsInt(r[2]));
    VERITY_ASSIGN_OR_RETURN(s.verdict, Named(VerdictFromName(AsText(r[3])), d_, what + " verdict", r[3]));
    VERITY_ASSIGN_OR_RETURN(s.tier, Named(TierFromName(AsText(r[4])), d_, what + " tier", r[4]));
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
    if (IsNull(r[17])) return s;
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
      VERITY_ASSIGN_OR_RETURN(st.decision, Named(found, d_, what + " decision", r[24]));
    }
    s.stats = st;
    return s;
  }

  Status Guards() {
    if (!v3_) return OkStatus();
    VERITY_ASSIGN_OR_RETURN(const bool floors, HasTable(d_, "score_guard_floors"));
    VERITY_ASSIGN_OR_RETURN(
        auto gs, d_.Query(std::string("SELECT g.score_id, g.metric, g.higher_is_better, g.ratio, "
                                      "g.ratio_low, g.ratio_high, g.regressed, g.declared, ") +
                              (floors ? "f.base_median, f.head_median, f.amount, f.unit, "
                                        "f.beyond_gate FROM score_guards g LEFT JOIN "
                                        "score_guard_floors f ON f.guard_id = g.id"
                                      : "NULL, NULL, NULL, NULL, NULL FROM score_guards g") +
                              (only_ ? " JOIN scores x ON x.id = g.score_id" + by_run_ : "") + " ORDER BY g.id",
                          args_));
    for (const auto& r : gs) {
      auto it = score_at_.find(AsInt(r[0]));
      if (it == score_at_.end()) continue;
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
    return OkStatus();
  }

  Status FailuresAndRetractions() {
    VERITY_ASSIGN_OR_RETURN(
        auto fl, d_.Query("SELECT x.run_id, x.message FROM run_failures x" + by_run_ + " ORDER BY x.id", args_));
    for (const auto& r : fl)
      if (RunView* run = RunOf(r[0]); run && !run->failure) run->failure = AsText(r[1]);
    VERITY_ASSIGN_OR_RETURN(auto rt,
                            d_.Query("SELECT x.id, x.run_id, x.reason, x.replaced_by_run, x.by_change, x.retracted_at "
                                     "FROM retractions x" +
                                         by_run_ + " ORDER BY x.id",
                                     args_));
    for (const auto& r : rt)
      if (RunView* run = RunOf(r[1]); run && !run->retraction)
        run->retraction = RetractionView{AsInt(r[0]), AsInt(r[1]), AsText(r[2]), AsText(r[5]), OptI(r[3]), OptI(r[4])};
    return OkStatus();
  }

  Db& d_;
  const std::optional<int64_t> only_;
  std::vector<Value> args_;
  const std::string by_run_;  // restricts a table with a run_id column (alias x) to the runs of `only`
  bool v3_ = false;
  std::vector<ChangeView> out_;
  std::map<int64_t, size_t> change_at_;
  std::map<int64_t, std::pair<size_t, size_t>> run_at_;  // run id: change index, run index
  std::map<int64_t, ScoreView*> score_at_;               // filled once every score is in place
};

Result<std::vector<ChangeView>> LoadChanges(Db& d, std::optional<int64_t> only) {
  return ChangesLoader(d, only).Load();
}

}  // namespace

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

namespace {

// Every revert and reapply with its runs and latest verdict; a revert is
// reapplied only by a reapply that was accepted, not by any attempt.
Result<std::vector<RevertEntry>> LoadReverts(Db& d) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT c.id, c.kind, c.title, c.target_change, c.reason, c.created_at "
                                             "FROM changes c WHERE c.kind IN ('revert', 'reapply') ORDER BY c.id"));
  VERITY_ASSIGN_OR_RETURN(auto runs,
                          d.Query("SELECT r.change_id, r.id FROM runs r JOIN changes c ON c.id = r.change_id "
                                  "WHERE c.kind IN ('revert', 'reapply') ORDER BY r.id"));
  VERITY_ASSIGN_OR_RETURN(auto verdicts, d.Query("SELECT r.change_id, s.verdict, s.id FROM scores s JOIN runs r ON "
                                                 "r.id = s.run_id JOIN changes c ON c.id = r.change_id WHERE c.kind "
                                                 "IN ('revert', 'reapply') ORDER BY s.id"));
  std::vector<RevertEntry> list;
  std::map<int64_t, size_t> at;
  for (const auto& r : rows) {
    RevertEntry e;
    e.id = AsInt(r[0]);
    VERITY_ASSIGN_OR_RETURN(e.kind,
                            Named(KindFromName(AsText(r[1])), d, "change " + std::to_string(e.id) + " kind", r[1]));
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
      VERITY_ASSIGN_OR_RETURN(Verdict v, Named(VerdictFromName(AsText(r[1])), d,
                                               "score " + std::to_string(AsInt(r[2])) + " verdict", r[1]));
      list[it->second].verdict = v;
    }
  // A revert was found wrong only by a reapply that was accepted, not by any attempt.
  for (const auto& e : list)
    if (e.kind == Kind::kReapply && e.target && e.verdict == Verdict::kAccepted)
      if (auto it = at.find(*e.target);
          it != at.end() && list[it->second].kind == Kind::kRevert && !list[it->second].reapplied_by)
        list[it->second].reapplied_by = e.id;
  return list;
}

// Every retracted run with the score it had.
Result<std::vector<RetractionEntry>> LoadRetractions(Db& d) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      d.Query("SELECT t.id, t.run_id, r.change_id, c.title, t.reason, t.replaced_by_run, t.by_change, "
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
      VERITY_ASSIGN_OR_RETURN(
          e.verdict, Named(VerdictFromName(AsText(r[8])), d, "verdict of run " + std::to_string(AsInt(r[1])), r[8]));
    }
    e.gain = OptD(r[9]);
    e.base_median = OptD(r[10]);
    e.head_median = OptD(r[11]);
    list.push_back(std::move(e));
  }
  return list;
}

// Every change ever parked, with each attempt and the frontier it faced.
Result<std::vector<ParkedChange>> LoadParked(Db& d, bool v3) {
  const std::string parked =
      "SELECT DISTINCT r2.change_id FROM scores s2 JOIN runs r2 ON r2.id = s2.run_id JOIN changes c2 ON c2.id = "
      "r2.change_id WHERE s2.verdict = 'none' AND c2.kind = 'change'";
  VERITY_ASSIGN_OR_RETURN(auto rows,
                          d.Query("SELECT c.id, c.title FROM changes c WHERE c.id IN (" + parked + ") ORDER BY c.id"));
  VERITY_ASSIGN_OR_RETURN(
      auto att,
      d.Query(std::string("SELECT r.change_id, r.id, r.purpose, s.verdict, s.tier, s.gain, s.frontier_before, "
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
    VERITY_ASSIGN_OR_RETURN(a.purpose,
                            Named(PurposeFromName(AsText(r[2])), d, "run " + std::to_string(a.run) + " purpose", r[2]));
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
  return list;
}

// Every score in order: the ledger's timeline.
Result<std::vector<TimelineEntry>> LoadTimeline(Db& d) {
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
    VERITY_ASSIGN_OR_RETURN(t.kind,
                            Named(KindFromName(AsText(r[2])), d, "change " + std::to_string(t.change) + " kind", r[2]));
    t.title = AsText(r[3]);
    t.run = AsInt(r[4]);
    VERITY_ASSIGN_OR_RETURN(t.purpose,
                            Named(PurposeFromName(AsText(r[5])), d, "run " + std::to_string(t.run) + " purpose", r[5]));
    VERITY_ASSIGN_OR_RETURN(t.verdict, Named(VerdictFromName(AsText(r[6])), d, what_s + " verdict", r[6]));
    VERITY_ASSIGN_OR_RETURN(t.tier, Named(TierFromName(AsText(r[7])), d, what_s + " tier", r[7]));
    t.gain = OptD(r[8]);
    t.frontier_before = OptD(r[9]);
    t.frontier_after = OptD(r[10]);
    list.push_back(std::move(t));
  }
  return list;
}

}  // namespace

Result<HistoryView> LoadHistory(Db& d, const std::string& what) {
  if (what != "reverts" && what != "retractions" && what != "none" && what != "all")
    return Status::Error("history: unknown kind '" + what + "' (expected reverts, retractions, none or all)");
  ReadSnapshot snap(d);
  VERITY_ASSIGN_OR_RETURN(const bool v3, HasV3Tables(d));
  HistoryView h;
  if (what == "reverts" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(h.reverts, LoadReverts(d));
  }
  if (what == "retractions" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(h.retractions, LoadRetractions(d));
  }
  if (what == "none" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(h.none, LoadParked(d, v3));
  }
  if (what == "all") {
    VERITY_ASSIGN_OR_RETURN(h.timeline, LoadTimeline(d));
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
  VERITY_RETURN_IF_ERROR(
      d.ForEachRow("SELECT run_id, round, ord, side, value FROM samples ORDER BY id", {}, [&](const Row& r) -> Status {
        SampleView s;
        s.round = static_cast<int>(AsInt(r[1]));
        s.ord = static_cast<int>(AsInt(r[2]));
        const std::string* side = std::get_if<std::string>(&r[3]);
        VERITY_ASSIGN_OR_RETURN(s.side, Named(side ? SideFromName(*side) : std::nullopt, d, "samples.side", r[3]));
        s.value = AsDouble(r[4]);
        if (!run || AsInt(r[0]) != run_id) run = &out[run_id = AsInt(r[0])];
        run->push_back(s);
        return OkStatus();
      }));
  return out;
}

}  // namespace verity::ledger
