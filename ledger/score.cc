#include "ledger/score.h"

#include "ledger/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "ledger/format.h"

namespace verity::ledger {
namespace {

std::string BoundsText(const Bounds& b) {
  auto one = [](double r) { return std::isfinite(r) ? PctText(r - 1.0) : std::string("none"); };
  return "[" + one(b.low) + ", " + one(b.high) + "]";
}

// A series' base and head medians, in the metric's own unit.
std::pair<double, double> SideMedians(const MetricSeries& s) {
  std::vector<double> bases, heads;
  for (const auto& x : s.rounds) {
    bases.insert(bases.end(), {x.b1, x.b2});
    heads.insert(heads.end(), {x.h1, x.h2});
  }
  return {Median(bases), Median(heads)};
}

// The guards: every other metric, regressed when significantly worse beyond
// the gate and (v3 on) worse by more than its unit's floor.
std::vector<GuardResult> ScoreGuards(const Policy& p, const ScoreInput& in, double alpha) {
  std::vector<GuardResult> out;
  for (const auto& g : in.guards) {
    GuardResult r;
    r.metric = g.metric;
    r.higher_is_better = g.higher_is_better;
    const std::vector<double> ratios = RoundRatios(g);
    r.bounds = MedianBounds(ratios, alpha);
    std::tie(r.base_median, r.head_median) = SideMedians(g);
    r.floor = p.FloorFor(g.metric);
    r.beyond_gate = GuardRegressed(ratios, p.gate_frac, alpha);
    // A floor of 0 leaves v2's test exactly as it was (even where the medians disagree with the ratios).
    const bool under_floor = r.floor && r.floor->amount > 0.0 && r.worse_by() <= r.floor->amount;
    r.regressed = r.beyond_gate && !under_floor;
    r.declared = std::find(in.declared_regressions.begin(), in.declared_regressions.end(), g.metric) !=
                 in.declared_regressions.end();
    out.push_back(r);
  }
  return out;
}

}  // namespace

std::string AmountText(double v, const std::string& unit, bool sign) {
  char b[48];
  // Three significant digits, but never an exponent for a large amount (bytes).
  if (std::fabs(v) >= 1000.0) std::snprintf(b, sizeof b, sign ? "%+.0f" : "%.0f", v);
  else std::snprintf(b, sizeof b, sign ? "%+.3g" : "%.3g", v);
  return std::string(b) + (unit.empty() ? "" : " " + unit);
}

std::string FloorText(const GuardResult& g) {
  if (!g.floor) return "";
  const std::string by = AmountText(g.worse_by(), g.floor->unit, true);
  if (g.within_floor()) return "within floor " + AmountText(g.floor->amount, g.floor->unit, false) + " (" + by + ")";
  if (g.regressed && g.floor->amount > 0.0)
    return "beyond floor " + AmountText(g.floor->amount, g.floor->unit, false) + " (" + by + ")";
  return "";
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAccepted: return "accepted";
    case Verdict::kNone: return "none";
    case Verdict::kRejectedParity: return "rejected-parity";
    case Verdict::kRejectedImplausible: return "rejected-implausible";
    case Verdict::kRejectedRegression: return "rejected-regression";
    case Verdict::kHeldSurprise: return "held-surprise";
    case Verdict::kUnverified: return "unverified";
    case Verdict::kRefused: return "refused";
    case Verdict::kFailed: return "failed";
  }
  return "failed";
}

std::optional<Verdict> VerdictFromName(const std::string& name) {
  for (Verdict v : {Verdict::kAccepted, Verdict::kNone, Verdict::kRejectedParity, Verdict::kRejectedImplausible,
                    Verdict::kRejectedRegression, Verdict::kHeldSurprise, Verdict::kUnverified, Verdict::kRefused,
                    Verdict::kFailed})
    if (name == VerdictName(v)) return v;
  return std::nullopt;
}

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kRevert: return "revert";
    case Kind::kReapply: return "reapply";
    case Kind::kChange: break;
  }
  return "change";
}

std::optional<Kind> KindFromName(const std::string& name) {
  for (Kind k : {Kind::kChange, Kind::kRevert, Kind::kReapply})
    if (name == KindName(k)) return k;
  return std::nullopt;
}

std::optional<bool> MetricDirection(const std::string& metric) {
  auto unit = UnitOf(metric);
  if (!unit.ok()) return std::nullopt;
  return unit->higher_is_better;
}

bool HigherIsBetter(const std::string& metric) { return MetricDirection(metric).value_or(true); }

double RoundRatio(const Round& r, bool higher_is_better) {
  const double base = r.b1 + r.b2, head = r.h1 + r.h2;
  return higher_is_better ? head / base : base / head;
}

std::vector<double> RoundRatios(const MetricSeries& s) {
  std::vector<double> out;
  out.reserve(s.rounds.size());
  for (const auto& r : s.rounds) out.push_back(RoundRatio(r, s.higher_is_better));
  return out;
}

SequentialPlan PlanFor(const Policy& p, int min_rounds, int max_rounds) {
  SequentialPlan plan;
  plan.min_rounds = std::max(p.min_rounds, min_rounds);
  plan.max_rounds = std::max({p.max_rounds, max_rounds, plan.min_rounds});
  plan.look_every = p.look_every;
  plan.alpha = p.alpha;
  return plan;
}

namespace {

// What the verdict rules read, besides the policy, the input and the result so far.
struct Findings {
  std::string measured;   // the gain, its bounds, alpha and n, in words
  bool above = false;     // the ratio is significantly above the gate
  std::string regressed;  // the undeclared regressed guards, in words ("" = none)
  std::string regression_note, unverified_note;
};

// The primary metric against the gate: the ratio and its bounds, the
// medians, the frontier, the decision, the guards and the surprise.
void MeasureAgainstGate(const Policy& p, const ScoreInput& in, double alpha, ScoreResult& r) {
  const std::vector<double> ratios = RoundRatios(in.primary);
  r.ratio = MedianBounds(ratios, alpha);
  r.gain = r.ratio.estimate - 1.0;
  std::tie(r.base_median, r.head_median) = SideMedians(in.primary);
  r.seeds_frontier = !in.frontier.has_value();
  r.frontier_before = in.frontier.value_or(r.base_median);
  r.frontier_after = r.frontier_before;
  r.gate = p.gate_frac * r.frontier_before;
  const double bar = 1.0 + p.gate_frac;
  r.decision = r.ratio.low >= bar ? Decision::kAbove : r.ratio.high < bar ? Decision::kBelow : Decision::kUnresolved;
  r.guards = ScoreGuards(p, in, alpha);
  if (in.predict_frac && in.kind != Kind::kRevert) r.surprise = p.IsSurprise(*in.predict_frac, r.gain);
}

// The undeclared regressed guards, each with its change and floor.
std::string RegressedGuards(const ScoreResult& r) {
  std::string regressed;
  for (const auto& g : r.guards)
    if (g.regressed && !g.declared) {
      const std::string floor = FloorText(g);  // v3: the size it was judged by, too
      regressed += (regressed.empty() ? "" : ", ") + g.metric + " " + PctText(g.bounds.estimate - 1.0) +
                   (floor.empty() ? "" : " " + floor);
    }
  return regressed;
}

// The fastest decode this box can physically do for the head (bandwidth /
// bytes per token, with the policy's tolerance); infinite when no ceiling applies.
double DecodeCeiling(const Policy& p, const ScoreInput& in) {
  const bool decode = in.primary.metric == "decode_tok_s";
  const bool applies =
      decode && in.read_bytes_per_s && in.head_bytes_per_token && *in.head_bytes_per_token >= p.ceiling_min_bytes;
  return applies ? p.ceiling_tolerance * *in.read_bytes_per_s / *in.head_bytes_per_token : INFINITY;
}

// The head decodes faster than the box's read bandwidth allows, in words.
std::string AboveBandwidthNote(const Policy& p, const ScoreInput& in, const ScoreResult& r) {
  return "head decodes " + NumText(r.head_median) + " tok/s x " + NumText(*in.head_bytes_per_token / 1e6) +
         " MB/token = " + NumText(r.head_median * *in.head_bytes_per_token / 1e9) + " GB/s, above " + in.ceiling_of +
         " measured read bandwidth of " + NumText(*in.read_bytes_per_s / 1e9) + " GB/s (x" +
         NumText(p.ceiling_tolerance, 3) + " for measurement error)";
}

// Accepted: the frontier moves by the factor.
void Accept(const Policy& p, ScoreResult& r) {
  r.verdict = Verdict::kAccepted;
  r.tier = p.TierFor(r.gain);
  r.moves_frontier = true;
  r.frontier_after = r.frontier_before * r.factor;
}

// A revert: removing the change must gain beyond the gate, with no
// undeclared regression and parity evidence bound to the head.
void JudgeRevert(const Policy& p, const ScoreInput& in, const Findings& f, ScoreResult& r) {
  if (f.above && !f.regressed.empty()) {
    r.verdict = Verdict::kRejectedRegression;
    r.note = f.regression_note;
  } else if (f.above && !in.verified) {
    r.verdict = Verdict::kUnverified;
    r.note = f.unverified_note;
  } else if (f.above) {
    Accept(p, r);
    r.note = "the change costs " + f.measured + ", beyond the gate of " + PctText(p.gate_frac);
  } else {
    r.verdict = Verdict::kRefused;
    r.note = "evidence too weak: removing the change gains " + f.measured + "; the gate is " + PctText(p.gate_frac);
  }
}

// A change (or reapply) shown above the gate: rejected for an undeclared
// regression, unverified, held as a surprise, or accepted.
void JudgeAboveGate(const Policy& p, const ScoreInput& in, const Findings& f, ScoreResult& r) {
  if (!f.regressed.empty()) {
    r.verdict = Verdict::kRejectedRegression;
    r.note = f.regression_note;
  } else if (!in.verified) {
    r.verdict = Verdict::kUnverified;
    r.tier = p.TierFor(r.gain);
    r.note = f.unverified_note;
  } else if (r.surprise) {
    r.verdict = Verdict::kHeldSurprise;
    r.tier = p.TierFor(r.gain);
    r.note = "measured " + f.measured + " vs predicted " + PctText(in.predict_frac.value_or(0.0)) +
             ": held until deep parity confirms it";
  } else {
    Accept(p, r);
    r.note = "above the gate: " + f.measured;
  }
}

// The verdict, rule by rule: physically implausible, implausibly large, a
// revert's own rules, not shown above the gate, then above it.
void Judge(const Policy& p, const ScoreInput& in, const Findings& f, ScoreResult& r) {
  const double limit = DecodeCeiling(p, in);
  if (r.head_median > limit) {
    r.verdict = Verdict::kRejectedImplausible;
    r.note = AboveBandwidthNote(p, in, r);
  } else if (r.ratio.estimate > p.ceiling_ratio) {
    r.verdict = Verdict::kRejectedImplausible;
    r.note = "head is " + NumText(r.ratio.estimate) + "x the base, above the plausibility ceiling of " +
             NumText(p.ceiling_ratio) + "x";
  } else if (in.kind == Kind::kRevert) {
    JudgeRevert(p, in, f, r);
  } else if (!f.above) {
    r.verdict = Verdict::kNone;
    r.note = (r.decision == Decision::kBelow ? "cannot reach the gate: " : "not shown above the gate: ") + f.measured +
             "; parked";
  } else {
    JudgeAboveGate(p, in, f, r);
  }
}

// What the note adds after the verdict: declared regressions, guards let
// through by their floor, a surprise that did not hold the run.
void AppendGuardNotes(ScoreResult& r) {
  for (const auto& g : r.guards)
    if (g.regressed && g.declared)
      r.note += "; declared regression on " + g.metric + " " + PctText(g.bounds.estimate - 1.0);
  for (const auto& g : r.guards)
    if (g.within_floor()) r.note += "; guard " + g.metric + " " + PctText(g.bounds.estimate - 1.0) + " " + FloorText(g);
  if (r.surprise && r.verdict != Verdict::kHeldSurprise) r.note += "; surprise vs prediction";
}

}  // namespace

ScoreResult Score(const Policy& p, const ScoreInput& in) {
  ScoreResult r;
  const double alpha = LookAlpha(in.plan, in.attempt);
  MeasureAgainstGate(p, in, alpha, r);

  Findings f;
  f.measured = PctText(r.gain) + " (bounds " + BoundsText(r.ratio) + " at alpha " + NumText(alpha) + ", n " +
               std::to_string(r.ratio.n) + ")";
  f.above = r.decision == Decision::kAbove;
  // The frontier is in metric units: a lower-is-better metric moves down by the ratio.
  r.factor = in.primary.higher_is_better ? r.ratio.estimate : 1.0 / r.ratio.estimate;
  f.regressed = RegressedGuards(r);
  f.regression_note =
      "guard metric regressed beyond the gate: " + f.regressed + " (declare with --accept-regression METRIC)";
  f.unverified_note = "no parity evidence bound to the head's artifact: recorded, cannot move the frontier";
  Judge(p, in, f, r);
  AppendGuardNotes(r);
  return r;
}

}  // namespace verity::ledger
