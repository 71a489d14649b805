// The frontier ladder, derived. The frontier of a (metric, box, workload) is never a
// stored running sum: it is recomputed from the frontier events whose runs
// are not retracted — the seed, then each accepted gain as a factor — so a
// retraction anywhere gives the frontier as if that run had never counted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/db.h"

namespace verity::ledger {

struct LadderEvent {
  int64_t event_id = 0, run_id = 0, change_id = 0;
  std::string kind;                   // the change's kind: change | revert | reapply
  std::string reason;                 // seed | accepted | confirmed | revert
  double recorded = 0;                // frontier_events.value, as computed when recorded (history, not the frontier)
  std::optional<double> ratio;        // factor this event applies
  std::optional<int64_t> undoes_run;  // parity revert: the change run it cancels; reapply: the revert run
  std::optional<double> base_median;  // the run's base, to seed from when every earlier event is gone
  bool retracted = false;
  std::string at;
  // What the run measured (artifacts.artifact_sha256; "" when it measured nothing)
  // and the policy it was scored under: a step is a move between two artifacts.
  std::string base_artifact, head_artifact;
  // What the run is (ledger/identity.h): each side's keys. Empty: the
  // artifacts alone name the sides ("artifact <sha>", as before policy v6).
  std::vector<std::string> base_keys, head_keys;
  int policy_version = 0;
};

struct LadderStep {
  LadderEvent event;
  bool counted = false;
  double before = 0, after = 0;  // the derived frontier around this event
  std::string why;               // why it counted or not
};

struct Ladder {
  std::vector<LadderStep> steps;
  std::optional<double> value;  // the current frontier; nullopt when nothing counts
  int64_t last_event = 0;       // the last counted event (0 = none)
  // Runs whose factor is in the frontier now: counted, and not since undone
  // by a parity revert or replaced by a reapply.
  std::vector<int64_t> live_runs;
  // Policy v4's identity rule. The artifact the frontier stands at now ("" =
  // unknown), the head artifacts whose step counts (-> the run), and the
  // artifacts it stood at and moved past (-> the run that moved it).
  // Since policy v6 each is a key of ledger/identity.h ("artifact <sha>",
  // "build <id>", ...): a place is every key its side had.
  std::string stands_at;
  std::vector<std::string> stands_keys;
  std::map<std::string, int64_t> counted_heads, passed;
  // Returns true iff `run` is one of live_runs.
  bool IsLive(int64_t run) const;
  // Why a gain step from `base` to `head` would not be a new step of this
  // frontier (its head already counts, or its base is a place the frontier has
  // moved past), or nullopt when it would be.
  std::optional<std::string> StepRefusal(const std::string& base, const std::string& head) const;
  // The same for places named by their keys (ledger/identity.h): a head key
  // that counts already, or a base key the frontier has moved past. `key`
  // (if given) gets the key that refused.
  std::optional<std::string> StepRefusal(const std::vector<std::string>& base, const std::vector<std::string>& head,
                                         std::string* key = nullptr) const;
};

// Derives the ladder from events in recording order. Rules: the first counted
// event seeds (a seed's value, or the run's base median); accepted, confirmed
// and speed-evidence reverts multiply by their ratio (a speed revert also
// takes the change it reverts out of the live runs); a revert on parity
// evidence divides out the factor of the change run it undoes, if that still
// counts; a reapply applies its ratio only while the revert it undoes counts
// (otherwise the change's own factor is still in the ladder and counting the
// reapply would count the change twice), and uses the revert's factor up, so a
// second reapply of the same revert does not count. A factor is undone at most
// once, and a change's gain counts at most once. Retracted runs never count.
// Policy v4, applied to every event: an artifact counts at most once per
// frontier; a gain whose head already counts, or whose base the frontier has
// moved past, is recorded but not counted (Ladder::StepRefusal says why). A
// revert that counts frees the head of the run it undoes, so it may be reapplied.
Ladder DeriveLadder(const std::vector<LadderEvent>& events);

// Which ladder: one per metric, box and workload (measure::BenchSample::workload;
// "" for events recorded before workloads were, and for benches that name no model).
struct FrontierKey {
  std::string metric;
  int64_t box_id = 0;
  std::string workload;
};

// Loads the events of `key` and derives the ladder.
Result<Ladder> LoadLadder(Db& db, const FrontierKey& key);
// Every ladder the ledger holds, by (metric, box id, workload): one query for
// all of them (a query per ladder cost a PostgreSQL ledger a plan each).
Result<std::vector<std::pair<FrontierKey, Ladder>>> LoadEveryLadder(Db& db);

// The workload run `run_id` measured ("" if it recorded none).
Result<std::string> WorkloadOfRun(Db& db, int64_t run_id);
// The workload of the newest frontier event of `change_id`'s runs for
// (metric, box), if it has any (a parity revert, which measures nothing,
// undoes the change on the ladder that counted it).
Result<std::optional<std::string>> FrontierWorkloadOfChange(Db& db, int64_t change_id, const std::string& metric,
                                                            int64_t box_id);

}  // namespace verity::ledger
