#include "ledger/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace verity::ledger {

Interval BootstrapMedianCI(const std::vector<double>& diffs, uint64_t seed, int resamples, double confidence) {
  Interval ci;
  if (diffs.empty()) return ci;
  if (diffs.size() == 1) return {diffs[0], diffs[0]};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, diffs.size() - 1);
  std::vector<double> meds(static_cast<size_t>(resamples)), draw(diffs.size());
  const size_t n = draw.size();
  for (auto& m : meds) {
    for (auto& d : draw) d = diffs[pick(rng)];
    std::sort(draw.begin(), draw.end());  // in place: Median(draw) without a copy
    m = n % 2 ? draw[n / 2] : 0.5 * (draw[n / 2 - 1] + draw[n / 2]);
  }
  const double alpha = (1.0 - confidence) / 2.0;
  auto at = [&](double q) {
    size_t i = std::min(static_cast<size_t>(std::floor(q * (meds.size() - 1))), meds.size() - 1);
    std::nth_element(meds.begin(), meds.begin() + static_cast<std::ptrdiff_t>(i), meds.end());
    return meds[i];
  };
  ci.low = at(alpha);
  ci.high = at(1.0 - alpha);
  return ci;
}

namespace {

// log C(n, i) - n log 2, in long double.
long double LogBinomHalfPmf(int n, int i) {
  return std::lgamma(static_cast<long double>(n) + 1) - std::lgamma(static_cast<long double>(i) + 1) -
         std::lgamma(static_cast<long double>(n - i) + 1) - static_cast<long double>(n) * std::log(2.0L);
}

// log(exp(a) + exp(b)) without overflow; a may be -inf.
long double LogAdd(long double a, long double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const long double m = std::max(a, b);
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

}  // namespace

double BinomialHalfCdf(int n, int k) {
  if (k < 0 || n < 0) return 0.0;
  if (k >= n) return 1.0;
  long double log_cdf = -INFINITY;
  for (int i = 0; i <= k; i++) log_cdf = LogAdd(log_cdf, LogBinomHalfPmf(n, i));
  return static_cast<double>(std::exp(log_cdf));
}

int SignTestRank(int n, double alpha) {
  if (n < 1 || !(alpha > 0.0)) return 0;
  const long double log_alpha = std::log(static_cast<long double>(alpha)) + 1e-12L;
  const int cap = (n + 1) / 2;
  int k = 0;
  long double log_cdf = -INFINITY;  // log P(Binomial(n, 1/2) <= k-1) for the candidate k+1
  while (k < cap) {
    log_cdf = LogAdd(log_cdf, LogBinomHalfPmf(n, k));  // now P(<= k): the tail for rank k+1
    if (log_cdf > log_alpha) break;
    k++;
  }
  return k;
}

Bounds MedianBounds(std::vector<double> ratios, double alpha) {
  Bounds b;
  b.alpha = alpha;
  b.n = static_cast<int>(ratios.size());
  std::sort(ratios.begin(), ratios.end());
  b.estimate = Median(ratios);
  b.k = SignTestRank(b.n, alpha);
  if (b.k == 0) {
    b.low = -std::numeric_limits<double>::infinity();
    b.high = std::numeric_limits<double>::infinity();
  } else {
    b.low = ratios[static_cast<size_t>(b.k - 1)];
    b.high = ratios[static_cast<size_t>(b.n - b.k)];
  }
  return b;
}

std::vector<int> LookRounds(const SequentialPlan& plan) {
  std::vector<int> looks;
  if (plan.min_rounds < 1 || plan.max_rounds < plan.min_rounds || plan.look_every < 1) return looks;
  for (int n = plan.min_rounds; n < plan.max_rounds; n += plan.look_every) looks.push_back(n);
  looks.push_back(plan.max_rounds);
  return looks;
}

bool IsLook(const SequentialPlan& plan, int n) {
  if (plan.min_rounds < 1 || plan.max_rounds < plan.min_rounds || plan.look_every < 1) return false;
  if (n == plan.max_rounds) return true;
  return n >= plan.min_rounds && n < plan.max_rounds && (n - plan.min_rounds) % plan.look_every == 0;
}

double LookAlpha(const SequentialPlan& plan, int attempt) {
  const size_t looks = LookRounds(plan).size();
  if (looks == 0) return 0.0;
  return std::ldexp(plan.alpha, -(std::max(attempt, 0) + 1)) / static_cast<double>(looks);
}

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kContinue: return "continue";
    case Decision::kAbove: return "above";
    case Decision::kBelow: return "below";
    case Decision::kUnresolved: return "unresolved";
  }
  return "?";
}

Decision Decide(const SequentialPlan& plan, const std::vector<double>& ratios, double gate, int attempt) {
  const int n = static_cast<int>(ratios.size());
  if (n > plan.max_rounds) return Decision::kUnresolved;
  if (!IsLook(plan, n)) return Decision::kContinue;
  const Bounds b = MedianBounds(ratios, LookAlpha(plan, attempt));
  if (b.low >= 1.0 + gate) return Decision::kAbove;
  if (b.high < 1.0 + gate) return Decision::kBelow;
  return n >= plan.max_rounds ? Decision::kUnresolved : Decision::kContinue;
}

bool GuardRegressed(const std::vector<double>& ratios, double gate, double alpha) {
  const Bounds b = MedianBounds(ratios, alpha);
  return b.high < 1.0 && b.estimate <= 1.0 - gate;
}

std::optional<std::string> CheckRequestedRounds(const SequentialPlan& policy, int min_rounds, int max_rounds) {
  if (min_rounds < policy.min_rounds)
    return "a minimum of " + std::to_string(min_rounds) + " rounds is below the policy floor of " +
           std::to_string(policy.min_rounds) + " rounds (more are allowed, fewer never)";
  if (max_rounds < policy.max_rounds)
    return "a maximum of " + std::to_string(max_rounds) + " rounds is below the policy floor of " +
           std::to_string(policy.max_rounds) + " rounds (more are allowed, fewer never)";
  if (max_rounds < min_rounds)
    return "a maximum of " + std::to_string(max_rounds) + " rounds is below the minimum of " +
           std::to_string(min_rounds);
  return std::nullopt;
}

}  // namespace verity::ledger
