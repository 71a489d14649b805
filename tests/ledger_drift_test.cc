// Drift (issue 14): the change-point detector on simulated series -- its
// power on a 3% step under 1% noise, its false-alarm rate without one -- and
// `verity drift` over a simulated ledger whose box got slower half-way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "ledger/drift.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

using ledger::DetectChangePoints;

// n points around 1000 with relative noise `noise`; from `step_at` on, the
// level is multiplied by (1 + step).
std::vector<double> Series(int n, double noise, int step_at, double step, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> x;
  for (int i = 0; i < n; i++) x.push_back(1000.0 * (i >= step_at ? 1.0 + step : 1.0) * (1.0 + noise * z(rng)));
  return x;
}

// The energy distance's best split, the O(n^2) way it was first written:
// every pairwise distance summed directly.
ledger::EnergySplit BruteForceSplit(const std::vector<double>& y, int min_segment) {
  const int n = static_cast<int>(y.size());
  ledger::EnergySplit best;
  for (int tau = min_segment; tau + min_segment <= n; tau++) {
    double within_left = 0, within_right = 0, between = 0;
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) {
        const double d = std::fabs(y[i] - y[j]);
        (j < tau ? within_left : i >= tau ? within_right : between) += d;
      }
    const int m = tau, r = n - tau;
    const double e = 2.0 * between / (static_cast<double>(m) * r) - within_left / (m * (m - 1) / 2.0) -
                     within_right / (r * (r - 1) / 2.0);
    const double q = static_cast<double>(m) * r / n * e;
    if (q > best.q) best = {tau, q};
  }
  return best;
}

// n points of one of four kinds: 0 a 3% step at n/3 under 1% noise, 1 noise
// alone, 2 noise rounded to multiples of tie_step (many ties), 3 noise whose
// first half is one constant.
std::vector<double> KindOfSeries(int n, int kind, uint64_t seed, double tie_step) {
  std::vector<double> y = Series(n, 0.01, n / 3, kind == 0 ? 0.03 : 0.0, seed);
  if (kind == 2)
    for (double& v : y) v = std::round(v / tie_step) * tie_step;
  if (kind == 3)
    for (int i = 0; i < n / 2; i++) y[i] = 1000.0;
  return y;
}

// The O(n log n) split (Fenwick sums by rank) is the direct sum's split: on
// steps, on noise alone, on ties and on constant stretches.
TEST(Drift, TheFastSplitIsTheDirectSumsSplit) {
  std::mt19937_64 rng(3);
  int checked = 0;
  for (int n : {8, 9, 17, 60, 257}) {
    for (int kind = 0; kind < 4; kind++) {
      const std::vector<double> y = KindOfSeries(n, kind, 100 + n * 7 + kind, 5.0);
      const auto fast = ledger::BestEnergySplit(y, 4), slow = BruteForceSplit(y, 4);
      EXPECT_EQ(fast.tau, slow.tau) << "n " << n << " kind " << kind;
      EXPECT_NEAR(fast.q, slow.q, 1e-9 * std::max(1.0, std::fabs(slow.q))) << "n " << n << " kind " << kind;
      checked++;
    }
  }
  EXPECT_EQ(checked, 20);
  EXPECT_EQ(ledger::BestEnergySplit(std::vector<double>(7, 1.0), 4).tau, -1);  // too short to split
}

// SplitPValue's shuffles skip BestEnergySplit's sort: the same p-value and
// the same draws as shuffling the values and splitting each, bit for bit, on
// steps, noise, ties (which decide the Fenwick sums' order) and constants.
TEST(Drift, ThePermutationTestIsTheSortingOneBitForBit) {
  int checked = 0, stopped_early = 0;
  for (int n : {8, 9, 17, 60, 200}) {
    for (int kind = 0; kind < 4; kind++) {
      const std::vector<double> y = KindOfSeries(n, kind, 300 + n * 7 + kind, 2.0);
      ledger::DriftOptions o;
      o.permutations = 99;
      std::mt19937_64 b(11 + n);
      std::vector<double> z = y, qs;
      for (int k = 0; k < o.permutations; k++) {
        std::shuffle(z.begin(), z.end(), b);
        qs.push_back(ledger::BestEnergySplit(z, o.min_segment).q);
      }
      // Thresholds at the shuffles' own statistics: an ulp lower on the fast
      // side would change a count.
      std::vector<double> sorted = qs;
      std::sort(sorted.begin(), sorted.end());
      for (double q : {sorted[0], sorted[24], sorted[49], sorted[74], sorted[98]}) {
        std::mt19937_64 a(11 + n);
        const double fast = ledger::SplitPValue(y, q, o, a);
        const auto at_least = std::count_if(qs.begin(), qs.end(), [&](double v) { return v >= q; });
        EXPECT_EQ(fast, (at_least + 1.0) / (o.permutations + 1.0)) << "n " << n << " kind " << kind << " q " << q;
        std::mt19937_64 c = b;
        EXPECT_EQ(a(), c()) << "the draws diverged: n " << n << " kind " << kind;
        // Stopping once decided: exact below the bound, the same verdict above it.
        for (double stop : {0.02, 0.1, 0.5}) {
          std::mt19937_64 e(11 + n);
          const double early = ledger::SplitPValue(y, q, o, e, stop);
          if (fast < stop) EXPECT_EQ(early, fast) << "n " << n << " kind " << kind << " stop " << stop;
          else EXPECT_GE(early, stop) << "n " << n << " kind " << kind << " stop " << stop;
          stopped_early += early < fast;
        }
      }
      checked++;
    }
  }
  EXPECT_EQ(checked, 20);
  EXPECT_GT(stopped_early, 50);  // the bound is reached before the last shuffle, not only at it
}

TEST(Drift, FindsAThreePercentStepUnderOnePercentNoise) {
  int found = 0;
  for (int s = 0; s < 10; s++) {
    const int at = 12 + 2 * s;  // steps at different places in 40 points
    auto cps = DetectChangePoints(Series(40, 0.01, at, -0.03, 100 + s));
    bool near = false;
    for (const auto& c : cps) near = near || (std::abs(c.index - at) <= 2 && c.step() < -0.02 && c.step() > -0.04);
    found += near;
  }
  std::printf("drift power: a -3%% step under 1%% noise found within 2 points in %d of 10 series\n", found);
  EXPECT_GE(found, 9);
}

TEST(Drift, SeriesWithoutAStepRarelyAlarm) {
  // Issue 14's bar is <= 1 alarm in 20 series; the rate is measured on 200.
  int alarms = 0;
  const int n = 200;
  for (int s = 0; s < n; s++) alarms += !DetectChangePoints(Series(40, 0.01, 40, 0.0, 5000 + s)).empty();
  std::printf("drift false alarms: %d of %d series without a step (alpha 0.01)\n", alarms, n);
  EXPECT_LE(alarms, n / 20);
  int first20 = 0;
  for (int s = 0; s < 20; s++) first20 += !DetectChangePoints(Series(40, 0.01, 40, 0.0, 5000 + s)).empty();
  EXPECT_LE(first20, 1);
}

TEST(Drift, IsDeterministicAndNeedsEnoughPoints) {
  auto x = Series(30, 0.01, 15, 0.05, 9);
  auto a = DetectChangePoints(x), b = DetectChangePoints(x);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i].p_value, b[i].p_value);
  EXPECT_TRUE(DetectChangePoints(std::vector<double>(7, 1.0)).empty()) << "fewer than 2 x min_segment points";
  EXPECT_TRUE(DetectChangePoints(std::vector<double>(30, 1.0)).empty()) << "a constant series has no change point";
}

// A ledger of no-op changes measured while the box got 4% slower after the
// sixth: drift names the runs either side and the changes between.
TEST(Drift, FindsTheRunsWhereTheBoxGotSlower) {
  Case c = Fresh("drift");
  const std::string mean = c.dir + "/mean";
  for (int i = 0; i < 12; i++) {
    WriteFile(mean, i < 6 ? "1000" : "960");
    const std::string bench = "--mean-file " + mean + " --model m.bin";
    const std::string n = std::to_string(i);
    const std::string title = "no-op " + std::to_string(i + 1), base = "b" + n, head = "h" + n;
    auto r = Submit(c.db, title, 0.5, Bench(c.dir, base, 0, 0.005, 10 * i, bench),
                    Bench(c.dir, head, 0, 0.005, 10 * i + 1, bench), Parity());
    ASSERT_EQ(r.cmd.exit_code, 0) << r.cmd.err;
  }
  auto text = Shell(VerityBin() + " drift --ledger " + c.db);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("drift: 1 change point (1 open regression) in 1 series, 12 points"), std::string::npos)
      << text.out;
  auto j = JsonOf(VerityBin() + " drift --json --ledger " + c.db);
  ASSERT_EQ(j["series"].size(), 1u) << j.dump();
  const auto& cp = j["series"][0]["change_points"];
  ASSERT_EQ(cp.size(), 1u) << j.dump();
  EXPECT_EQ(cp[0]["before"]["run"], 6);
  EXPECT_EQ(cp[0]["after"]["run"], 7);
  EXPECT_NEAR(cp[0]["step"].get<double>(), -0.04, 0.01);
  ASSERT_EQ(cp[0]["changes_between"].size(), 1u) << "the one change recorded between the last fast and first slow base";
  EXPECT_EQ(cp[0]["changes_between"][0]["change"], 6);
  EXPECT_EQ(j["points_examined"], 12);
  EXPECT_EQ(cp[0]["regression"], true);
  EXPECT_EQ(j["open_regressions"], 1);

  // Triage: each state change a sealed record; fixed needs a later change.
  const std::string key = cp[0]["key"];
  EXPECT_NE(text.out.find("regression, not triaged [" + key + "]"), std::string::npos) << text.out;
  auto t = Shell(VerityBin() + " triage --ledger " + c.db + " " + Quote(key) +
                 " --state investigating --by ana --reason 'kernel update on the box?'");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("-> investigating by ana"), std::string::npos) << t.out;
  auto early = Shell(VerityBin() + " triage --ledger " + c.db + " " + Quote(key) +
                     " --state fixed --by ana --reason x --fixed-by 3");
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_NE(early.err.find("was measured before the regression's run 7"), std::string::npos) << early.err;
  auto bad = Shell(VerityBin() + " triage --ledger " + c.db + " drift/none --state wontfix --by ana --reason x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("names no change point"), std::string::npos) << bad.err;
  auto after = JsonOf(VerityBin() + " drift --json --ledger " + c.db);
  EXPECT_EQ(after["series"][0]["change_points"][0]["triage"]["state"], "investigating");
  EXPECT_EQ(after["open_regressions"], 1) << "investigating is still open";
  ASSERT_EQ(Shell(VerityBin() + " triage --ledger " + c.db + " " + Quote(key) +
                  " --state fixed --by bo --reason 'box rebooted' --fixed-by 12")
                .exit_code,
            0);
  EXPECT_EQ(JsonOf(VerityBin() + " drift --json --ledger " + c.db)["open_regressions"], 0);
}

TEST(Drift, SaysWhatItExaminedWhenNothingIsFound) {
  Case c = Fresh("drift-empty");
  auto r = Shell(VerityBin() + " drift --ledger " + c.db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "drift: no change point in 0 series, 0 points (E-divisive means, alpha 0.01, 499 permutations)\n");
}

}  // namespace
}  // namespace verity::test
