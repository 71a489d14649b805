#include "ledger/frontier.h"

#include <algorithm>
#include <map>
#include <set>

namespace verity::ledger {
namespace {

std::string Short(const std::string& sha) { return sha.substr(0, 12); }

// After a counted step of `e`: the frontier stands at its head (unknown when
// it measured nothing), and the places it left are passed.
void MoveTo(Ladder& L, const LadderEvent& e) {
  for (const std::string* a : {static_cast<const std::string*>(&L.stands_at), &e.base_artifact})
    if (!a->empty() && *a != e.head_artifact) L.passed.emplace(*a, e.run_id);
  L.stands_at = e.head_artifact;
  L.passed.erase(e.head_artifact);  // back where it stood (a revert): standing, not passed
}

// A counted revert frees the head artifact of the run it undoes: that step no longer counts.
void Free(Ladder& L, int64_t undone_run) {
  for (auto it = L.counted_heads.begin(); it != L.counted_heads.end();)
    it = it->second == undone_run ? L.counted_heads.erase(it) : std::next(it);
}

}  // namespace

std::optional<std::string> Ladder::StepRefusal(const std::string& base, const std::string& head) const {
  if (auto it = counted_heads.find(head); !head.empty() && it != counted_heads.end())
    return "head artifact " + Short(head) + " already counts in this frontier (run " + std::to_string(it->second) +
           "): the same step measured again";
  if (auto it = passed.find(base); !base.empty() && it != passed.end())
    return "its base " + Short(base) + " is where this frontier stood before run " + std::to_string(it->second) +
           " moved it: from there the gain would count that run's again";
  return std::nullopt;
}

Ladder DeriveLadder(const std::vector<LadderEvent>& events) {
  Ladder L;
  std::map<int64_t, double> factor;  // live run -> the factor it applied
  std::set<int64_t> gained;          // changes whose gain already counts
  std::optional<double> F;
  for (const auto& e : events) {
    LadderStep s;
    s.event = e;
    s.before = F.value_or(0.0);
    auto apply = [&](double f, const std::string& why) {
      F = *F * f;
      factor[e.run_id] = f;
      s.counted = true;
      s.why = why;
    };
    const bool is_gain = e.reason == "accepted" || e.reason == "confirmed";
    auto count_gain = [&] {
      gained.insert(e.change_id);
      if (!e.head_artifact.empty()) L.counted_heads.emplace(e.head_artifact, e.run_id);
    };
    if (e.retracted) {
      s.why = "run retracted";
    } else if (!F) {
      const std::optional<double> seed = e.reason == "seed" ? std::optional<double>(e.recorded) : e.base_median;
      if (seed) {
        F = *seed;
        factor[e.run_id] = 1.0;
        s.counted = true;
        s.why = e.reason == "seed" ? "seed" : "seed (earlier events retracted): this run's base";
        L.stands_at = e.base_artifact;
        if (e.reason != "seed" && e.ratio) {
          apply(*e.ratio, s.why + ", then its ratio");
          MoveTo(L, e);
        }
        if (is_gain) count_gain();
      } else {
        s.why = "nothing to seed from";
      }
    } else if (e.reason == "seed") {
      s.why = "frontier already seeded";
    } else if (is_gain && gained.count(e.change_id)) {
      s.why = "this change's gain already counts";
    } else if (e.kind == "reapply" && e.undoes_run && !factor.count(*e.undoes_run)) {
      s.why = "its revert no longer counts: the change's own factor is still in the ladder";
    } else if (auto no = is_gain && e.ratio ? L.StepRefusal(e.base_artifact, e.head_artifact) : std::nullopt) {
      s.why = "not a new step: " + *no;
      if (e.policy_version > 0 && e.policy_version < 4)
        s.why += " (scored under policy v" + std::to_string(e.policy_version) + ", which counted it; v4 does not)";
    } else if (e.ratio) {
      // A reapply uses its revert up; a speed revert leaves the change no longer standing.
      if (e.undoes_run) factor.erase(*e.undoes_run);
      if (e.undoes_run && e.kind == "revert") Free(L, *e.undoes_run);
      apply(*e.ratio, e.reason);
      MoveTo(L, e);
      if (is_gain) count_gain();
    } else if (e.undoes_run && factor.count(*e.undoes_run)) {
      const double undone = factor[*e.undoes_run];
      factor.erase(*e.undoes_run);  // undone once, never twice
      Free(L, *e.undoes_run);
      apply(1.0 / undone, "revert on parity evidence: undoes run " + std::to_string(*e.undoes_run));
      MoveTo(L, e);
    } else {
      s.why = "nothing to undo";
    }
    s.after = F.value_or(0.0);
    if (s.counted) L.last_event = e.event_id;
    L.steps.push_back(s);
  }
  L.value = F;
  for (const auto& [run, f] : factor) L.live_runs.push_back(run);
  return L;
}

bool Ladder::IsLive(int64_t run) const {
  return std::find(live_runs.begin(), live_runs.end(), run) != live_runs.end();
}

Result<Ladder> LoadLadder(Db& db, const FrontierKey& key) {
  // Old events (before frontier_moves) take their factor from the score that
  // made them: frontier_after / frontier_before of that run's accepting score.
  // `s.verdict || ''` keeps SQLite off scores_by_verdict there: it chose that
  // index and scanned every accepted score per event (BM_Frontier, 10k
  // changes: ~60 ms) where scores_by_run finds the run's few (PostgreSQL
  // reads it alike).
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      db.Query("SELECT f.id, f.run_id, r.change_id, c.kind, f.reason, f.value, m.ratio, m.undoes_run, "
               " (SELECT s.frontier_after / s.frontier_before FROM scores s WHERE s.run_id = f.run_id AND "
               "  s.verdict || '' = 'accepted' AND s.frontier_before > 0 ORDER BY s.id DESC LIMIT 1), "
               " (SELECT s.base_median FROM scores s WHERE s.run_id = f.run_id AND s.base_median IS NOT NULL "
               "  ORDER BY s.id DESC LIMIT 1), "
               " EXISTS (SELECT 1 FROM retractions t WHERE t.run_id = f.run_id), f.at, "
               " EXISTS (SELECT 1 FROM frontier_moves x WHERE x.event_id = f.id), "
               " (SELECT f2.run_id FROM frontier_events f2 JOIN runs r2 ON r2.id = f2.run_id WHERE "
               "  c.kind = 'reapply' AND r2.change_id = c.target_change AND f2.id < f.id ORDER BY f2.id DESC LIMIT 1), "
               " (SELECT a.artifact_sha256 FROM artifacts a WHERE a.run_id = f.run_id AND a.side = 'base' ORDER BY a.id LIMIT 1), "
               " (SELECT a.artifact_sha256 FROM artifacts a WHERE a.run_id = f.run_id AND a.side = 'head' ORDER BY a.id LIMIT 1), "
               " r.policy_version "
               "FROM frontier_events f JOIN runs r ON r.id = f.run_id JOIN changes c ON c.id = r.change_id "
               "LEFT JOIN frontier_moves m ON m.event_id = f.id WHERE f.metric = ? AND f.box_id = ? AND "
               " COALESCE((SELECT w.workload FROM frontier_event_workloads w WHERE w.event_id = f.id), '') = ? "
               "ORDER BY f.id",
               {key.metric, key.box_id, key.workload}));
  std::vector<LadderEvent> events;
  for (const auto& r : rows) {
    LadderEvent e;
    e.event_id = AsInt(r[0]);
    e.run_id = AsInt(r[1]);
    e.change_id = AsInt(r[2]);
    e.kind = AsText(r[3]);
    e.reason = AsText(r[4]);
    e.recorded = AsDouble(r[5]);
    const bool has_move = AsInt(r[12]) != 0;
    if (has_move) {
      if (!IsNull(r[6])) e.ratio = AsDouble(r[6]);
      if (!IsNull(r[7])) e.undoes_run = AsInt(r[7]);
    } else {
      if (e.reason != "seed" && !IsNull(r[8])) e.ratio = AsDouble(r[8]);
      // Recorded before frontier_moves: a reapply undoes its revert's run.
      if (!IsNull(r[13])) e.undoes_run = AsInt(r[13]);
    }
    if (!IsNull(r[9])) e.base_median = AsDouble(r[9]);
    e.retracted = AsInt(r[10]) != 0;
    e.at = AsText(r[11]);
    if (!IsNull(r[14])) e.base_artifact = AsText(r[14]);
    if (!IsNull(r[15])) e.head_artifact = AsText(r[15]);
    e.policy_version = static_cast<int>(AsInt(r[16]));
    events.push_back(e);
  }
  return DeriveLadder(events);
}

Result<std::string> WorkloadOfRun(Db& db, int64_t run_id) {
  VERITY_ASSIGN_OR_RETURN(auto rows, db.Query("SELECT workload FROM run_workloads WHERE run_id = ?", {run_id}));
  return rows.empty() ? std::string() : AsText(rows[0][0]);
}

Result<std::optional<std::string>> FrontierWorkloadOfChange(Db& db, int64_t change_id, const std::string& metric,
                                                             int64_t box_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows, db.Query("SELECT COALESCE((SELECT w.workload FROM frontier_event_workloads w WHERE w.event_id = f.id), "
                          "'') FROM frontier_events f JOIN runs r ON r.id = f.run_id WHERE r.change_id = ? AND "
                          "f.metric = ? AND f.box_id = ? AND f.reason != 'seed' ORDER BY f.id DESC LIMIT 1",
                          {change_id, metric, box_id}));
  if (rows.empty()) return std::optional<std::string>();
  return std::optional<std::string>(AsText(rows[0][0]));
}

}  // namespace verity::ledger
