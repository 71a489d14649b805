// The verdict as a pure function: given the policy, the measured ABBA rounds
// of the scored metric and its guards, the frontier, the prediction and the
// kind of change, say what the ledger concludes. No database, no processes:
// the submission sequence (submit.cc) gathers the inputs and records the result.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ledger/policy.h"
#include "ledger/stats.h"

namespace verity::ledger {

enum class Verdict {
  kAccepted,             // significantly above the gate, evidence bound: moves the frontier
  kNone,                 // not shown above the gate: parked, re-measured when the frontier moves
  kRejectedParity,       // correctness gate failed or evidence too thin / not bound; speed never measured
  kRejectedImplausible,  // head/base above the plausibility ceiling
  kRejectedRegression,   // a guard metric regressed beyond the gate, undeclared
  kHeldSurprise,         // far from the prediction: held until deep parity confirms
  kUnverified,           // would be accepted, but no parity evidence bound to the head artifact
  kRefused,              // a revert (or reapply) without the evidence it needs
  kFailed,               // the run could not complete (a command failed)
};
// The verdict's name as stored: "accepted", "none", "rejected-parity", ...
const char* VerdictName(Verdict v);
// Returns the verdict named `name` (as VerdictName spells it), or nullopt when it is not one.
std::optional<Verdict> VerdictFromName(const std::string& name);
// A Verdict in JSON is its name, never the enum's number (nlohmann would
// otherwise print 0 for accepted without a word). Failed is first: a name
// read back that is no verdict becomes failed, never accepted.
NLOHMANN_JSON_SERIALIZE_ENUM(Verdict, {{Verdict::kFailed, "failed"},
                                       {Verdict::kAccepted, "accepted"},
                                       {Verdict::kNone, "none"},
                                       {Verdict::kRejectedParity, "rejected-parity"},
                                       {Verdict::kRejectedImplausible, "rejected-implausible"},
                                       {Verdict::kRejectedRegression, "rejected-regression"},
                                       {Verdict::kHeldSurprise, "held-surprise"},
                                       {Verdict::kUnverified, "unverified"},
                                       {Verdict::kRefused, "refused"}})
// A Tier in JSON is its name too ("none" first: an unknown name is no tier).
NLOHMANN_JSON_SERIALIZE_ENUM(
    Tier, {{Tier::kNone, "none"}, {Tier::kS, "s"}, {Tier::kM, "m"}, {Tier::kL, "l"}, {Tier::kXL, "xl"}})

enum class Kind { kChange, kRevert, kReapply };
const char* KindName(Kind k);
std::optional<Kind> KindFromName(const std::string& name);

// One ABBA round of one metric: base, head, head, base.
struct Round {
  double b1 = 0, h1 = 0, h2 = 0, b2 = 0;
};
struct MetricSeries {
  std::string metric;
  bool higher_is_better = true;
  std::vector<Round> rounds;
};

// Whether a larger value of `metric` is better, read from its unit suffix:
// throughput (_tok_s, _per_s, _gflops, _tflops, _gb_s) is higher-is-better;
// memory and time (_mb, _gb, _bytes, _ms, _us, _ns, _s, _seconds) are
// lower-is-better. Returns nullopt for any other name: the ledger refuses a
// metric whose direction it would have to guess.
std::optional<bool> MetricDirection(const std::string& metric);
// MetricDirection(metric).value_or(true), for callers that checked it already.
bool HigherIsBetter(const std::string& metric);
// The round's ratio, oriented so that > 1 means the head is better.
double RoundRatio(const Round& r, bool higher_is_better);
std::vector<double> RoundRatios(const MetricSeries& s);

// The sequential plan a policy prescribes, with a submitter's request for
// more rounds applied (0 = the policy's value). Errors (fewer rounds than the
// floor) are reported by CheckRequestedRounds in stats.h.
SequentialPlan PlanFor(const Policy& p, int min_rounds = 0, int max_rounds = 0);

struct ScoreInput {
  Kind kind = Kind::kChange;
  MetricSeries primary;
  std::vector<MetricSeries> guards;
  std::vector<std::string> declared_regressions;  // --accept-regression METRIC
  std::optional<double> frontier;                 // nullopt: this run seeds it from its base median
  std::optional<double> predict_frac;             // the prediction, as a fraction
  int attempt = 0;                                // 0 = first measurement, k = k-th re-measurement
  bool verified = true;                           // parity evidence is bound to the head's artifact
  SequentialPlan plan;
  // The physical ceiling: this box's measured read bandwidth (bytes/s, from
  // `verity roofline`) and the bytes the head says one decoded token reads.
  // A decode rate above bandwidth / bytes is impossible, whatever the ratio.
  std::optional<double> read_bytes_per_s;
  std::optional<double> head_bytes_per_token;
  std::string ceiling_of = "this box's";  // whose bandwidth read_bytes_per_s is, for the note
};

struct GuardResult {
  std::string metric;
  bool higher_is_better = true;
  Bounds bounds;
  double base_median = 0.0, head_median = 0.0;  // over the scored rounds, in the metric's own unit
  std::optional<GuardFloor> floor;              // the policy's floor for its unit (v3 on)
  bool beyond_gate = false;                     // significantly worse by at least the gate (v2's whole test)
  bool regressed = false;                       // beyond the gate and, from v3 on, worse by more than the floor
  bool declared = false;
  // How much worse the head is than the base, in the metric's unit (> 0: worse).
  double worse_by() const { return higher_is_better ? base_median - head_median : head_median - base_median; }
  // Beyond the gate, but by no more than its floor: judged, and let through.
  bool within_floor() const { return beyond_gate && !regressed; }
};

struct ScoreResult {
  Verdict verdict = Verdict::kNone;
  Tier tier = Tier::kNone;
  Decision decision = Decision::kUnresolved;
  Bounds ratio;       // median per-round ratio and its bounds at the deciding look
  double gain = 0.0;  // ratio.estimate - 1: the head against its own base
  double base_median = 0.0, head_median = 0.0;
  double frontier_before = 0.0, frontier_after = 0.0;
  double gate = 0.0;            // absolute: gate_frac x frontier_before
  bool seeds_frontier = false;  // the frontier was empty: frontier_before is this run's base
  bool moves_frontier = false;  // frontier_after = frontier_before x factor
  double factor = 1.0;          // the frontier's factor in metric units: the ratio, or 1/ratio when lower is better
  bool surprise = false;
  std::vector<GuardResult> guards;
  std::string note;
};

// `v` with 3 significant digits (whole from 1000) and its unit: "0.297 MiB",
// signed "+0.297 MiB".
std::string AmountText(double v, const std::string& unit, bool sign);
// How a guard fared against its floor: "within floor 4 MiB (+0.297 MiB)",
// "beyond floor 4 MiB (+50 MiB)", or "" (no floor, a floor of 0, or not beyond the gate).
std::string FloorText(const GuardResult& g);

// Scores one measured run. Returns the verdict and every number behind it.
ScoreResult Score(const Policy& policy, const ScoreInput& in);

}  // namespace verity::ledger
