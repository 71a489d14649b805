// The median, shared by the bench (per-token times), the kernel benchmarks and
// the ledger's statistics.
#pragma once

#include <vector>

namespace verity {

// Median of `v` (the mean of the middle two for an even count); 0 for an empty
// vector.
double Median(std::vector<double> v);

}  // namespace verity
