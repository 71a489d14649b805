// Synthetic ABBA rounds for scoring tests (ledger/score.h's MetricSeries).
#pragma once

#include <string>

#include "ledger/score.h"

namespace verity::test {

// `n` rounds whose head/base ratio (oriented: > 1 is better) is exactly `ratio`
// give or take a small, deterministic alternating spread (so bounds are finite
// and tight).
inline ledger::MetricSeries Rounds(const std::string& metric, double base, double ratio, int n = 10,
                                   double spread = 0.002) {
  ledger::MetricSeries s;
  s.metric = metric;
  s.higher_is_better = ledger::HigherIsBetter(metric);
  for (int i = 0; i < n; i++) {
    const double r = ratio * (1.0 + spread * ((i % 5) - 2) / 2.0);
    const double head = s.higher_is_better ? base * r : base / r;
    s.rounds.push_back({base, head, head, base});
  }
  return s;
}

}  // namespace verity::test
