#include "ledger/frontier.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ledger/identity.h"

namespace verity::ledger {
namespace {

// A side's keys: its identity keys, or (events built without them) its artifact alone.
std::vector<std::string> KeysOf(const std::vector<std::string>& keys, const std::string& artifact) {
  if (!keys.empty() || artifact.empty()) return CountingKeys(keys);
  return {"artifact " + artifact};
}

bool Has(const std::vector<std::string>& keys, const std::string& k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

// After a counted step of `e`: the frontier stands at its head (unknown when
// it measured nothing), and the places it left are passed.
void MoveTo(Ladder& L, const LadderEvent& e) {
  const auto base = KeysOf(e.base_keys, e.base_artifact), head = KeysOf(e.head_keys, e.head_artifact);
  for (const std::vector<std::string>* keys : {static_cast<const std::vector<std::string>*>(&L.stands_keys), &base})
    for (const std::string& k : *keys)
      if (!Has(head, k)) L.passed.emplace(k, e.run_id);
  L.stands_at = e.head_artifact;
  L.stands_keys = head;
  for (const std::string& k : head) L.passed.erase(k);  // back where it stood (a revert): standing, not passed
}

// A counted revert frees the head artifact of the run it undoes: that step no longer counts.
void Free(Ladder& L, int64_t undone_run) {
  for (auto it = L.counted_heads.begin(); it != L.counted_heads.end();)
    it = it->second == undone_run ? L.counted_heads.erase(it) : std::next(it);
}

}  // namespace

std::optional<std::string> Ladder::StepRefusal(const std::string& base, const std::string& head) const {
  return StepRefusal(KeysOf({}, base), KeysOf({}, head));
}

std::optional<std::string> Ladder::StepRefusal(const std::vector<std::string>& base,
                                               const std::vector<std::string>& head, std::string* key) const {
  for (const std::string& k : head)
    if (auto it = counted_heads.find(k); it != counted_heads.end()) {
      if (key) *key = k;
      return "head " + KeyText(k) + " already counts in this frontier (run " + std::to_string(it->second) +
             "): the same step measured again";
    }
  for (const std::string& k : base)
    if (auto it = passed.find(k); it != passed.end()) {
      if (key) *key = k;
      return "its base " + KeyText(k) + " is where this frontier stood before run " + std::to_string(it->second) +
             " moved it: from there the gain would count that run's again";
    }
  return std::nullopt;
}

namespace {

// The ladder as the events replay into it.
struct Replay {
  explicit Replay(Ladder& ladder) : L(ladder) {}
  Ladder& L;
  std::map<int64_t, double> factor;  // live run -> the factor it applied
  std::set<int64_t> gained;          // changes whose gain already counts
  std::optional<double> F;
};

// Counts step `s` of `e`: the frontier moves by `f`.
void Apply(Replay& r, LadderStep& s, const LadderEvent& e, double f, const std::string& why) {
  r.F = *r.F * f;
  r.factor[e.run_id] = f;
  s.counted = true;
  s.why = why;
}

// The change's gain counts now, and its head can count no second time.
void CountGain(Replay& r, const LadderEvent& e) {
  r.gained.insert(e.change_id);
  for (const std::string& k : KeysOf(e.head_keys, e.head_artifact)) r.L.counted_heads.emplace(k, e.run_id);
}

// The first event with a value seeds the empty frontier: a seed's recorded
// value, else the run's base median (and then its ratio).
void Seed(Replay& r, LadderStep& s, const LadderEvent& e, bool is_gain) {
  const std::optional<double> seed = e.reason == "seed" ? std::optional<double>(e.recorded) : e.base_median;
  if (seed) {
    r.F = *seed;
    r.factor[e.run_id] = 1.0;
    s.counted = true;
    s.why = e.reason == "seed" ? "seed" : "seed (earlier events retracted): this run's base";
    r.L.stands_at = e.base_artifact;
    r.L.stands_keys = KeysOf(e.base_keys, e.base_artifact);
    if (e.reason != "seed" && e.ratio) {
      Apply(r, s, e, *e.ratio, s.why + ", then its ratio");
      MoveTo(r.L, e);
    }
    if (is_gain) CountGain(r, e);
  } else {
    s.why = "nothing to seed from";
  }
}

// Why a step the ladder refused (`no`, on `refusing_key`) is not counted, and
// which earlier policy counted it.
std::string NotNewStepText(const LadderEvent& e, const std::string& no, const std::string& refusing_key) {
  std::string why = "not a new step: " + no;
  if (e.policy_version > 0 && e.policy_version < 4)
    why += " (scored under policy v" + std::to_string(e.policy_version) + ", which counted it; v4 does not)";
  else if (e.policy_version > 0 && e.policy_version < 6 &&
           (refusing_key.rfind("build ", 0) == 0 || refusing_key.find(" run by ") != std::string::npos))
    why += " (scored under policy v" + std::to_string(e.policy_version) +
           ", which counted it; v6 counts a change by its build ids, and one artifact by its commands)";
  return why;
}

// Replays one event into the ladder: counted, or why not.
void Step(Replay& r, LadderStep& s, const LadderEvent& e) {
  const bool is_gain = e.reason == "accepted" || e.reason == "confirmed";
  std::string refusing_key;
  if (e.retracted) {
    s.why = "run retracted";
  } else if (!r.F) {
    Seed(r, s, e, is_gain);
  } else if (e.reason == "seed") {
    s.why = "frontier already seeded";
  } else if (is_gain && r.gained.count(e.change_id)) {
    s.why = "this change's gain already counts";
  } else if (e.kind == "reapply" && e.undoes_run && !r.factor.count(*e.undoes_run)) {
    s.why = "its revert no longer counts: the change's own factor is still in the ladder";
  } else if (auto no = is_gain && e.ratio ? r.L.StepRefusal(KeysOf(e.base_keys, e.base_artifact),
                                                            KeysOf(e.head_keys, e.head_artifact), &refusing_key)
                                          : std::nullopt) {
    s.why = NotNewStepText(e, *no, refusing_key);
  } else if (e.ratio) {
    // A reapply uses its revert up; a speed revert leaves the change no longer standing.
    if (e.undoes_run) r.factor.erase(*e.undoes_run);
    if (e.undoes_run && e.kind == "revert") Free(r.L, *e.undoes_run);
    Apply(r, s, e, *e.ratio, e.reason);
    MoveTo(r.L, e);
    if (is_gain) CountGain(r, e);
  } else if (e.undoes_run && r.factor.count(*e.undoes_run)) {
    const double undone = r.factor[*e.undoes_run];
    r.factor.erase(*e.undoes_run);  // undone once, never twice
    Free(r.L, *e.undoes_run);
    Apply(r, s, e, 1.0 / undone, "revert on parity evidence: undoes run " + std::to_string(*e.undoes_run));
    MoveTo(r.L, e);
  } else {
    s.why = "nothing to undo";
  }
}

}  // namespace

Ladder DeriveLadder(const std::vector<LadderEvent>& events) {
  Ladder L;
  Replay r(L);
  for (const auto& e : events) {
    LadderStep s;
    s.event = e;
    s.before = r.F.value_or(0.0);
    Step(r, s, e);
    s.after = r.F.value_or(0.0);
    if (s.counted) L.last_event = e.event_id;
    L.steps.push_back(s);
  }
  L.value = r.F;
  for (const auto& [run, f] : r.factor) L.live_runs.push_back(run);
  return L;
}

bool Ladder::IsLive(int64_t run) const { return std::find(live_runs.begin(), live_runs.end(), run) != live_runs.end(); }

namespace {

// A ladder's events, in columns of their own row. Correlated subqueries per
// event (eight of them) were most of the frontier's time on PostgreSQL: what
// each run's scores, artifacts and retractions say is read in bulk below.
// Columns: 0 id, 1 run, 2 change, 3 kind, 4 reason, 5 value, 6 move ratio,
// 7 move undoes_run, 8 has a move, 9 at, 10 reapply's revert run (old events),
// 11 policy, 12 metric, 13 box id, 14 workload.
constexpr const char* kEventsSql =
    "SELECT f.id, f.run_id, r.change_id, c.kind, f.reason, f.value, m.ratio, m.undoes_run, "
    " CASE WHEN m.event_id IS NULL THEN 0 ELSE 1 END, f.at, "
    " (SELECT f2.run_id FROM frontier_events f2 JOIN runs r2 ON r2.id = f2.run_id WHERE "
    "  c.kind = 'reapply' AND r2.change_id = c.target_change AND f2.id < f.id ORDER BY f2.id DESC LIMIT 1), "
    " r.policy_version, f.metric, f.box_id, COALESCE(w.workload, '') "
    "FROM frontier_events f JOIN runs r ON r.id = f.run_id JOIN changes c ON c.id = r.change_id "
    "LEFT JOIN frontier_moves m ON m.event_id = f.id LEFT JOIN frontier_event_workloads w ON w.event_id = f.id ";
// Which events: one ladder's (metric, box id, workload bound), or all.
constexpr const char* kOneLadder = "WHERE f.metric = ? AND f.box_id = ? AND COALESCE(w.workload, '') = ? ";
constexpr const char* kEveryLadder = "";

// What the runs of the chosen events measured and how they were scored.
struct RunFacts {
  // Old events (before frontier_moves) take their factor from the latest
  // accepting score of their run: frontier_after / frontier_before.
  std::optional<double> accepted_ratio;
  std::optional<double> base_median;  // the latest score's that has one
  bool retracted = false;
  std::string base_artifact, head_artifact;  // the first recorded of each side
  std::string base_build, head_build, base_cmd, head_cmd;
};

Result<std::map<int64_t, RunFacts>> LoadRunFacts(Db& db, const std::string& where, const std::vector<Value>& args) {
  const std::string runs =
      "(SELECT f.run_id FROM frontier_events f LEFT JOIN frontier_event_workloads w ON "
      "w.event_id = f.id " +
      where + ")";
  std::map<int64_t, RunFacts> facts;
  VERITY_ASSIGN_OR_RETURN(auto scores, db.Query("SELECT s.run_id, s.verdict, s.frontier_before, s.frontier_after, "
                                                "s.base_median FROM scores s WHERE s.run_id IN " +
                                                    runs + " ORDER BY s.id",
                                                args));
  for (const auto& r : scores) {  // ascending ids: the last one wins
    RunFacts& f = facts[AsInt(r[0])];
    if (AsText(r[1]) == "accepted" && !IsNull(r[2]) && AsDouble(r[2]) > 0)
      f.accepted_ratio = IsNull(r[3]) ? std::nullopt : std::optional<double>(AsDouble(r[3]) / AsDouble(r[2]));
    if (!IsNull(r[4])) f.base_median = AsDouble(r[4]);
  }
  VERITY_ASSIGN_OR_RETURN(auto arts, db.Query("SELECT a.run_id, a.side, a.artifact_sha256, a.build_id FROM artifacts a "
                                              "WHERE a.run_id IN " +
                                                  runs + " ORDER BY a.id",
                                              args));
  std::set<std::pair<int64_t, bool>> seen;  // (run, head side) whose first artifact is read
  for (const auto& r : arts) {              // ascending ids: the first one wins
    const int64_t run = AsInt(r[0]);
    const bool head = AsText(r[1]) != "base";
    if (!seen.insert({run, head}).second) continue;
    RunFacts& f = facts[run];
    (head ? f.head_artifact : f.base_artifact) = AsText(r[2]);  // NULL reads as "": measured nothing
    (head ? f.head_build : f.base_build) = AsText(r[3]);
  }
  VERITY_ASSIGN_OR_RETURN(auto cmds, db.Query("SELECT r.id, c.base_cmd, c.head_cmd FROM runs r JOIN changes c ON "
                                              "c.id = r.change_id WHERE r.id IN " +
                                                  runs,
                                              args));
  for (const auto& r : cmds) {
    auto it = facts.find(AsInt(r[0]));
    if (it == facts.end()) continue;
    it->second.base_cmd = AsText(r[1]);
    it->second.head_cmd = AsText(r[2]);
  }
  VERITY_ASSIGN_OR_RETURN(auto gone, db.Query("SELECT t.run_id FROM retractions t WHERE t.run_id IN " + runs, args));
  for (const auto& r : gone) facts[AsInt(r[0])].retracted = true;
  return facts;
}

LadderEvent EventOf(const Row& r, const std::map<int64_t, RunFacts>& facts) {
  static const RunFacts kNone;
  LadderEvent e;
  e.event_id = AsInt(r[0]);
  e.run_id = AsInt(r[1]);
  e.change_id = AsInt(r[2]);
  e.kind = AsText(r[3]);
  e.reason = AsText(r[4]);
  e.recorded = AsDouble(r[5]);
  auto it = facts.find(e.run_id);
  const RunFacts& f = it == facts.end() ? kNone : it->second;
  if (AsInt(r[8]) != 0) {
    if (!IsNull(r[6])) e.ratio = AsDouble(r[6]);
    if (!IsNull(r[7])) e.undoes_run = AsInt(r[7]);
  } else {
    if (e.reason != "seed") e.ratio = f.accepted_ratio;
    // Recorded before frontier_moves: a reapply undoes its revert's run.
    if (!IsNull(r[10])) e.undoes_run = AsInt(r[10]);
  }
  e.base_median = f.base_median;
  e.retracted = f.retracted;
  e.at = AsText(r[9]);
  e.base_artifact = f.base_artifact;
  e.head_artifact = f.head_artifact;
  const ChangeIdentity id =
      IdentityOf({f.base_build, f.base_artifact, f.base_cmd}, {f.head_build, f.head_artifact, f.head_cmd});
  e.base_keys = id.base;
  e.head_keys = id.head;
  e.policy_version = static_cast<int>(AsInt(r[11]));
  return e;
}

// The chosen events (kOneLadder or kEveryLadder) by ladder, in recording order.
Result<std::map<std::tuple<std::string, int64_t, std::string>, std::vector<LadderEvent>>> LoadEvents(
    Db& db, const std::string& where, const std::vector<Value>& args) {
  VERITY_ASSIGN_OR_RETURN(auto rows, db.Query(std::string(kEventsSql) + where + "ORDER BY f.id", args));
  VERITY_ASSIGN_OR_RETURN(const auto facts, LoadRunFacts(db, where, args));
  std::map<std::tuple<std::string, int64_t, std::string>, std::vector<LadderEvent>> by_key;
  for (const auto& r : rows) by_key[{AsText(r[12]), AsInt(r[13]), AsText(r[14])}].push_back(EventOf(r, facts));
  return by_key;
}

}  // namespace

Result<Ladder> LoadLadder(Db& db, const FrontierKey& key) {
  VERITY_ASSIGN_OR_RETURN(auto by_key, LoadEvents(db, kOneLadder, {key.metric, key.box_id, key.workload}));
  return DeriveLadder(by_key.empty() ? std::vector<LadderEvent>() : by_key.begin()->second);
}

Result<std::vector<std::pair<FrontierKey, Ladder>>> LoadEveryLadder(Db& db) {
  VERITY_ASSIGN_OR_RETURN(auto by_key, LoadEvents(db, kEveryLadder, {}));
  std::vector<std::pair<FrontierKey, Ladder>> out;
  for (const auto& [key, events] : by_key)
    out.emplace_back(FrontierKey{std::get<0>(key), std::get<1>(key), std::get<2>(key)}, DeriveLadder(events));
  return out;
}

Result<std::string> WorkloadOfRun(Db& db, int64_t run_id) {
  VERITY_ASSIGN_OR_RETURN(auto rows, db.Query("SELECT workload FROM run_workloads WHERE run_id = ?", {run_id}));
  return rows.empty() ? std::string() : AsText(rows[0][0]);
}

Result<std::optional<std::string>> FrontierWorkloadOfChange(Db& db, int64_t change_id, const std::string& metric,
                                                            int64_t box_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      db.Query("SELECT COALESCE((SELECT w.workload FROM frontier_event_workloads w WHERE w.event_id = f.id), "
               "'') FROM frontier_events f JOIN runs r ON r.id = f.run_id WHERE r.change_id = ? AND "
               "f.metric = ? AND f.box_id = ? AND f.reason != 'seed' ORDER BY f.id DESC LIMIT 1",
               {change_id, metric, box_id}));
  if (rows.empty()) return std::optional<std::string>();
  return std::optional<std::string>(AsText(rows[0][0]));
}

}  // namespace verity::ledger
