// The scoring policy. Its values live in the ledger (tables `policy` and
// `policy_rules`, from v3 `policy_guard_floors`, from v4 `policy_counting`), versioned; every score records the version
// it was scored under, and old scores keep theirs. PolicyV6() is what a ledger is given now.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace verity::ledger {

enum class Tier { kNone, kS, kM, kL, kXL };
// "none", "s", "m", "l", "xl".
const char* TierName(Tier t);
// Returns the tier named `name`, or nullopt when it is not one.
std::optional<Tier> TierFromName(const std::string& name);

// A guard's absolute floor (v3 on): a guard whose name ends in `suffix`
// regresses only when its head median is worse than its base median by more
// than `amount`, in the metric's own unit (written `unit`). 0: the gate alone.
struct GuardFloor {
  std::string suffix;
  double amount = 0.0;
  std::string unit;
};

// The evidence floor of one parity kind (v5 on, policy_parity_kinds): what a
// record of that kind must cover to count. "verity" and "logits" score depths
// of logits (min_depths, min_positions each); "tokens" compares an engine's
// greedy output byte for byte (min_bytes).
struct ParityFloor {
  std::string kind;
  int min_depths = 0, min_positions = 0;
  long long min_bytes = 0;
  std::string rule;  // the floor in words, as the changelog states it
};

struct Policy {
  int version = 0;
  double gate_frac = 0.0;                      // gate = gate_frac x frontier (absolute); as a ratio: 1 + gate_frac
  std::vector<std::pair<Tier, double>> tiers;  // lower bound (fraction), ascending
  double ceiling_ratio = 0.0;                  // head/base above this: implausible
  double parity_min_top1 = 0.0;
  double parity_max_mean_kl = 0.0;
  double surprise_factor = 0.0;
  // Rules added in v2 (policy_rules). A v1 policy has look_every == 0.
  int min_rounds = 5, max_rounds = 20, look_every = 0;
  double alpha = 0.0;            // one-sided error budget per change
  int parity_min_depths = 0;     // evidence floor: depths ...
  int parity_min_positions = 0;  // ... and scored positions per depth
  double deep_factor = 0.0;      // deep evidence >= this x standard depths and window
  std::string gain_rule;
  // The physical ceiling (v2; constants of the version, not stored): a decode
  // rate above ceiling_tolerance x the box's best measured read bandwidth for
  // its bytes per token is impossible. It applies only when a token reads at
  // least ceiling_min_bytes (smaller models may be served from cache).
  double ceiling_tolerance = 1.25;
  double ceiling_min_bytes = 256.0 * 1024 * 1024;
  // v3 on (policy_guard_floors): every unit suffix's floor. Empty: the gate alone (v1, v2).
  std::vector<GuardFloor> guard_floors;
  // v4 on (policy_counting): what a frontier step is, and which runs spend one
  // change's error budget. Empty before v4 (steps were counted per change id).
  std::string step_rule, budget_rule;
  // v5 on (policy_parity_kinds): each parity kind's floor. Empty before v5,
  // when only verity's own evidence existed (parity_min_depths/positions).
  std::vector<ParityFloor> parity_floors;

  // The tier for a gain (fraction of the base): kNone below the gate.
  Tier TierFor(double gain) const;
  // True iff `measured` is of the other sign than `predicted`, or more than
  // surprise_factor times it, or less than 1/surprise_factor of it. With no
  // prediction of a gain (0), any gain at or above the gate is a surprise.
  bool IsSurprise(double predicted, double measured) const;
  // True iff parity evidence passes the thresholds.
  bool ParityPasses(double worst_top1, double worst_mean_kl) const;
  // The floor of `metric`'s unit suffix (UnitOf, ledger/units.h: "_gb_s" is a
  // rate, not seconds), or nullopt when the policy states none for that suffix.
  std::optional<GuardFloor> FloorFor(const std::string& metric) const;
  // The floor of parity evidence of `kind`, or nullopt when this version
  // states none (before v5, "verity" alone, from parity_min_depths/positions).
  std::optional<ParityFloor> ParityFloorFor(const std::string& kind) const;
};

// Policy v1 (kept so old scores can be read): gate 2%; none < 2% <= s < 5% <=
// m < 10% <= l < 25% <= xl; ceiling 5x; parity top-1 >= 0.95, mean KL <= 0.05;
// surprise 2x; 5..20 rounds, bootstrap interval, early stop.
Policy PolicyV1();
// Policy v2: v1's gate, tiers, ceiling, parity thresholds and surprise, plus
// 10..30 rounds looked at every 5, alpha 0.05 spent over looks and
// re-measurements, parity evidence of >= 7 depths (the deepest at the last
// context position) with >= 8 positions each, deep evidence >= 2x.
Policy PolicyV2();
// Policy v3: v2, plus an absolute floor per unit that a guard must also be
// worse by to regress: memory 4 MiB (_mb; _gb and _bytes the same amount),
// time and throughput 0 (the gate alone). docs/ledger.md says why.
Policy PolicyV3();
// Policy v4: v3, plus identity-based counting: a frontier step is a move from
// one artifact to another on a workload; an artifact counts at most once per
// frontier; a run whose head already counts, or whose base the frontier has
// moved past, is recorded and refused; a resubmission of the same artifact
// pair re-measures the same change (its attempts continue, its first
// prediction stands), and a failed run that took a look spends its attempt.
Policy PolicyV4();
// Policy v5: v4, plus parity evidence for engines that are not verity, each
// kind with its own floor: "verity" and "logits" (an engine's raw f32 logits
// for a teacher-forced sequence, scored as verity parity scores) need >= 7
// depths with >= 8 positions each and v1's top-1/KL thresholds; "tokens" (an
// engine's greedy output equal to the base's or a pinned file, byte for
// byte) needs >= 256 bytes compared, deep evidence deep_factor x that.
Policy PolicyV5();
// v6 (issue 41): what a change is (ledger/identity.h) -- build ids, and one
// artifact's commands -- for counting and the budget; a timed round spends it.
Policy PolicyV6();

}  // namespace verity::ledger
