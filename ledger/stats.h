// Statistics for paired same-box ABBA rounds. Pure functions, no I/O.
//
// The scoring rule (docs/statistics.md has the why and the simulated error
// rates): a round b1,h1,h2,b2 gives one ratio r = (h1+h2)/(b1+b2) for a
// higher-is-better metric (the caller passes (b1+b2)/(h1+h2) for a
// lower-is-better one), so a linear drift within the round cancels. The
// estimate is the median of the round ratios; its bounds are distribution-free
// order-statistic (sign-test) bounds. The decision is taken only at the looks
// of a SequentialPlan, and the one-sided error rate alpha is spent
// (Bonferroni) over the looks of an attempt and over the attempts of a change
// (the first submission, then each re-measurement after a frontier move), so
// the rate holds under optional stopping and repeated re-measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/median.h"

namespace verity::ledger {

using verity::Median;  // base/median.h

struct Interval {
  double low = 0.0, high = 0.0;
};

// Percentile bootstrap (95% by default) of the median of `diffs`, from a
// generator seeded with `seed`: the same data and seed give the same interval.
// Superseded by MedianBounds: its coverage is not its nominal level at small n
// and it is not sized for repeated looks. Kept for old callers; do not use in
// new code.
Interval BootstrapMedianCI(const std::vector<double>& diffs, uint64_t seed, int resamples = 2000,
                           double confidence = 0.95);

// Returns P(Binomial(n, 1/2) <= k), computed in log space in long double
// (accurate for n up to at least 10^5). 0 for k < 0, 1 for k >= n.
double BinomialHalfCdf(int n, int k);

// Returns the sign-test rank k for `n` observations at one-sided level
// `alpha`: the largest k >= 1 with P(Binomial(n, 1/2) <= k-1) <= alpha, capped
// at (n+1)/2 so that the two bounds never cross; 0 when even k = 1 fails
// (2^-n > alpha) or n < 1. (A relative tolerance of 1e-12 absorbs rounding
// when alpha is exactly a binomial tail, e.g. n = 4, alpha = 1/16 gives 1.)
int SignTestRank(int n, double alpha);

// Order-statistic confidence bounds for the median of i.i.d. ratios.
struct Bounds {
  double estimate = 0.0;  // Median(ratios); 0 when there are none
  double low = 0.0;       // x_(k): P(low > true median) <= alpha; -inf if k = 0
  double high = 0.0;      // x_(n+1-k): P(high < true median) <= alpha; +inf if k = 0
  double alpha = 0.0;     // the one-sided level each bound was computed at
  int n = 0;              // number of ratios
  int k = 0;              // SignTestRank(n, alpha); 0 means no bound
};

// Returns the median of `ratios` and its one-sided sign-test bounds at level
// `alpha` each (0 < alpha < 0.5): low = x_(k), high = x_(n+1-k) (1-based order
// statistics, k = SignTestRank(n, alpha)). Each side covers the true median
// with probability >= 1-alpha for any continuous distribution with that
// median. Requires finite ratios.
Bounds MedianBounds(std::vector<double> ratios, double alpha);

// The sequential plan: the decision is evaluated only at rounds min_rounds,
// min_rounds + look_every, ... (those below max_rounds) and always at
// max_rounds. Defaults are policy v2. alpha is the total one-sided error rate
// per change (all attempts together), for a true gain exactly at the gate.
struct SequentialPlan {
  int min_rounds = 10;
  int max_rounds = 30;
  int look_every = 5;
  double alpha = 0.05;
};

// Returns the rounds at which `plan` looks, ascending, e.g. {10,15,20,25,30}
// for the defaults and {10,15,17} for {10,17,5}. Empty for an invalid plan
// (min_rounds < 1, max_rounds < min_rounds, or look_every < 1).
std::vector<int> LookRounds(const SequentialPlan& plan);

// Returns true iff round count `n` is one of LookRounds(plan).
bool IsLook(const SequentialPlan& plan, int n);

// Returns the one-sided level of each look of attempt `attempt` (0 = the first
// submission, j >= 1 = the j-th re-measurement of the same change):
// plan.alpha * 2^-(attempt+1) / LookRounds(plan).size(). Summed over every look
// of every attempt this is < plan.alpha. 0 for an invalid plan; a negative
// attempt counts as 0.
double LookAlpha(const SequentialPlan& plan, int attempt);

enum class Decision {
  kContinue,    // not a look, or a look with the gate inside the bounds: run another round
  kAbove,       // low >= 1+gate: significantly at or above the gate (accept)
  kBelow,       // high < 1+gate: cannot reach the gate (stop; parked)
  kUnresolved,  // the last look (max_rounds) without kAbove or kBelow (parked)
};

// Returns "continue", "above", "below" or "unresolved".
const char* DecisionName(Decision d);

// Returns the decision after ratios.size() rounds of attempt `attempt`, with
// `gate` a fraction (policy: 0.02). Evaluated only when ratios.size() is a look
// of `plan` (kContinue otherwise; kUnresolved past max_rounds), with
// MedianBounds(ratios, LookAlpha(plan, attempt)): kAbove if low >= 1+gate,
// else kBelow if high < 1+gate, else kUnresolved at max_rounds and kContinue
// before it.
Decision Decide(const SequentialPlan& plan, const std::vector<double>& ratios, double gate, int attempt);

// Guard metric (another metric of the same rounds that must not regress;
// ratios oriented so that > 1 is better). Returns true iff the regression is
// significant and beyond the gate: MedianBounds(ratios, alpha).high < 1 and
// the median <= 1-gate. Use alpha = LookAlpha(plan, attempt) on the rounds the
// primary decision stopped at.
bool GuardRegressed(const std::vector<double>& ratios, double gate, double alpha);

// Validates a submitter's requested rounds against the policy floor: more
// rounds than the policy's are allowed, fewer never. Returns nullopt when
// min_rounds >= policy.min_rounds, max_rounds >= policy.max_rounds and
// max_rounds >= min_rounds; otherwise the error message, which names the
// floor (e.g. "--min-rounds 5 is below the policy floor of 10 rounds"). An
// accepted request runs under {min_rounds, max_rounds, policy.look_every,
// policy.alpha}: more looks only make each look's alpha smaller.
std::optional<std::string> CheckRequestedRounds(const SequentialPlan& policy, int min_rounds, int max_rounds);

}  // namespace verity::ledger
