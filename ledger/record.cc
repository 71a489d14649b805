// Recording steps shared by the submission sequence and the lifecycle
// commands (confirm, revert, reapply): scores with their statistics, frontier
// events with how they move the ladder.
#include "ledger/record.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ledger/frontier.h"

namespace verity::ledger {
namespace {
Value Opt(const std::optional<double>& v) { return v && std::isfinite(*v) ? Value(*v) : Value(); }
std::optional<double> Finite(double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; }
}  // namespace

Result<int64_t> EnsureBox(Db& d, const measure::Box& box) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT id FROM boxes WHERE fingerprint = ?", {box.fingerprint}));
  if (!rows.empty()) return AsInt(rows[0][0]);
  return d.InsertSealed("boxes", {{"fingerprint", box.fingerprint}, {"detail", box.detail}});
}

// Measured attempts this change already has: the k-th re-measurement spends
// less of the error budget than the first measurement did.
Result<int> PriorAttempts(Db& d, int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT count(DISTINCT r.id) FROM runs r JOIN scores s ON s.run_id = r.id "
                                             "WHERE r.change_id = ? AND s.base_median IS NOT NULL",
                                             {change_id}));
  return static_cast<int>(AsInt(rows[0][0]));
}

namespace {

// The identity (ledger/identity.h) of every run `filter` chooses: a SQL
// condition on runs r joined to changes c, with `args`. Each side as its first
// recorded artifact row says, with its change's command.
Result<std::map<int64_t, ChangeIdentity>> IdentitiesOf(Db& d, const std::string& filter,
                                                       const std::vector<Value>& args) {
  const std::string runs = "(SELECT r.id FROM runs r JOIN changes c ON c.id = r.change_id WHERE " + filter + ")";
  VERITY_ASSIGN_OR_RETURN(auto cmds, d.Query("SELECT r.id, c.base_cmd, c.head_cmd FROM runs r JOIN changes c ON "
                                             "c.id = r.change_id WHERE " +
                                                 filter,
                                             args));
  std::map<int64_t, std::pair<SideRun, SideRun>> sides;
  for (const auto& r : cmds) {
    auto& s = sides[AsInt(r[0])];
    s.first.command = AsText(r[1]);
    s.second.command = AsText(r[2]);
  }
  VERITY_ASSIGN_OR_RETURN(auto arts, d.Query("SELECT a.run_id, a.side, a.build_id, a.artifact_sha256 FROM artifacts a "
                                             "WHERE a.run_id IN " +
                                                 runs + " ORDER BY a.id",
                                             args));
  std::set<std::pair<int64_t, bool>> seen;
  for (const auto& r : arts) {
    const bool head = AsText(r[1]) != "base";
    if (!seen.insert({AsInt(r[0]), head}).second) continue;
    SideRun& side = head ? sides[AsInt(r[0])].second : sides[AsInt(r[0])].first;
    side.build_id = AsText(r[2]);
    side.artifact_sha256 = AsText(r[3]);
  }
  std::map<int64_t, ChangeIdentity> out;
  for (const auto& [run, s] : sides) out[run] = IdentityOf(s.first, s.second);
  return out;
}

}  // namespace

Result<ChangeIdentity> IdentityOfRun(Db& d, int64_t run_id) {
  VERITY_ASSIGN_OR_RETURN(auto ids, IdentitiesOf(d, "r.id = ?", {run_id}));
  return ids.count(run_id) ? ids[run_id] : ChangeIdentity();
}

Result<int> SpentAttempts(Db& d, int64_t run_id, int64_t change_id, const std::string& kind, const std::string& metric,
                          const ChangeIdentity& id) {
  // Runs that spent alpha: scored with a measurement, or a timed round taken
  // (policy v6; v4 waited for the first look, so a run killed in round 9 of a
  // start that looked bad was resubmitted at attempt 0: issue 41, finding 10).
  VERITY_ASSIGN_OR_RETURN(
      auto ids, IdentitiesOf(d,
                             "r.id != ? AND (r.change_id = ? OR (c.kind = ? AND c.metric = ?)) AND "
                             "(EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.id AND s.base_median IS NOT NULL) OR "
                             " COALESCE((SELECT max(x.round) FROM samples x WHERE x.run_id = r.id), 0) >= 1)",
                             {run_id, change_id, kind, metric}));
  VERITY_ASSIGN_OR_RETURN(auto own, d.Query("SELECT id FROM runs WHERE change_id = ?", {change_id}));
  std::set<int64_t> mine;
  for (const auto& r : own) mine.insert(AsInt(r[0]));
  int n = 0;
  for (const auto& [run, other] : ids)
    if (mine.count(run) || SameChange(id, other)) n++;
  return n;
}

Result<std::optional<PairPrediction>> FirstPredictionOfPair(Db& d, int64_t change_id, const std::string& metric,
                                                            const ChangeIdentity& id) {
  if (!id.IsPair()) return std::optional<PairPrediction>();
  VERITY_ASSIGN_OR_RETURN(auto ids, IdentitiesOf(d,
                                                 "c.kind = 'change' AND c.metric = ? AND c.id < ? AND "
                                                 "c.predict_pct IS NOT NULL",
                                                 {metric, change_id}));
  std::optional<int64_t> first;
  for (const auto& [run, other] : ids)
    if (SameChange(id, other)) {
      VERITY_ASSIGN_OR_RETURN(auto c, d.Query("SELECT change_id FROM runs WHERE id = ?", {run}));
      if (!c.empty() && (!first || AsInt(c[0][0]) < *first)) first = AsInt(c[0][0]);
    }
  if (!first) return std::optional<PairPrediction>();
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT predict_pct FROM changes WHERE id = ?", {*first}));
  return std::optional<PairPrediction>(PairPrediction{*first, AsDouble(rows[0][0])});
}

namespace {
// Records one guard of score `score_id`, with its floor test when the policy has floors.
Status InsertGuard(Db& d, int64_t score_id, const GuardResult& g) {
  VERITY_ASSIGN_OR_RETURN(int64_t id, d.InsertSealed("score_guards", {{"score_id", score_id},
                                                                      {"metric", g.metric},
                                                                      {"higher_is_better", int64_t{g.higher_is_better}},
                                                                      {"ratio", g.bounds.estimate},
                                                                      {"ratio_low", Opt(g.bounds.low)},
                                                                      {"ratio_high", Opt(g.bounds.high)},
                                                                      {"regressed", int64_t{g.regressed}},
                                                                      {"declared", int64_t{g.declared}}}));
  if (!g.floor) return OkStatus();
  return d
      .InsertSealed("score_guard_floors", {{"guard_id", id},
                                           {"base_median", g.base_median},
                                           {"head_median", g.head_median},
                                           {"amount", g.floor->amount},
                                           {"unit", g.floor->unit},
                                           {"beyond_gate", int64_t{g.beyond_gate}}})
      .status();
}
}  // namespace

// Records the score row of `o` and the statistics behind it.
Status InsertScore(Db& d, int64_t run_id, int policy_version, const Outcome& o, const std::string& metric,
                   const std::optional<ScoreResult>& sr) {
  VERITY_ASSIGN_OR_RETURN(int64_t id, d.InsertSealed("scores", {{"run_id", run_id},
                                                                {"policy_version", int64_t{policy_version}},
                                                                {"verdict", VerdictName(o.verdict)},
                                                                {"tier", TierName(o.tier)},
                                                                {"gain", Opt(o.gain)},
                                                                {"ci_low", Opt(o.ci_low)},
                                                                {"ci_high", Opt(o.ci_high)},
                                                                {"gate", Opt(o.gate)},
                                                                {"frontier_before", Opt(o.frontier_before)},
                                                                {"frontier_after", Opt(o.frontier_after)},
                                                                {"base_median", Opt(o.base_median)},
                                                                {"head_median", Opt(o.head_median)},
                                                                {"rounds", int64_t{o.rounds}},
                                                                {"surprise", int64_t{o.surprise}},
                                                                {"note", o.note},
                                                                {"scored_at", NowUtc()}}));
  const char* decision = "none";
  if (sr)
    decision = sr->decision == Decision::kAbove ? "above" : sr->decision == Decision::kBelow ? "below" : "unresolved";
  VERITY_RETURN_IF_ERROR(d.InsertSealed("score_stats", {{"score_id", id},
                                                        {"metric", metric},
                                                        {"attempt", int64_t{o.attempt}},
                                                        {"alpha", Opt(o.alpha)},
                                                        {"ratio", sr ? Opt(sr->ratio.estimate) : Value()},
                                                        {"ratio_low", sr ? Opt(sr->ratio.low) : Value()},
                                                        {"ratio_high", sr ? Opt(sr->ratio.high) : Value()},
                                                        {"decision", std::string(decision)}}));
  if (sr)
    for (const auto& g : sr->guards) VERITY_RETURN_IF_ERROR(InsertGuard(d, id, g));
  return OkStatus();
}

// Inserts a frontier event with how it moves the ladder; returns its id.
Result<int64_t> InsertFrontierEvent(Db& d, const FrontierKey& key, int64_t run_id, const std::string& reason,
                                    double value_now, std::optional<double> ratio, std::optional<int64_t> undoes_run) {
  VERITY_ASSIGN_OR_RETURN(int64_t ev, d.InsertSealed("frontier_events", {{"metric", key.metric},
                                                                         {"box_id", key.box_id},
                                                                         {"value", value_now},
                                                                         {"run_id", run_id},
                                                                         {"reason", reason},
                                                                         {"at", NowUtc()}}));
  VERITY_RETURN_IF_ERROR(d.InsertSealed(
      "frontier_moves",
      {{"event_id", ev}, {"ratio", Opt(ratio)}, {"undoes_run", undoes_run ? Value(*undoes_run) : Value()}}));
  VERITY_RETURN_IF_ERROR(
      d.InsertSealed("frontier_event_workloads", {{"event_id", ev}, {"workload", key.workload}}).status());
  return ev;
}

// The run of `change_id` whose frontier event currently counts in the ladder
// (or, with `counted_only` false, whose event was last recorded), if any.
Result<std::optional<int64_t>> FrontierRunOf(Db& d, int64_t change_id, const FrontierKey& key, bool live_only) {
  VERITY_ASSIGN_OR_RETURN(Ladder ladder, LoadLadder(d, key));
  std::optional<int64_t> run;
  for (const auto& s : ladder.steps)
    if ((!live_only || ladder.IsLive(s.event.run_id)) && s.event.change_id == change_id && s.event.reason != "seed")
      run = s.event.run_id;
  return run;
}

void FillFromScore(const ScoreResult& r, Outcome* o) {
  o->verdict = r.verdict;
  o->tier = r.tier;
  o->gain = r.gain;
  o->ci_low = Finite(r.ratio.low - 1.0);
  o->ci_high = Finite(r.ratio.high - 1.0);
  o->alpha = r.ratio.alpha;
  o->gate = r.gate;
  o->frontier_before = r.frontier_before;
  o->frontier_after = r.frontier_after;
  o->base_median = r.base_median;
  o->head_median = r.head_median;
  o->surprise = r.surprise;
  o->note = r.note;
  o->guards = nlohmann::json::array();
  for (const auto& g : r.guards)
    o->guards.push_back(
        {{"metric", g.metric},
         {"gain", g.bounds.estimate - 1.0},
         {"low", std::isfinite(g.bounds.low) ? nlohmann::json(g.bounds.low - 1.0) : nlohmann::json()},
         {"high", std::isfinite(g.bounds.high) ? nlohmann::json(g.bounds.high - 1.0) : nlohmann::json()},
         {"regressed", g.regressed},
         {"declared", g.declared}});
  // From v3 on: the size behind the verdict, in the metric's unit.
  for (size_t i = 0; i < r.guards.size(); i++) {
    const GuardResult& g = r.guards[i];
    if (!g.floor) continue;
    o->guards[i].update({{"base_median", g.base_median},
                         {"head_median", g.head_median},
                         {"floor", g.floor->amount},
                         {"unit", g.floor->unit},
                         {"beyond_gate", g.beyond_gate},
                         {"within_floor", g.within_floor()}});
  }
}

std::optional<std::string> RoundsRequestError(const Policy& pol, const MeasureOptions& opt) {
  const SequentialPlan floor = PlanFor(pol);
  return CheckRequestedRounds(floor, opt.min_rounds ? opt.min_rounds : floor.min_rounds,
                              opt.max_rounds ? opt.max_rounds : std::max(floor.max_rounds, opt.min_rounds));
}

}  // namespace verity::ledger
