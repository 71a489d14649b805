#include "render/pr_comment.h"

#include <cmath>
#include <cstdio>

#include "base/markdown.h"
#include "ledger/format.h"

namespace verity::reports {
namespace {

using ledger::Verdict;

std::string Pct(const std::optional<double>& f) { return f ? ledger::PctText(*f) : "n/a"; }
std::string Num(const std::optional<double>& v) { return v ? ledger::NumText(*v) : "n/a"; }
std::string Short(const std::string& hex, size_t n = 12) { return hex.size() > n ? hex.substr(0, n) : hex; }

// The verdict's one-line meaning, for someone who has never seen verity.
const char* Meaning(Verdict v, ledger::Kind kind) {
  if (v == Verdict::kRefused && kind == ledger::Kind::kChange)
    return "not scored as a new step: the frontier has already moved past this base (a gain on it was counted)";
  switch (v) {
    case Verdict::kAccepted: return "faster beyond the noise and the gate, and correct: it counts";
    case Verdict::kNone: return "not shown faster than the gate: parked, re-measured when the best moves";
    case Verdict::kRejectedParity: return "the correctness gate failed, so no speed it shows can count";
    case Verdict::kRejectedImplausible: return "faster than this box can be: treated as a bug, not a gain";
    case Verdict::kRejectedRegression: return "faster, but a guard metric regressed beyond its gate and floor";
    case Verdict::kHeldSurprise: return "faster, but far from its prediction: held until deeper parity confirms it";
    case Verdict::kUnverified: return "faster, but no parity evidence is bound to the benchmarked build";
    case Verdict::kRefused: return "refused: the revert or reapply lacks the evidence it needs";
    case Verdict::kFailed: return "the run did not complete";
  }
  return "";
}

// What the author (or a maintainer) does next.
std::string Next(Verdict v, ledger::Kind kind, int64_t change) {
  const std::string id = std::to_string(change);
  if (v == Verdict::kRefused && kind == ledger::Kind::kChange)
    return "Rebase onto the current main (which carries the counted gain) and push again: a change is scored "
           "against the frontier's latest base, so no gain is counted twice.";
  switch (v) {
    case Verdict::kAccepted:
      return "Nothing: merge it. The frontier (the best so far) moved, and the gate rises with it.";
    case Verdict::kNone:
      return "Nothing is lost: the change stays parked, and `verity remeasure` scores it again when the frontier "
             "moves. To decide it now, resubmit with more rounds (`--max-rounds`), or merge it as a change that "
             "claims no speed.";
    case Verdict::kRejectedParity:
      return "Fix correctness first: the parity evidence above says what failed. Then resubmit; a change's speed "
             "is measured only after its parity passes.";
    case Verdict::kRejectedImplausible:
      return "Look for what the head skips (a missing tensor, a wrong stride, a cache that never refills): a "
             "result this fast is a bug report until proven otherwise.";
    case Verdict::kRejectedRegression:
      return "Fix the regressed guard, or, if the trade is intended, resubmit declaring it with "
             "`--accept-regression METRIC` (the changelog shows the declaration).";
    case Verdict::kHeldSurprise:
      return "Run `verity confirm " + id +
             "`: it runs the head's parity in deep mode (2x the depths and the window, "
             "the same build) and banks the change if that passes. Or find out why the gain is not the one predicted.";
    case Verdict::kUnverified: return "Resubmit with a `--parity-cmd` whose evidence names the benchmarked build.";
    case Verdict::kRefused: return "Give the revert the evidence its note asks for, then resubmit.";
    case Verdict::kFailed: return "Read the failure above, fix the command, and resubmit.";
  }
  return "";
}

std::string ParityLine(const ledger::ParityView& p) {
  std::string o = std::string(ledger::SideName(p.side)) + ", " + ledger::ParityModeName(p.mode) + ": ";
  o += p.passed ? "**pass**" : "**FAIL**";
  if (!p.message.empty()) o += ", " + markdown::Text(p.message);
  if (!p.artifact_sha256.empty())
    o += "; evidence from build " + markdown::Code(Short(p.build_id), true) + ", artifact " +
         markdown::Code(Short(p.artifact_sha256, 16), true);
  return o;
}

std::string PredictionLine(const ledger::ChangeRow& c, const ledger::ScoreView& s) {
  if (!c.predict_pct) return "none recorded";
  char b[48];
  std::snprintf(b, sizeof b, "%+.2f%%", *c.predict_pct);
  std::string o = b;
  // Policy v4 scores a resubmitted artifact pair against its first prediction; the note names it.
  if (s.note.find("scored against change") != std::string::npos)
    o += " as submitted (scored against an earlier one: see the note)";
  if (!s.gain) return o + " (no speed measured to compare)";
  if (*c.predict_pct == 0.0)
    return o + (s.surprise ? ": **a surprise** (no gain was predicted, and this one reaches the gate)"
                           : ": no gain predicted, none at the gate");
  return o + (s.surprise ? ": **a surprise** (the other sign, or beyond 2x or under half of it)"
                         : ": as predicted (same sign, within 2x)");
}

std::string GuardRow(const ledger::GuardView& g) {
  std::string result = g.regressed ? "**regressed**" : g.declared ? "declared up front" : "not regressed";
  const std::string floor = ledger::FloorText(g);
  if (!floor.empty()) result += " (" + floor + ")";
  const std::string bounds = g.ratio_low && g.ratio_high ? "[" + ledger::PctText(*g.ratio_low - 1) + ", " +
                                                               ledger::PctText(*g.ratio_high - 1) + "]"
                                                         : "n/a";
  return "| " + markdown::Code(g.metric, true) + " | " + (g.higher_is_better ? "higher" : "lower") + " | " +
         ledger::PctText(g.gain()) + " | " + bounds + " | " + result + " |\n";
}

std::string ScoredRun(const ledger::ChangeView& v, const ledger::RunView& r, const ledger::ScoreView& s) {
  const ledger::ChangeRow& c = v.change;
  std::string o;
  o += "**" + std::string(ledger::VerdictName(s.verdict)) + "**";
  if (s.tier != ledger::Tier::kNone) o += std::string(" (tier ") + ledger::TierName(s.tier) + ")";
  o += std::string(": ") + Meaning(s.verdict, c.kind) + ".\n\n";
  o += "| | |\n| --- | --- |\n";
  o += "| metric | " + markdown::Code(c.metric, true) +
       (r.workload.empty() ? "" : " on " + markdown::Text(r.workload)) + ", box " + markdown::Code(Short(r.box), true) +
       " |\n";
  if (s.gain) {
    std::string gain = "**" + Pct(s.gain) + "**, bounds [" + Pct(s.ci_low) + ", " + Pct(s.ci_high) + "]";
    if (s.stats && s.stats->alpha) gain += " at one-sided alpha " + ledger::NumText(*s.stats->alpha, 3);
    gain += ", " + std::to_string(s.rounds) + " ABBA rounds (head against its own base, same box)";
    o += "| gain | " + gain + " |\n";
  } else {
    o += "| gain | not measured |\n";
  }
  if (s.gate && s.frontier_before) {
    o += "| gate | the gain's lower bound must clear +" + ledger::NumText(100.0 * *s.gate / *s.frontier_before, 3) +
         "% (the gate, " + Num(s.gate) + ", is 2% of the best so far, " + Num(s.frontier_before) + ") |\n";
  }
  o += "| prediction | " + PredictionLine(c, s) + " |\n";
  if (r.parity.empty()) o += "| parity | no evidence recorded |\n";
  for (const auto& p : r.parity) o += "| parity | " + ParityLine(p) + " |\n";
  for (const auto& a : r.artifacts)
    o += std::string("| ") + ledger::SideName(a.side) + " artifact | build " +
         markdown::Code(Short(a.build_id, 40), true) + ", sha256 " +
         markdown::Code(Short(a.artifact_sha256, 16), true) + " |\n";
  o += "| frontier | " + Num(s.frontier_before) + " -> " + Num(s.frontier_after) +
       (s.verdict == Verdict::kAccepted ? " (moved)" : " (unchanged)") + " |\n";
  if (r.retracted())
    o += "| **retracted** | " + markdown::Text(r.retraction->reason) + " (" +
         markdown::Text(r.retraction->retracted_at) + ") |\n";
  if (!s.guards.empty()) {
    o += "\n| guard | better | change | bounds | result |\n| --- | --- | --- | --- | --- |\n";
    for (const auto& g : s.guards) o += GuardRow(g);
  }
  if (!s.note.empty()) o += "\n> " + markdown::Text(s.note) + "\n";
  o += "\n**Next:** " +
       (r.retracted() ? std::string("Nothing: the run was retracted, so its verdict no longer counts.")
                      : Next(s.verdict, c.kind, c.id)) +
       "\n";
  return o;
}

}  // namespace

std::string PrComment(const ledger::ChangeView& v) {
  const ledger::ChangeRow& c = v.change;
  std::string o = "### verity: change " + std::to_string(c.id) + ", " + markdown::Text(c.title) + "\n\n";
  // A ref and, when recorded, the commit it resolved to.
  auto ref = [](const std::optional<std::string>& name, const std::optional<std::string>& sha) {
    std::string t = markdown::Code(name.value_or("?"), false);
    if (sha && !sha->empty()) t += " (" + markdown::Code(Short(*sha), false) + ")";
    return t;
  };
  if (c.base_ref || c.head_ref)
    o += "Head " + ref(c.head_ref, c.head_sha) + " against base " + ref(c.base_ref, c.base_sha) + ".\n\n";
  if (v.runs.empty()) return o + "Not scored yet: no run was recorded.\n";
  const ledger::RunView& r = v.runs.back();
  const ledger::ScoreView* s = r.latest();
  if (s == nullptr) {
    o += "**" + r.StateName() + "**: the run recorded no score";
    if (!r.failure)
      return o + " (it has not finished, or it was interrupted).\n\n**Next:** Resubmit once it is not running.\n";
    o += " (" + markdown::Text(*r.failure) + ")";
    return o + ".\n\n**Next:** " + Next(Verdict::kFailed, c.kind, c.id) + "\n";
  }
  return o + ScoredRun(v, r, *s);
}

}  // namespace verity::reports
