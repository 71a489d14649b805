#include "ledger/policy.h"

#include <cmath>

namespace verity::ledger {

Policy PolicyV1() {
  Policy p;
  p.version = 1;
  p.gate_frac = 0.02;
  p.tiers = {{"s", 0.02}, {"m", 0.05}, {"l", 0.10}, {"xl", 0.25}};
  p.ceiling_ratio = 5.0;
  p.parity_min_top1 = 0.95;
  p.parity_max_mean_kl = 0.05;
  p.surprise_factor = 2.0;
  return p;
}

std::string Policy::TierFor(double gain) const {
  std::string tier = "none";
  for (const auto& [name, lower] : tiers)
    if (gain >= lower) tier = name;
  return tier;
}

bool Policy::IsSurprise(double predicted, double measured) const {
  if (predicted == 0.0) return std::fabs(measured) >= gate_frac;
  if ((predicted > 0) != (measured > 0)) return true;
  const double p = std::fabs(predicted), m = std::fabs(measured);
  return m > surprise_factor * p || m < p / surprise_factor;
}

bool Policy::ParityPasses(double worst_top1, double worst_mean_kl) const {
  return worst_top1 >= parity_min_top1 && worst_mean_kl <= parity_max_mean_kl;
}

}  // namespace verity::ledger
