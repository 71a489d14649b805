// The scoring policy. Its values live in the ledger (table `policy`), versioned;
// every score records the version it was scored under. kPolicyV1 is what a new
// ledger is created with.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace verity::ledger {

struct Policy {
  int version = 0;
  double gate_frac = 0.0;                              // gate = gate_frac x frontier
  std::vector<std::pair<std::string, double>> tiers;   // name, lower bound (fraction), ascending
  double ceiling_ratio = 0.0;                          // head/base above this: implausible
  double parity_min_top1 = 0.0;
  double parity_max_mean_kl = 0.0;
  double surprise_factor = 0.0;

  // The tier for a gain (fraction of the frontier): "none" below the gate.
  std::string TierFor(double gain) const;
  // True iff `measured` is of the other sign than `predicted`, or more than
  // surprise_factor times it, or less than 1/surprise_factor of it. With no
  // prediction of a gain (0), any gain at or above the gate is a surprise.
  bool IsSurprise(double predicted, double measured) const;
  // True iff parity evidence passes the thresholds.
  bool ParityPasses(double worst_top1, double worst_mean_kl) const;
};

// Policy v1: gate 2%; none < 2% <= s < 5% <= m < 10% <= l < 25% <= xl;
// ceiling 5x the base; parity top-1 >= 0.95 and mean KL <= 0.05; surprise 2x.
Policy PolicyV1();

}  // namespace verity::ledger
