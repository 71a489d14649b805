#include "ledger/evidence.h"

#include "base/terminal.h"

#include "ledger/noise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "ledger/format.h"
#include "ledger/noise.h"
#include "ledger/stats.h"
#include "ledger/units.h"

namespace verity::ledger {
namespace {

std::string Short(const std::string& sha) { return sha.empty() ? "(not stated)" : sha.substr(0, 16); }

// A depth inside the compared context: 1..tokens (1.. when tokens is not stated).
bool InContext(const measure::ParityEvidence& e, int depth) {
  return depth >= 1 && (e.tokens <= 0 || depth <= e.tokens);
}

// Distinct depths inside the context: a repeated entry, or one outside the
// context, is not more evidence.
int DistinctDepths(const measure::ParityEvidence& e) {
  std::set<int> d;
  for (const auto& x : e.depths)
    if (InContext(e, x.depth)) d.insert(x.depth);
  return static_cast<int>(d.size());
}

// Depth entries the floor cannot count, named: outside 1..tokens, repeated,
// scoring more positions than the window asked for; and a missing window.
std::vector<std::string> DepthGaps(const measure::ParityEvidence& e) {
  std::vector<std::string> gaps;
  if (e.window <= 0) gaps.push_back("no window stated, so positions per depth cannot be checked");
  std::set<int> seen;
  for (const auto& d : e.depths) {
    const std::string at = "depth " + std::to_string(d.depth);
    if (!InContext(e, d.depth))
      gaps.push_back(at + " is outside 1.." + (e.tokens > 0 ? std::to_string(e.tokens) : std::string("tokens")));
    else if (!seen.insert(d.depth).second) gaps.push_back(at + " appears twice");
    if (e.window > 0 && d.positions > e.window)
      gaps.push_back(at + " scores " + std::to_string(d.positions) + " positions, more than the window " +
                     std::to_string(e.window));
  }
  return gaps;
}

// The bytes a token-identity record covers: the whole output when identical,
// else only what matched before the first difference.
long long IdentityBytes(const measure::ParityEvidence& e) {
  return e.identity.identical ? e.identity.head_bytes : std::max(0LL, e.identity.first_diff);
}

// What is missing from the evidence floor of the record's kind, "" if nothing.
std::string FloorGaps(const Policy& pol, const measure::ParityEvidence& e) {
  const std::optional<ParityFloor> floor = pol.ParityFloorFor(e.kind);
  if (!floor)
    return "policy v" + std::to_string(pol.version) + " states no floor for parity evidence of kind '" + e.kind + "'";
  if (e.kind == "tokens") {
    if (IdentityBytes(e) >= floor->min_bytes) return "";
    return std::to_string(IdentityBytes(e)) + " bytes compared equal, the policy needs at least " +
           std::to_string(floor->min_bytes);
  }
  std::vector<std::string> gaps = DepthGaps(e);
  const int distinct = DistinctDepths(e);
  if (distinct < floor->min_depths)
    gaps.push_back(std::to_string(distinct) + " depths, the policy needs at least " +
                   std::to_string(floor->min_depths));
  int deepest = 0;
  for (const auto& d : e.depths) deepest = std::max(deepest, d.depth);
  if (e.tokens <= 0) gaps.push_back("no context length (tokens) stated, so the deepest depth cannot be checked");
  else if (deepest != e.tokens)
    gaps.push_back("deepest depth " + std::to_string(deepest) + " is not the last context position " +
                   std::to_string(e.tokens));
  int thin = 0, fewest = 1 << 30;
  for (const auto& d : e.depths)
    if (d.positions < floor->min_positions) thin++, fewest = std::min(fewest, d.positions);
  if (thin)
    gaps.push_back(std::to_string(thin) + " depth(s) score fewer than " + std::to_string(floor->min_positions) +
                   " positions (fewest " + std::to_string(fewest) + ")");
  std::string out;
  for (const auto& g : gaps) out += (out.empty() ? "" : "; ") + g;
  return out;
}

// The first difference of a token-identity record, in words.
std::string DifferenceText(const measure::ParityEvidence& e) {
  const auto& x = e.identity;
  return "the output differs from the " + x.against + "'s at byte offset " + std::to_string(x.first_diff) + " (head '" +
         x.head_snippet + "', " + x.against + " '" + x.base_snippet + "')";
}

// True iff the evidence shows the engine wrong: a differing output, or logits outside the thresholds.
bool ShowsWrong(const Policy& pol, const measure::ParityEvidence& e) {
  if (e.kind == "tokens") return !e.identity.identical;
  return !e.nonfinite.empty() || !pol.ParityPasses(e.worst_top1, e.worst_mean_kl);
}

// Builds a "<side> parity ..." one-line summary of evidence.
std::string Summary(const measure::ParityEvidence& e) {
  if (e.kind == "tokens")
    return "token identity: " + std::to_string(e.identity.head_bytes) + " bytes against the " + e.identity.against +
           "'s " + std::to_string(e.identity.base_bytes) + ", " +
           (e.identity.identical ? std::string("identical")
                                 : "first difference at byte " + std::to_string(e.identity.first_diff)) +
           " (" + (e.mode.empty() ? "mode not stated" : e.mode) + "), exit " + std::to_string(e.exit_code);
  return std::string(e.kind == "logits" ? "logits file: " : "") + "worst top-1 " + NumText(e.worst_top1) +
         ", worst mean KL " + NumText(e.worst_mean_kl) + " over " + std::to_string(e.depths.size()) + " depths (" +
         (e.mode.empty() ? "mode not stated" : e.mode) + ", window " + std::to_string(e.window) + "), exit " +
         std::to_string(e.exit_code);
}

}  // namespace

namespace {

// Token identity: the outputs equal over the kind's floor of bytes (deep: deep_factor x it).
std::string JudgeIdentity(const Policy& pol, const measure::ParityEvidence& e, const std::string& mode,
                          const measure::ParityEvidence* standard) {
  std::vector<std::string> why;
  if (e.exit_code != 0) why.push_back("exit " + std::to_string(e.exit_code));
  if (!e.identity.identical) why.push_back(DifferenceText(e));
  else if (!e.ok) why.push_back("the command reported ok:false");
  if (e.mode != mode) why.push_back("mode '" + e.mode + "' stated, '" + mode + "' required");
  // A difference already fails; how few bytes matched before it is no second reason.
  if (std::string gaps = FloorGaps(pol, e); !gaps.empty() && e.identity.identical)
    why.push_back("thin evidence: " + gaps);
  const auto floor = pol.ParityFloorFor(e.kind);
  if (mode == "deep" && floor && IdentityBytes(e) < pol.deep_factor * floor->min_bytes)
    why.push_back("deep evidence compares " + std::to_string(IdentityBytes(e)) + " bytes, needs " +
                  NumText(pol.deep_factor) + "x the floor of " + std::to_string(floor->min_bytes));
  // Deeper than the run's own standard evidence: 2x its bytes (issue 41, finding 4).
  if (standard && standard->kind == e.kind && IdentityBytes(e) < pol.deep_factor * IdentityBytes(*standard))
    why.push_back("deep evidence compares " + std::to_string(IdentityBytes(e)) + " bytes, needs " +
                  NumText(pol.deep_factor) + "x the " + std::to_string(IdentityBytes(*standard)) +
                  " of the standard run");
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

}  // namespace

std::string JudgeParity(const Policy& pol, const measure::ParityEvidence& e, const std::string& mode,
                        const measure::ParityEvidence* standard) {
  // Deep evidence deepens the run's standard evidence: of another kind, none
  // of its depths, window or bytes can be compared with it (issue 41, finding 4).
  std::string kind_gap;
  if (standard && standard->kind != e.kind)
    kind_gap = "deep evidence of kind '" + e.kind + "' does not deepen the run's standard evidence of kind '" +
               standard->kind + "': confirm needs deep evidence of the same kind";
  if (e.kind == "tokens") {
    const std::string why = JudgeIdentity(pol, e, mode, standard);
    if (kind_gap.empty()) return why;
    return why.empty() ? kind_gap : why + "; " + kind_gap;
  }
  std::vector<std::string> why;
  if (!kind_gap.empty()) why.push_back(kind_gap);
  if (!e.nonfinite.empty()) {
    std::string where;
    for (const auto& n : e.nonfinite) where += (where.empty() ? "" : ", ") + n;
    why.push_back("non-finite values at " + where);
  }
  if (e.exit_code != 0) why.push_back("exit " + std::to_string(e.exit_code));
  if (!e.ok) why.push_back("the command reported ok:false");
  if (!pol.ParityPasses(e.worst_top1, e.worst_mean_kl))
    why.push_back("worst top-1 " + NumText(e.worst_top1) + " / mean KL " + NumText(e.worst_mean_kl) +
                  " outside top-1 >= " + NumText(pol.parity_min_top1) +
                  ", mean KL <= " + NumText(pol.parity_max_mean_kl));
  if (e.mode != mode) why.push_back("mode '" + e.mode + "' stated, '" + mode + "' required");
  if (std::string gaps = FloorGaps(pol, e); !gaps.empty()) why.push_back("thin evidence: " + gaps);
  if (standard && kind_gap.empty()) {
    const double f = pol.deep_factor;
    if (DistinctDepths(e) < f * DistinctDepths(*standard))
      why.push_back("deep evidence has " + std::to_string(DistinctDepths(e)) + " depths, needs " + NumText(f) +
                    "x the " + std::to_string(DistinctDepths(*standard)) + " of the standard run");
    if (standard->window <= 0 || e.window < f * standard->window)
      why.push_back("deep window " + std::to_string(e.window) + " is not " + NumText(f) + "x the standard window " +
                    std::to_string(standard->window));
  }
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

Result<ParityOutcome> RunParityCommand(Db& d, const Policy& pol, int64_t run_id, const std::string& side,
                                       const std::string& cmd, bool deep, int timeout_s,
                                       const measure::ParityEvidence* standard) {
  std::map<std::string, std::string> env;
  if (deep) env["VERITY_PARITY_MODE"] = "deep";
  measure::CommandOutput out = measure::RunCommand(cmd, timeout_s, env);
  auto ev = measure::ParseParity(out, side + " parity command");
  ParityOutcome po;
  if (!ev.ok()) {
    po.message = ev.status().message() + " (no parity evidence: refused, not assumed)";
  } else {
    po.evidence = ev.value();
    const std::string why = JudgeParity(pol, ev.value(), deep ? "deep" : "standard", standard);
    po.passed = why.empty();
    po.message = Summary(ev.value()) + (po.passed ? ": pass" : ": FAIL (" + why + ")");
  }
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    const auto* e = po.evidence ? &*po.evidence : nullptr;
    auto num = [](double v) { return std::isfinite(v) ? Value(v) : Value(); };
    return d
        .InsertSealed("parity_results", {{"run_id", run_id},
                                         {"side", side},
                                         {"mode", std::string(deep ? "deep" : "standard")},
                                         {"exit_code", int64_t{out.exit_code}},
                                         {"passed", int64_t{po.passed}},
                                         {"worst_top1", e ? num(e->worst_top1) : Value()},
                                         {"worst_mean_kl", e ? num(e->worst_mean_kl) : Value()},
                                         {"logits_sha256", e ? Value(e->logits_sha256) : Value()},
                                         {"message", po.message},
                                         {"seconds", out.seconds},
                                         {"raw_json", e ? Value(e->raw) : Value()}})
        .status();
  }));
  return po;
}

Result<std::optional<measure::ParityEvidence>> RecordedParity(Db& d, int64_t run_id, const std::string& side,
                                                              const std::string& mode) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT exit_code, raw_json FROM parity_results WHERE run_id = ? AND "
                                             "side = ? AND mode = ? AND raw_json IS NOT NULL ORDER BY id DESC LIMIT 1",
                                             {run_id, side, mode}));
  if (rows.empty()) return std::optional<measure::ParityEvidence>();
  measure::CommandOutput out;
  out.exit_code = static_cast<int>(AsInt(rows[0][0]));
  out.out = AsText(rows[0][1]);
  VERITY_ASSIGN_OR_RETURN(auto ev, measure::ParseParity(out, "recorded " + side + " parity"));
  return std::optional<measure::ParityEvidence>(ev);
}

namespace {

// The correctness gate while its parity commands run.
struct Gate {
  explicit Gate(const GateInput& input) : in(input), d(*input.d) {}
  const GateInput& in;
  Db& d;
  GateResult g;

  // Decides without speed: the run stops with `v`, `note` saying why.
  GateResult Stop(Verdict v, const std::string& note) {
    g.stop = true;
    g.verdict = v;
    g.note = note;
    return g;
  }
  // Runs and records `side`'s parity command in standard mode.
  Result<ParityOutcome> Run(const std::string& side, const std::string& cmd) {
    in.say((side == "head" ? "correctness gate: " : "parity of the base: ") + cmd);
    return RunParityCommand(d, *in.pol, in.run_id, side, cmd, false, in.timeout_s);
  }
};

// A revert's base parity: the evidence that main is wrong, if it proves it.
Result<std::optional<ParityOutcome>> MainFails(Gate& gate, const ChangeRequest& c) {
  const GateInput& in = gate.in;
  std::optional<ParityOutcome> main_fails;
  VERITY_ASSIGN_OR_RETURN(auto bp, gate.Run("base", c.base_parity_cmd));
  in.say("  main: " + bp.message);
  // Proof that main is wrong is complete evidence (the floor, standard mode)
  // that breaks a threshold or holds a non-finite value; thin or malformed
  // evidence proves nothing either way.
  if (bp.evidence && !bp.passed) {
    const auto& e = *bp.evidence;
    const bool complete = FloorGaps(*in.pol, e).empty() && e.mode == "standard";
    const bool wrong = ShowsWrong(*in.pol, e);
    if (complete && wrong) main_fails = bp;
    else in.say("  main's failing evidence is incomplete or breaks no threshold: not proof that main is wrong");
  }
  return main_fails;
}

// The head's passing evidence binds the gate to the artifact it ran, when it names one.
void BindHead(Gate& gate, const ParityOutcome& hp) {
  GateResult& g = gate.g;
  g.head_artifact = hp.evidence->artifact_sha256;
  g.head_dtype = hp.evidence->dtype;
  if (g.head_artifact.empty()) {
    g.verified = false;
    gate.in.say("  the parity evidence names no build: unverified, cannot move the frontier");
  }
}

// A claim of bit identity: the base's evidence must hash every logit row to the head's hash.
Result<GateResult> ProveBitIdentity(Gate& gate, const ChangeRequest& c, const ParityOutcome& hp) {
  GateResult& g = gate.g;
  if (c.base_parity_cmd.empty())
    return gate.Stop(Verdict::kRejectedParity,
                     "bit identity claimed but no base parity command to compare every logit "
                     "row against; the head's speed was never measured");
  VERITY_ASSIGN_OR_RETURN(auto bp, gate.Run("base", c.base_parity_cmd));
  if (!bp.evidence)
    return gate.Stop(Verdict::kRejectedParity, "bit identity claimed but the base gave no evidence: " + bp.message);
  const std::string& h = hp.evidence->all_rows_sha256;
  const std::string& b = bp.evidence->all_rows_sha256;
  if (h.empty() || b.empty())
    return gate.Stop(Verdict::kRejectedParity,
                     "bit identity claimed but the evidence does not hash every logit row "
                     "(all_rows_sha256 missing on the " +
                         std::string(h.empty() ? "head" : "base") + " side); the head's speed was never measured");
  if (h != b)
    return gate.Stop(Verdict::kRejectedParity, "bit identity claimed but the logit rows differ: head " + Short(h) +
                                                   " vs base " + Short(b) + "; the head's speed was never measured");
  g.base_artifact = bp.evidence->artifact_sha256;
  g.base_dtype = bp.evidence->dtype;
  if (g.base_artifact.empty()) {
    g.verified = false;
    gate.in.say("  the base parity evidence names no build: bit identity unverified");
  }
  gate.in.say("  bit identity proved: every logit row hashes to " + Short(h) + " on both sides");
  return g;
}

}  // namespace

Result<GateResult> RunGate(const GateInput& in, const ChangeRequest& c, Kind kind) {
  Gate gate(in);
  std::optional<ParityOutcome> main_fails;
  if (kind == Kind::kRevert && !c.base_parity_cmd.empty()) {
    VERITY_ASSIGN_OR_RETURN(main_fails, MainFails(gate, c));
  }
  if (c.parity_cmd.empty()) {
    if (kind == Kind::kRevert)
      return gate.Stop(Verdict::kRejectedParity,
                       "a revert's head (main without the change) must pass the parity gate; "
                       "no parity command was given");
    gate.g.verified = false;
    in.say("no parity command: the result is unverified and cannot move the frontier");
    return gate.g;
  }
  VERITY_ASSIGN_OR_RETURN(auto hp, gate.Run("head", c.parity_cmd));
  in.say("  " + hp.message);
  if (!hp.passed)
    return gate.Stop(Verdict::kRejectedParity,
                     "parity gate failed: " + hp.message + "; the head's speed was never measured");
  BindHead(gate, hp);
  if (main_fails && !gate.g.verified)
    return gate.Stop(Verdict::kRefused,
                     "main fails parity, but the evidence that main without the change passes names "
                     "no artifact: refused, nothing measured");
  if (main_fails)
    return gate.Stop(Verdict::kAccepted, "parity evidence that main is wrong: " + main_fails->message +
                                             "; main without the change passes: " + hp.message);
  if (!c.claim_bit_identical) return gate.g;
  return ProveBitIdentity(gate, c, hp);
}

namespace {

struct Taken {
  std::string side;
  int ord = 0;
  double value = 0, seconds = 0;
  std::map<std::string, double> metrics;
  std::string at;
};

// Why `side`'s parity evidence of `evidence` does not cover a bench of
// `bench` (with `declared` the submitter's --reference-dtype), or nullopt.
std::optional<std::string> DtypeGap(const std::string& side, const std::string& evidence, const std::string& bench,
                                    const std::string& declared) {
  if (evidence == bench || (!declared.empty() && evidence == declared)) return std::nullopt;
  const std::string stated = evidence.empty() ? "states no dtype" : "is for dtype '" + evidence + "'";
  return "the " + side + " parity evidence " + stated + " but the " + side + " bench measured dtype '" + bench + "'" +
         (declared.empty() ? std::string(" (submit --reference-dtype declares an intended mismatch)")
                           : " and --reference-dtype declared '" + declared + "'") +
         ": the evidence does not cover what was benchmarked";
}

// An error when the box is no longer the one the run started on: samples
// after a change would be recorded under the first box's fingerprint.
Status CheckBox(const RoundsInput& in, const std::string& side, int round) {
  if (!in.read_box) return OkStatus();
  const measure::Box now = in.read_box();
  if (now.fingerprint == in.box.fingerprint) return OkStatus();
  return Status::Error("the box changed during the run: fingerprint " + in.box.fingerprint + " when it started, " +
                       now.fingerprint + " after the " + side + " sample of round " + std::to_string(round) + " (now " +
                       now.detail + ", was " + in.box.detail + "); its timings are not comparable");
}

// Builds the series of `metric` from full rounds (each b, h, h, b).
MetricSeries SeriesOf(const std::string& metric, const std::vector<std::vector<Taken>>& rounds) {
  MetricSeries s;
  s.metric = metric;
  s.higher_is_better = HigherIsBetter(metric);
  for (const auto& t : rounds)
    s.rounds.push_back(
        {t[0].metrics.at(metric), t[1].metrics.at(metric), t[2].metrics.at(metric), t[3].metrics.at(metric)});
  return s;
}

// A run's rounds while they are taken: what its samples have established.
struct Measuring {
  Measuring(const RoundsInput& input, const ChangeRequest& change, const GateResult& g)
      : in(input), c(change), gate(g), d(*input.d) {}
  const RoundsInput& in;
  const ChangeRequest& c;
  const GateResult& gate;
  Db& d;
  Measured m;
  std::map<std::string, std::pair<std::string, std::string>> seen;  // side -> (build, sha)
  bool workload_seen = false;
  int round_now = 0;
  std::vector<std::vector<Taken>> rounds;  // the full rounds (each b, h, h, b)
};

// An error when a sample cannot stand in its run: a guard its workload
// requires is missing, the build is stale, or its workload does not print as itself.
Status CheckSample(const ChangeRequest& c, const std::string& side, const measure::BenchSample& s) {
  for (const std::string& g : c.required_guards)
    if (!s.metrics.count(g))
      return Status::Error(side + " bench command's record has no '" + g +
                           "', a guard its workload requires (the project config's guards)");
  const std::string& want_build = side == "base" ? c.base_sha : c.head_sha;
  if (!want_build.empty() && s.build_id != want_build)
    return Status::Error(side + " binary reports build " + s.build_id + " but was built from " + want_build +
                         " (stale build: verify the artifact, not the transport)");
  // A key prints as itself: a workload with a control or format character
  // (U+2060 and its kind print as nothing) would name a frontier that reads
  // exactly like its twin's (issue 41, finding 9).
  if (const std::string bad = terminal::FirstInvisible(s.workload); !bad.empty())
    return Status::Error("the " + side + " bench measured workload '" + terminal::Visible(s.workload) +
                         "', which holds " + bad +
                         ", a character that does not print as itself: a workload "
                         "key must, so that no two frontiers read alike");
  return OkStatus();
}

// Both sides must measure one workload: a speed ratio across two models
// (or thread counts, dtypes, lengths) says nothing about the change. The
// run's first sample names it (recorded in run_workloads).
Status CheckWorkload(Measuring& r, const std::string& side, const measure::BenchSample& s) {
  Measured& m = r.m;
  if (!r.workload_seen) {
    r.workload_seen = true;
    m.workload = s.workload;
    VERITY_RETURN_IF_ERROR(r.d.Transaction([&]() -> Status {
      return r.d.InsertSealed("run_workloads", {{"run_id", r.in.run_id}, {"workload", s.workload}}).status();
    }));
  } else if (s.workload != m.workload) {
    return Status::Error("the " + side + " bench measured workload '" + s.workload +
                         "' but the run's first sample measured '" + m.workload +
                         "': base and head must bench the same model, dtype, threads and lengths");
  }
  return OkStatus();
}

// Whether the gate's parity evidence covers what `side`'s first sample ran:
// a raw report binds to nothing (said, and the run unbound); another
// artifact, or a dtype not declared, sets m.mismatch and returns false.
bool CoveredByEvidence(Measuring& r, const std::string& side, const measure::BenchSample& s) {
  Measured& m = r.m;
  const std::string& bound = side == "base" ? r.gate.base_artifact : r.gate.head_artifact;
  if (!s.raw_format.empty()) {
    // Its identity is a hash of an executable or a command line, not of
    // what any parity evidence ran: it never binds, however they compare.
    if (!m.unbound)
      m.unbound_note = "the " + side + " bench printed a raw " + s.raw_format + " report, which names no build (" +
                       s.build_id + " " + Short(s.artifact_sha256) + "): no parity evidence binds to it";
    m.unbound = true;
    r.in.say("  " + m.unbound_note);
  } else if (!bound.empty() && bound != s.artifact_sha256) {
    m.mismatch = true;
    m.mismatch_note = "the " + side + " parity evidence came from artifact " + Short(bound) + " but the " + side +
                      " bench ran " + Short(s.artifact_sha256) + " (build " + s.build_id +
                      "): the evidence does not cover what was benchmarked";
    return false;
  }
  const auto& evidence_dtype = side == "base" ? r.gate.base_dtype : r.gate.head_dtype;
  if (evidence_dtype && !s.dtype.empty()) {
    if (auto gap = DtypeGap(side, *evidence_dtype, s.dtype, r.c.reference_dtype)) {
      m.mismatch = true;
      m.mismatch_note = *gap;
      return false;
    }
    if (*evidence_dtype != s.dtype) {
      m.dtype_note = "the " + side + " parity evidence is for dtype '" + *evidence_dtype + "', the bench measured '" +
                     s.dtype + "': declared with --reference-dtype";
      r.in.say("  " + m.dtype_note);
    }
  }
  return true;
}

// `side`'s first sample names the artifact it ran: recorded, then checked
// against the gate's evidence. False when the evidence does not cover it.
Result<bool> FirstArtifact(Measuring& r, const std::string& side, const measure::BenchSample& s) {
  Measured& m = r.m;
  r.seen[side] = {s.build_id, s.artifact_sha256};
  (side == "base" ? m.base_artifact : m.head_artifact) = s.artifact_sha256;
  (side == "base" ? m.base_build : m.head_build) = s.build_id;
  VERITY_RETURN_IF_ERROR(r.d.Transaction([&]() -> Status {
    return r.d
        .InsertSealed(
            "artifacts",
            {{"run_id", r.in.run_id}, {"side", side}, {"build_id", s.build_id}, {"artifact_sha256", s.artifact_sha256}})
        .status();
  }));
  return CoveredByEvidence(r, side, s);
}

// Runs one bench command; returns nullopt after setting m.mismatch.
Result<std::optional<Taken>> Take(Measuring& r, const std::string& side) {
  const ChangeRequest& c = r.c;
  Measured& m = r.m;
  const std::string& cmd = side == "base" ? c.base_cmd : c.head_cmd;
  measure::CommandOutput out = measure::RunCommand(cmd, r.in.timeout_s);
  VERITY_RETURN_IF_ERROR(CheckBox(r.in, side, r.round_now));
  VERITY_ASSIGN_OR_RETURN(auto s, measure::ParseBench(out, c.metric, side + " bench command", cmd));
  VERITY_RETURN_IF_ERROR(CheckSample(c, side, s));
  VERITY_RETURN_IF_ERROR(CheckWorkload(r, side, s));
  auto it = r.seen.find(side);
  if (it == r.seen.end()) {
    VERITY_ASSIGN_OR_RETURN(const bool covered, FirstArtifact(r, side, s));
    if (!covered) return std::optional<Taken>();
  } else if (it->second.second != s.artifact_sha256 || it->second.first != s.build_id) {
    return Status::Error(side + " artifact changed between rounds: " + Short(it->second.second) + " (" +
                         it->second.first + ") then " + Short(s.artifact_sha256) + " (" + s.build_id + ")");
  }
  if (side == "head" && s.bytes_per_token)
    m.head_bytes_per_token = std::max(m.head_bytes_per_token.value_or(0.0), *s.bytes_per_token);
  if (side == "head" && s.backend == "cuda") m.head_on_device = true;
  Taken t;
  t.side = side;
  t.value = s.value;
  t.seconds = out.seconds;
  t.metrics = s.metrics;
  return std::optional<Taken>(t);
}

// Records one round's samples, each with every metric it reported, in one transaction.
Status RecordRound(Measuring& r, int round, const std::vector<Taken>& ts) {
  Db& d = r.d;
  return d.Transaction([&]() -> Status {
    for (const auto& t : ts) {
      VERITY_ASSIGN_OR_RETURN(int64_t sid, d.InsertSealed("samples", {{"run_id", r.in.run_id},
                                                                      {"round", int64_t{round}},
                                                                      {"side", t.side},
                                                                      {"ord", int64_t{t.ord}},
                                                                      {"value", t.value},
                                                                      {"seconds", t.seconds},
                                                                      {"taken_at", t.at},
                                                                      {"box_id", r.in.box_id}}));
      for (const auto& [name, v] : t.metrics)
        VERITY_RETURN_IF_ERROR(
            d.InsertSealed("metric_samples", {{"sample_id", sid}, {"metric", name}, {"value", v}}).status());
    }
    return OkStatus();
  });
}

// Runs and records one round; an empty result means a mismatch stopped it.
Result<std::vector<Taken>> TakeRound(Measuring& r, int n, const std::vector<std::string>& order) {
  r.round_now = n;
  std::vector<Taken> ts;
  for (size_t i = 0; i < order.size(); i++) {
    const std::string at = NowUtc();
    VERITY_ASSIGN_OR_RETURN(auto t, Take(r, order[i]));
    if (!t) return std::vector<Taken>();
    t->ord = static_cast<int>(i);
    t->at = at;
    ts.push_back(*t);
  }
  VERITY_RETURN_IF_ERROR(RecordRound(r, n, ts));
  return ts;
}

// Once the warm-up named both artifacts: what the run is, and the attempt of
// that pair its looks are taken at (m.attempt).
Status IdentifyAttempt(Measuring& r, const SequentialPlan& plan, int attempt) {
  Measured& m = r.m;
  m.attempt = attempt;
  m.identity = IdentityOf({m.base_build, m.base_artifact, r.c.base_cmd}, {m.head_build, m.head_artifact, r.c.head_cmd});
  if (r.in.attempt_of) {
    VERITY_ASSIGN_OR_RETURN(m.attempt, r.in.attempt_of(m.identity));
    attempt = m.attempt;
    if (attempt > 0)
      r.in.say("  attempt " + std::to_string(attempt) + " of this change: each look at alpha " +
               NumText(LookAlpha(plan, attempt), 3));
  }
  return OkStatus();
}

// The workload is known now: the box's noise profile for it, if calibrated,
// sets how many rounds the gate needs -- before any timed round is seen.
// Sets m.too_noisy when no plan within max_rounds resolves the gate.
Status ApplyNoiseProfile(Measuring& r, const SequentialPlan& plan, double gate_frac) {
  Measured& m = r.m;
  m.plan = plan;
  VERITY_ASSIGN_OR_RETURN(auto noise, LatestNoise(r.d, r.in.box_id, r.c.metric, m.workload));
  if (noise) {
    const int needed = RoundsToResolve(noise->sigma, gate_frac, LookAlpha(plan, m.attempt));
    m.noise_note = "box noise profile " + std::to_string(noise->id) + " (" + noise->recorded_at +
                   "): " + NoiseText(*noise) + "; about " + std::to_string(needed) + " rounds resolve the gate";
    r.in.say(m.noise_note);
    if (needed > plan.max_rounds) {
      m.too_noisy = true;
      m.noise_note = "this box is too noisy to resolve the " + PctText(gate_frac) + " gate within " +
                     std::to_string(plan.max_rounds) + " rounds: " + m.noise_note +
                     " (quiet the box, or allow more with --max-rounds " + std::to_string(needed) + ")";
      return OkStatus();
    }
    m.plan.min_rounds = std::max(plan.min_rounds, needed);
  }
  return OkStatus();
}

// A timed round's line: the base and head means and the ratio, and at a
// look the median's bounds and the decision.
std::string RoundLine(const Measured& m, int n, const std::vector<Taken>& ts, const std::vector<double>& ratios,
                      Decision dec) {
  char line[200];
  std::snprintf(line, sizeof line, "  round %2d/%d  base %.4g  head %.4g  ratio %.4f", n, m.plan.max_rounds,
                0.5 * (ts[0].value + ts[3].value), 0.5 * (ts[1].value + ts[2].value), ratios.back());
  std::string text = line;
  if (IsLook(m.plan, n)) {
    const Bounds b = MedianBounds(ratios, LookAlpha(m.plan, m.attempt));
    auto pct = [](double r) {
      char p[32];
      std::snprintf(p, sizeof p, "%+.2f%%", 100 * (r - 1));
      return std::isfinite(r) ? std::string(p) : std::string("none");
    };
    std::snprintf(line, sizeof line, "  look: median %s bounds [%s, %s] -> %s", pct(b.estimate).c_str(),
                  pct(b.low).c_str(), pct(b.high).c_str(), DecisionName(dec));
    text += line;
  }
  return text;
}

// ABBA rounds until the sequential rule decides or max_rounds are taken.
// False when a mismatch stopped them.
Result<bool> TimedRounds(Measuring& r, double gate_frac) {
  Measured& m = r.m;
  m.primary.metric = r.c.metric;
  m.primary.higher_is_better = HigherIsBetter(r.c.metric);
  for (int n = 1; n <= m.plan.max_rounds; n++) {
    VERITY_ASSIGN_OR_RETURN(auto ts, TakeRound(r, n, {"base", "head", "head", "base"}));
    if (ts.empty()) return false;
    r.rounds.push_back(ts);
    m.primary.rounds.push_back({ts[0].value, ts[1].value, ts[2].value, ts[3].value});
    const std::vector<double> ratios = RoundRatios(m.primary);
    const Decision dec = Decide(m.plan, ratios, gate_frac, m.attempt);
    r.in.say(RoundLine(m, n, ts, ratios, dec));
    if (dec != Decision::kContinue) break;
  }
  return true;
}

// Guards: every other metric any sample reported. A guard cannot be dodged
// by leaving it out of some samples, nor by a name whose direction is unknown.
Status AddGuards(Measured& m, const std::string& metric, const std::vector<std::vector<Taken>>& rounds) {
  std::set<std::string> names;
  for (const auto& ts : rounds)
    for (const auto& t : ts)
      for (const auto& [name, v] : t.metrics) names.insert(name);
  for (const auto& name : names) {
    if (name == metric) continue;
    for (size_t r = 0; r < rounds.size(); r++)
      for (const auto& t : rounds[r])
        if (!t.metrics.count(name))
          return Status::Error("guard metric '" + name + "' is missing from a " + t.side + " sample of round " +
                               std::to_string(r + 1) + ": every reported metric must be in every sample");
    if (auto unit = UnitOf(name); !unit.ok()) return Status::Error("guard " + unit.status().message());
    m.guards.push_back(SeriesOf(name, rounds));
  }
  return OkStatus();
}

}  // namespace

Result<Measured> TakeRounds(const RoundsInput& in, const ChangeRequest& c, const GateResult& gate,
                            const SequentialPlan& plan, double gate_frac, int attempt) {
  Measuring r(in, c, gate);
  in.say("measuring on box " + in.box.fingerprint.substr(0, 16) + ": warm-up, then " + std::to_string(plan.min_rounds) +
         ".." + std::to_string(plan.max_rounds) + " ABBA rounds, looks every " + std::to_string(plan.look_every));
  VERITY_ASSIGN_OR_RETURN(auto warm, TakeRound(r, 0, {"base", "head"}));
  if (warm.empty()) return r.m;
  VERITY_RETURN_IF_ERROR(IdentifyAttempt(r, plan, attempt));
  VERITY_RETURN_IF_ERROR(ApplyNoiseProfile(r, plan, gate_frac));
  if (r.m.too_noisy) return r.m;
  VERITY_ASSIGN_OR_RETURN(const bool complete, TimedRounds(r, gate_frac));
  if (!complete) return r.m;
  VERITY_RETURN_IF_ERROR(AddGuards(r.m, c.metric, r.rounds));
  return r.m;
}

}  // namespace verity::ledger
