#include "ledger/policy.h"

#include <cmath>

#include "ledger/units.h"

namespace verity::ledger {

const char* TierName(Tier t) {
  switch (t) {
    case Tier::kS: return "s";
    case Tier::kM: return "m";
    case Tier::kL: return "l";
    case Tier::kXL: return "xl";
    case Tier::kNone: break;
  }
  return "none";
}

std::optional<Tier> TierFromName(const std::string& name) {
  for (Tier t : {Tier::kNone, Tier::kS, Tier::kM, Tier::kL, Tier::kXL})
    if (name == TierName(t)) return t;
  return std::nullopt;
}

Policy PolicyV1() {
  Policy p;
  p.version = 1;
  p.gate_frac = 0.02;
  p.tiers = {{Tier::kS, 0.02}, {Tier::kM, 0.05}, {Tier::kL, 0.10}, {Tier::kXL, 0.25}};
  p.ceiling_ratio = 5.0;
  p.parity_min_top1 = 0.95;
  p.parity_max_mean_kl = 0.05;
  p.surprise_factor = 2.0;
  return p;
}

Policy PolicyV2() {
  Policy p = PolicyV1();
  p.version = 2;
  p.min_rounds = 10;
  p.max_rounds = 30;
  p.look_every = 5;
  p.alpha = 0.05;
  p.parity_min_depths = 7;
  p.parity_min_positions = 8;
  p.deep_factor = 2.0;
  p.gain_rule =
      "gain = median over ABBA rounds of (h1+h2)/(b1+b2), minus 1: head against the base of the same run; "
      "accepted when the sign-test lower bound of that median clears 1 + gate; the frontier is multiplied by "
      "the median ratio";
  return p;
}

Policy PolicyV3() {
  Policy p = PolicyV2();
  p.version = 3;
  // Memory is a capacity, paid once per process: below a few MiB a rise is
  // the process's fixed baseline (code pages, thread stacks, allocator
  // arenas), not the model. Time and rates are paid on every call and span
  // ns kernels to whole processes, so no fixed amount is negligible for all
  // of them: their relative gate stands alone.
  constexpr double kMemoryMiB = 4.0;
  p.guard_floors = {{"_mb", kMemoryMiB, "MiB"},
                    {"_gb", kMemoryMiB / 1024.0, "GiB"},
                    {"_bytes", kMemoryMiB * 1024.0 * 1024.0, "bytes"},
                    {"_ns", 0.0, "ns"},
                    {"_us", 0.0, "us"},
                    {"_ms", 0.0, "ms"},
                    {"_s", 0.0, "s"},
                    {"_seconds", 0.0, "s"},
                    {"_tok_s", 0.0, "tok/s"},
                    {"_per_s", 0.0, "/s"},
                    {"_gflops", 0.0, "GFLOP/s"},
                    {"_tflops", 0.0, "TFLOP/s"},
                    {"_gb_s", 0.0, "GB/s"}};
  return p;
}

Policy PolicyV4() {
  Policy p = PolicyV3();
  p.version = 4;
  p.step_rule =
      "a frontier step is a move from one artifact to another on a workload (metric, box, workload); an "
      "artifact counts at most once per frontier: a run whose head artifact already counts in it, or whose base "
      "artifact is one the frontier has stood at and moved past, never moves it (it is recorded, refused, and says "
      "why); a revert that counts frees the head of the change it undoes; a revert counts only while its change "
      "counts on the revert's own workload, checked when it is scored";
  p.budget_rule =
      "one error budget per change: a change's runs, and every run of a change of the same kind and metric that "
      "measured the same base and head artifacts (a resubmission), are attempts of one change, numbered on; a run "
      "spends its attempt if it was scored with a measurement or took a look before it failed; a resubmission is "
      "scored against the first prediction recorded for its artifact pair";
  return p;
}

Policy PolicyV5() {
  Policy p = PolicyV4();
  p.version = 5;
  // 256 bytes is ~60 tokens of English text: past the prompt and the first
  // sentence, into the positions where a wrong cache or RoPE row shows; a
  // 256-step greedy run of stories260K prints ~570 bytes.
  constexpr long long kTokenIdentityBytes = 256;
  const std::string depths = std::to_string(p.parity_min_depths) + " depths with at least " +
                             std::to_string(p.parity_min_positions) + " positions each";
  p.parity_floors = {
      {"verity", p.parity_min_depths, p.parity_min_positions, 0,
       "verity: a verity.parity/1 record of the artifact, at least " + depths +
           ", the deepest at the last context position"},
      {"logits", p.parity_min_depths, p.parity_min_positions, 0,
       "logits: the engine's raw f32 logits for a teacher-forced sequence against the base's or a reference file, at "
       "least " +
           depths + ", the deepest at the last position, the same top-1 and KL thresholds"},
      {"tokens", 0, 0, kTokenIdentityBytes,
       "tokens: the engine's greedy output equal to the base's or a pinned golden file byte for byte, over at least " +
           std::to_string(kTokenIdentityBytes) + " bytes (deep: " + std::to_string(2 * kTokenIdentityBytes) +
           "); one differing byte fails"}};
  return p;
}

Policy PolicyV6() {
  Policy p = PolicyV5();
  p.version = 6;
  p.step_rule =
      "a frontier step is a move from one place to another on a workload (metric, box, workload); a place is named "
      "by keys (docs/ledger.md, 'What a change is'): the build id each side reports when it names a source and the "
      "two sides' differ, the artifact each side ran, and, when both sides ran one artifact, the command that ran "
      "it; two places are one when they share a key. A place counts at most once per frontier: a run whose head "
      "shares a key with a head that counts, or whose base shares one with a place the frontier stood at and moved "
      "past, never moves it (recorded, refused, and says why); a rebuild of the same commits is the same step; a "
      "revert that counts frees the head of the change it undoes; a revert counts only while its change counts on "
      "the revert's own workload, checked when it is scored; a change from a base the frontier has never stood at "
      "counts only if the frontier's value lies within its base samples widened by the gate (continuity: the "
      "frontier never stands above the fastest head a counted run measured by more than the gate); a workload or "
      "metric key holding a character that does not print as itself (Cc, Cf, fillers) is refused";
  p.budget_rule =
      "one error budget per change: a change's runs, and every run of a change of the same kind and metric that is "
      "the same change (a base key shared and a head key shared: a resubmission, a rebuild of the same commits, one "
      "artifact run by the same commands) are attempts of one change, numbered on; a run spends its attempt once a "
      "timed round was taken (not only at its first look: a start aborted before it spends); a resubmission is "
      "scored against the first prediction recorded for the change";
  return p;
}

std::optional<ParityFloor> Policy::ParityFloorFor(const std::string& kind) const {
  for (const auto& f : parity_floors)
    if (f.kind == kind) return f;
  // Before v5 the only evidence was verity's own, floored by the rules row.
  if (parity_floors.empty() && kind == "verity")
    return ParityFloor{"verity", parity_min_depths, parity_min_positions, 0, ""};
  return std::nullopt;
}

std::optional<GuardFloor> Policy::FloorFor(const std::string& metric) const {
  // The unit table decides the metric's suffix ("read_mb_s" is a rate, not
  // seconds); the policy states that suffix's floor, or none.
  auto unit = UnitOf(metric);
  if (!unit.ok()) return std::nullopt;
  for (const auto& f : guard_floors)
    if (f.suffix == unit->suffix) return f;
  return std::nullopt;
}

Tier Policy::TierFor(double gain) const {
  Tier tier = Tier::kNone;
  for (const auto& [t, lower] : tiers)
    if (gain >= lower) tier = t;
  return tier;
}

bool Policy::IsSurprise(double predicted, double measured) const {
  if (predicted == 0.0) return std::fabs(measured) >= gate_frac;
  if ((predicted > 0) != (measured > 0)) return true;
  const double p = std::fabs(predicted), m = std::fabs(measured);
  return m > surprise_factor * p || m < p / surprise_factor;
}

bool Policy::ParityPasses(double worst_top1, double worst_mean_kl) const {
  // Written so that a NaN fails: comparisons with NaN are false.
  return worst_top1 >= parity_min_top1 && worst_mean_kl <= parity_max_mean_kl;
}

}  // namespace verity::ledger
