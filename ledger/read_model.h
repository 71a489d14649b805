// The ledger's one typed read model: what `show`, `frontier`, `history` and
// the changelog print. Plain structs, loaded in bulk — a handful of queries
// whatever the ledger's size, never one query per row — and read-only.
// Printers (JSON for the protocol, text for people, markdown in reports/) are
// functions over these structs; none of them runs SQL of its own.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/db.h"
#include "ledger/drift.h"
#include "ledger/noise.h"
#include "ledger/frontier.h"
#include "ledger/policy.h"
#include "ledger/score.h"
#include "ledger/stats.h"

namespace verity::ledger {

class Ledger;

// Values that are one of a fixed set (CHECK constraints in the schema).
enum class Side { kBase, kHead };
enum class ParityMode { kStandard, kDeep };
enum class Purpose { kSubmit, kRemeasure, kConfirm, kRevert, kReapply };
enum class RunStatus { kComplete, kFailed, kIncomplete };  // scored | a command failed | killed or still running
const char* SideName(Side s);
const char* ParityModeName(ParityMode m);
const char* PurposeName(Purpose p);
const char* RunStatusName(RunStatus s);
std::optional<Side> SideFromName(const std::string& name);
std::optional<ParityMode> ParityModeFromName(const std::string& name);
std::optional<Purpose> PurposeFromName(const std::string& name);
// score_stats.decision: "above" | "below" | "unresolved" (a Decision), or "none" (no speed measured: nullopt).
std::string ScoreDecisionName(const std::optional<Decision>& d);

// The `changes` row as recorded.
struct ChangeRow {
  int64_t id = 0;
  Kind kind = Kind::kChange;
  std::string title, author, metric, base_cmd, head_cmd, created_at;
  std::optional<double> claim_pct, predict_pct;  // percent, as given
  bool claim_bit_identical = false;
  std::optional<std::string> parity_cmd, base_parity_cmd, base_ref, head_ref, base_sha, head_sha, reason;
  std::optional<int64_t> target_change;  // revert: the change; reapply: the revert
};

// A change that targets this one (a revert of it, or a reapply of this revert).
struct RelatedChange {
  int64_t id = 0;
  Kind kind = Kind::kChange;
  std::string title;
  std::optional<std::string> reason;
};

struct ArtifactView {
  Side side = Side::kHead;
  std::string build_id, artifact_sha256;
};

// A parity_results row, with the identity its recorded evidence (raw_json) carries.
struct ParityView {
  int64_t id = 0;
  Side side = Side::kHead;
  ParityMode mode = ParityMode::kStandard;  // the mode the ledger asked for
  int exit_code = 0;
  bool passed = false;
  std::optional<double> worst_top1, worst_mean_kl;
  std::optional<std::string> logits_sha256;  // over the scored windows only
  std::string message;
  double seconds = 0.0;
  // Parsed from raw_json with measure::ParseParity; has_evidence is false when
  // nothing was recorded (the command printed no evidence) or it no longer parses.
  bool has_evidence = false;
  std::string build_id, artifact_sha256;  // the binary that produced it ("" = not reported)
  std::string stated_mode;                // the mode the evidence states ("" = not stated)
  std::string all_rows_sha256;            // over every logit row: what the bit-identity gate compares ("" = not stated)
  int depths = 0, window = 0, tokens = 0;  // depths scored, positions per depth requested, context length
};

// A guard metric of a score (score_guards), oriented so that a ratio > 1 is better.
// How a guard fared against its unit's floor (score_guard_floors; v3 on).
struct GuardFloorView {
  double base_median = 0.0, head_median = 0.0;  // the metric's own unit
  double amount = 0.0;                          // the floor
  std::string unit;
  bool beyond_gate = false;  // v2's test held
};

struct GuardView {
  std::string metric;
  bool higher_is_better = true;
  double ratio = 1.0;
  std::optional<double> ratio_low, ratio_high;  // nullopt: no bound at this n
  bool regressed = false, declared = false;
  std::optional<GuardFloorView> floor;  // absent for scores before policy v3
  double gain() const { return ratio - 1.0; }
  bool within_floor() const { return floor && floor->beyond_gate && !regressed; }
};
// The guard's floor test as score notes write it ("within floor 4 MiB
// (+0.297 MiB)", "beyond floor 4 MiB (+50 MiB)"), or "" when it says nothing.
std::string FloorText(const GuardView& g);

// The statistics behind a score (score_stats; policy v2 and later).
struct ScoreStatsView {
  std::string metric;
  int attempt = 0;              // 0 = first measurement, k = k-th re-measurement
  std::optional<double> alpha;  // one-sided level of each bound at the deciding look
  std::optional<double> ratio, ratio_low, ratio_high;
  std::optional<Decision> decision;  // nullopt: "none", no speed was measured
};

// A `scores` row with its statistics and guards.
struct ScoreView {
  int64_t id = 0, run_id = 0;
  int policy_version = 0;
  Verdict verdict = Verdict::kNone;
  Tier tier = Tier::kNone;
  std::optional<double> gain, ci_low, ci_high, gate, frontier_before, frontier_after, base_median, head_median;
  int rounds = 0;
  bool surprise = false;
  std::string note, scored_at;
  std::optional<ScoreStatsView> stats;  // absent for scores recorded before policy v2
  std::vector<GuardView> guards;        // empty for those, and when the bench reported one metric
};

struct RetractionView {
  int64_t id = 0, run_id = 0;
  std::string reason, retracted_at;
  std::optional<int64_t> replaced_by_run, by_change;
};

struct RunView {
  int64_t id = 0, change_id = 0, box_id = 0;
  Purpose purpose = Purpose::kSubmit;
  std::string box;  // fingerprint
  std::string started_at;
  int policy_version = 0, min_rounds = 0, max_rounds = 0;
  std::optional<int64_t> queue_id;
  RunStatus status = RunStatus::kIncomplete;
  std::optional<std::string> failure;  // run_failures.message, when the run failed
  std::vector<ArtifactView> artifacts;
  std::vector<ParityView> parity;
  int64_t samples = 0, warmup_samples = 0;
  std::vector<ScoreView> scores;  // in recording order; the last one is the run's verdict
  std::optional<RetractionView> retraction;
  std::string workload;               // what its benches measured ("" = unnamed)
  std::optional<NoiseProfile> noise;  // the box's latest noise profile for it when the run started

  const ScoreView* latest() const { return scores.empty() ? nullptr : &scores.back(); }
  bool retracted() const { return retraction.has_value(); }
  // The latest verdict's name, or "failed" / "incomplete".
  std::string StateName() const;
};

// A bit-identity claim's standing, from the field the gate compared: the
// head's and base's standard evidence's all_rows_sha256 ("bit identity
// proved: every logit row hashes to <16 hex> on both sides", or "bit identity
// claimed, not proved: " and why). Plain text: printers escape it for their output.
std::string BitIdentityText(const RunView& r);

struct ChangeView {
  ChangeRow change;
  std::vector<std::string> accept_regressions;  // guard metrics declared up front
  std::vector<RelatedChange> related;           // changes whose target is this one, by id
  std::vector<RunView> runs;                    // by id
  // The last run's state (see RunView::StateName), or "unscored" without runs.
  std::string StateName() const;
};

// The derived ladder of one (metric, box): every frontier event with whether it counts and why.
struct LadderView {
  std::string metric, box;  // box fingerprint
  int64_t box_id = 0;
  std::string workload;  // "" = unnamed (recorded before workloads, or a bench that names no model)
  Ladder ladder;         // LoadLadder: steps in recording order, value, last counted event
  const LadderStep* last_counted() const;
  int counted_events() const;
};

struct FrontierView {
  int policy_version = 0;
  double gate_frac = 0.0;
  std::vector<LadderView> ladders;  // by metric, then box id
};

// history reverts: a revert or reapply.
struct RevertEntry {
  int64_t id = 0;
  Kind kind = Kind::kRevert;
  std::string title, created_at;
  std::optional<int64_t> target;
  std::optional<std::string> reason;
  std::optional<Verdict> verdict;       // the latest score's (nullopt: never scored)
  std::optional<int64_t> reapplied_by;  // revert only: the first reapply of it (found wrong)
  std::vector<int64_t> runs;
};
// history retractions: the retracted number, kept.
struct RetractionEntry {
  RetractionView retraction;
  int64_t change = 0;
  std::string title;
  std::optional<Verdict> verdict;  // of the run's latest score
  std::optional<double> gain, base_median, head_median;
};
// history none: one scored attempt of a parked change.
struct ParkedAttempt {
  int64_t run = 0, score = 0;
  Purpose purpose = Purpose::kSubmit;
  Verdict verdict = Verdict::kNone;
  Tier tier = Tier::kNone;
  std::optional<double> gain, frontier_before, alpha;
  std::optional<int> attempt;  // score_stats.attempt (nullopt before policy v2)
  std::string scored_at;
};
struct ParkedChange {
  int64_t id = 0;
  std::string title;
  std::vector<ParkedAttempt> attempts;
  bool queued = false;  // a frontier move queued it and no run has answered yet
};
// history all: every score in order.
struct TimelineEntry {
  std::string at;
  int64_t change = 0, run = 0;
  Kind kind = Kind::kChange;
  std::string title;
  Purpose purpose = Purpose::kSubmit;
  Verdict verdict = Verdict::kNone;
  Tier tier = Tier::kNone;
  std::optional<double> gain, frontier_before, frontier_after;
};

// What `history KIND` asked for: only the requested lists are loaded.
struct HistoryView {
  std::optional<std::vector<RevertEntry>> reverts;
  std::optional<std::vector<RetractionEntry>> retractions;
  std::optional<std::vector<ParkedChange>> none;
  std::optional<std::vector<TimelineEntry>> timeline;
};

// A recorded policy version (policy, plus policy_rules from v2 on and
// policy_guard_floors from v3 on).
struct PolicyView {
  Policy policy;
  bool has_rules = false;  // v1 has no policy_rules row
  int64_t scores = 0;      // scores recorded under it
};

// Everything a changelog shows.
struct LedgerView {
  std::string tip = "genesis";              // the seal chain's last seal (Ledger::Tip)
  int64_t records = 0;                      // seal_chain rows
  std::vector<PolicyView> policies;         // ascending version; the last is current
  std::vector<ChangeView> changes;          // by id
  std::vector<LadderView> ladders;          // by metric, then box id
  std::vector<RetractionView> retractions;  // by id
  DriftView drift;                          // change points of main's speed (default options)
  std::vector<NoiseProfile> noise;          // every box noise profile, in recording order

  const ChangeView* FindChange(int64_t id) const;
  const RunView* FindRun(int64_t id) const;
  // The score of `run` that moved the ladder at `step` (latest accepted score of the run), if any.
  const ScoreView* ScoreOfStep(const LadderStep& step) const;
  std::map<int64_t, std::pair<size_t, size_t>> run_index;  // run id -> (change index, run index)
};

// Loaders. Errors name the ledger file.
Result<ChangeView> LoadChangeView(Db& d, int64_t change_id);
Result<std::vector<ChangeView>> LoadChangeViews(Db& d);  // every change
Result<std::vector<LadderView>> LoadLadders(Db& d);
// Every ladder, with the current policy's gate.
Result<FrontierView> LoadFrontierView(Ledger& l);
// what: reverts | retractions | none | all
Result<HistoryView> LoadHistory(Db& d, const std::string& what);
Result<std::vector<PolicyView>> LoadPolicies(Db& d);
Result<LedgerView> LoadLedgerView(Ledger& l);

// One recorded sample of a run (round 0 is the warm-up), in recording order.
struct SampleView {
  int round = 0, ord = 0;
  Side side = Side::kBase;
  double value = 0.0;
};
// Every run's samples, by run id: one query, for printers that draw rounds.
Result<std::map<int64_t, std::vector<SampleView>>> LoadSamplesByRun(Db& d);

// JSON printers (the protocol of `show --json`, `frontier --json`, `history --json`).
nlohmann::json ToJson(const ChangeView& c);
nlohmann::json ToJson(const FrontierView& f);
nlohmann::json ToJson(const HistoryView& h);

// Text printers (what `show`, `frontier` and `history` print for people).
std::string ToText(const ChangeView& c);
std::string ToText(const FrontierView& f);
std::string ToText(const HistoryView& h);

}  // namespace verity::ledger
