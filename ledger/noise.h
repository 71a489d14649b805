// Box noise profiles: an A/A run (the same bench command as base and head)
// measures how much a round's ratio wanders on this box when nothing changed.
// The ledger uses the box's latest profile to choose how many rounds a
// submission needs to resolve the gate, and says when a box is too noisy to
// resolve it at all.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/db.h"
#include "ledger/score.h"

namespace verity::ledger {

struct NoiseProfile {
  int64_t id = 0;
  std::string box, metric, workload, cmd, recorded_at;
  int rounds = 0;
  std::vector<double> ratios;  // per round, (h1 + h2) / (b1 + b2) oriented as the metric (> 1 = better)
  double round_mad = 0;        // median absolute deviation of the ratios about their median
  double sigma = 0;            // 1.4826 x round_mad: a robust per-round standard deviation
  int outlier_rounds = 0;      // rounds more than 5 MADs from the median
  double drift_per_round = 0;  // least-squares slope of each round's mean level, fraction of the median per round
};

// The profile of A/A `rounds` of `metric` (pure; ids and names left empty).
NoiseProfile SummarizeAA(const std::vector<Round>& rounds, bool higher_is_better);

// Rounds whose median bounds (at the one-sided level `alpha` of one look) are
// narrower than one gate when each round's ratio has standard deviation
// `sigma`: n >= (z_alpha x 1.2533 x sigma / gate)^2 (the median's standard
// error is 1.2533 sigma / sqrt(n) for normal noise). At least 1.
int RoundsToResolve(double sigma, double gate_frac, double alpha);

// Records `p` (sealed) for box `box_id`; returns its id.
Result<int64_t> RecordNoise(Db& d, int64_t box_id, const NoiseProfile& p);
// The latest profile of (box, metric, workload), if one was recorded.
Result<std::optional<NoiseProfile>> LatestNoise(Db& d, int64_t box_id, const std::string& metric,
                                                const std::string& workload);
// Every profile, in recording order.
Result<std::vector<NoiseProfile>> LoadNoiseProfiles(Db& d);

nlohmann::json ToJson(const NoiseProfile& p);
// "per-round sigma 0.50% (MAD 0.34%), 1 outlier round of 20, drift +0.01%/round"
std::string NoiseText(const NoiseProfile& p);

}  // namespace verity::ledger
