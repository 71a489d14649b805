// Statistics for paired same-box rounds: median of per-round differences and
// a deterministic bootstrap confidence interval for it.
#pragma once

#include <cstdint>
#include <vector>

namespace verity::ledger {

// Median of `v` (mean of the middle two for even sizes); 0 for an empty vector.
double Median(std::vector<double> v);

struct Interval {
  double low = 0.0, high = 0.0;
};

// Percentile bootstrap (95% by default) of the median of `diffs`, from a
// generator seeded with `seed`: the same data and seed give the same interval.
Interval BootstrapMedianCI(const std::vector<double>& diffs, uint64_t seed, int resamples = 2000,
                           double confidence = 0.95);

}  // namespace verity::ledger
