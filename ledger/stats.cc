#include "ledger/stats.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace verity::ledger {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Interval BootstrapMedianCI(const std::vector<double>& diffs, uint64_t seed, int resamples, double confidence) {
  Interval ci;
  if (diffs.empty()) return ci;
  if (diffs.size() == 1) return {diffs[0], diffs[0]};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, diffs.size() - 1);
  std::vector<double> meds(static_cast<size_t>(resamples)), draw(diffs.size());
  for (auto& m : meds) {
    for (auto& d : draw) d = diffs[pick(rng)];
    m = Median(draw);
  }
  std::sort(meds.begin(), meds.end());
  const double alpha = (1.0 - confidence) / 2.0;
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(std::floor(q * (meds.size() - 1)));
    return meds[std::min(i, meds.size() - 1)];
  };
  ci.low = at(alpha);
  ci.high = at(1.0 - alpha);
  return ci;
}

}  // namespace verity::ledger
