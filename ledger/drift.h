// Drift: change points in the history of main's speed, which single A/B
// comparisons cannot see (five changes each 1% slower pass the gate one by
// one; a box that got slower shifts every later number).
//
// The detector is E-Divisive with means (Matteson & James, 2014; the method
// of MongoDB's and Apache Otava's change-point detection): the split that
// maximizes the energy distance between the two sides, accepted when a
// permutation test finds it significant, then applied again inside each side.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/db.h"

namespace verity::ledger {

struct DriftOptions {
  double alpha = 0.01;     // a split is a change point iff its permutation p-value is below this
  int permutations = 499;  // per tested split; p >= 1 / (permutations + 1)
  int min_segment = 4;     // points on each side of a change point
  uint64_t seed = 1;       // the permutations are pseudo-random but reproducible
};

struct ChangePoint {
  int index = 0;  // the first point after the change
  double p_value = 1.0;
  double statistic = 0;                        // the split's scaled energy distance
  double before_median = 0, after_median = 0;  // of the final segments either side
  double step() const { return after_median / before_median - 1.0; }
};

// The best single split of y: every tau (the right side's first index) with
// min_segment points on each side, scored by the scaled energy distance
// (exponent 1). O(n log n). tau = -1 when y is too short.
struct EnergySplit {
  int tau = -1;
  double q = -INFINITY;
};
EnergySplit BestEnergySplit(const std::vector<double>& y, int min_segment);

// The permutation p-value of statistic q within y: the share of
// o.permutations cumulative shuffles of y (drawn from rng) whose best split
// scores at least q, (count + 1) / (permutations + 1). Each shuffle's split
// is BestEnergySplit's bit for bit, in O(n) rather than its sort.
// With `stop_at` (DetectChangePoints passes alpha), the shuffles stop as soon
// as the p-value can no longer fall below it and return the bound reached
// (>= stop_at): below stop_at the value is exact, at or above it only the
// verdict is. A series with no change point then costs a few shuffles, not 499.
double SplitPValue(const std::vector<double>& y, double q, const DriftOptions& o, std::mt19937_64& rng,
                   double stop_at = INFINITY);

// Change points of `x` in increasing index order; none when x has fewer than
// 2 * min_segment points. Deterministic in (x, options).
std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& x, const DriftOptions& o = {});

// ---- over the ledger ----------------------------------------------------------

// One measurement of main: a run's base median, or the head median of a run
// whose change was accepted (that head is main afterwards).
struct DriftPoint {
  int64_t run = 0, change = 0;
  std::string side;  // base | head
  std::string at;    // the first timed sample of the side
  double value = 0;  // median over the run's timed rounds
};

// The latest triage state of a regression (table triage; see RecordTriage).
struct TriageState {
  int64_t id = 0;
  std::string state, by, reason, at;  // state: acknowledged | investigating | wontfix | fixed
  std::optional<int64_t> fixed_by_change;
};

struct DriftChange {
  ChangePoint point;
  // "drift/<metric>/<box>/<workload>/<run before>-<run after>": what triage names it by.
  std::string key;
  bool regression = false;            // the step goes the metric's worse way
  std::optional<TriageState> triage;  // its latest triage record, if any
  bool open() const { return regression && (!triage || (triage->state != "wontfix" && triage->state != "fixed")); }
  DriftPoint before, after;  // the points either side of the change
  struct Between {
    int64_t change = 0;
    std::string title, verdict;
  };
  std::vector<Between> changes;  // changes with runs recorded between the two points
};

struct DriftSeries {
  std::string metric, box, workload;
  std::vector<DriftPoint> points;  // recording order; retracted runs excluded
  std::vector<DriftChange> changes;
};

struct DriftView {
  DriftOptions options;
  std::vector<DriftSeries> series;  // by metric, box, workload
  size_t points() const;
  size_t change_points() const;
  size_t open_regressions() const;
};

// Loads every (metric, box, workload) series (optionally only `metric` /
// box fingerprint `box`) and detects its change points.
Result<DriftView> LoadDrift(Db& d, const std::string& metric = "", const std::string& box = "",
                            const DriftOptions& o = {});

// Records a triage state change of the regression `key` (sealed; each change
// is its own row). `key` must name a regression `verity drift` finds now;
// `state` is acknowledged | investigating | wontfix | fixed; `by` and `reason`
// are required; `fixed` needs `fixed_by_change`, an existing change recorded
// after the regression's later run. Errors name the field.
[[nodiscard]] Result<int64_t> RecordTriage(Db& d, const std::string& key, const std::string& state,
                                           const std::string& by, const std::string& reason,
                                           std::optional<int64_t> fixed_by_change);

nlohmann::json ToJson(const DriftView& v);
// One line per change point, then the summary line (always printed: it says
// what was examined, also when nothing was found).
std::string ToText(const DriftView& v);

}  // namespace verity::ledger
