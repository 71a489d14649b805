// The submission sequence: record the change, gate it on parity evidence
// bound to the artifact, take ABBA rounds under the box lock until the
// sequential rule decides, score (score.h, a pure function), record. Every
// step is committed before the next begins, so a killed submission leaves its
// partial attempt visible (a run without a score).
#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>

#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/evidence.h"
#include "ledger/record.h"
#include "ledger/frontier.h"
#include "ledger/ledger.h"
#include "ledger/score.h"
#include "ledger/stats.h"
#include "ledger/units.h"
#include "measure/box_lock.h"
#include "measure/roofline.h"
#include "measure/measure.h"

namespace verity::ledger {
namespace {

Value Opt(const std::optional<double>& v) { return v && std::isfinite(*v) ? Value(*v) : Value(); }
Value OptText(const std::string& s) { return s.empty() ? Value() : Value(s); }

// The schema that added change_reference_dtypes and run_box_locks (0013).
constexpr int kInputsSchema = 13;

// Records which box lock the run's measurement holds, and who holds it.
Status RecordLock(Db& d, int64_t run_id, const measure::BoxLock& lock) {
  return d.Transaction([&]() -> Status {
    return d
        .InsertSealed("run_box_locks", {{"run_id", run_id},
                                        {"path", lock.path()},
                                        {"holder_pid", int64_t{lock.holder_pid()}},
                                        {"holder_host", lock.holder_host()},
                                        {"acquired_at", NowUtc()}})
        .status();
  });
}

// A score that would bank, turned into a refusal that says why (nothing moves or seeds).
void RefuseStep(ScoreResult& r, const std::string& why) {
  r.verdict = Verdict::kRefused;
  r.tier = Tier::kNone;
  r.moves_frontier = false;
  r.frontier_after = r.frontier_before;
  r.note = why + "; measured " + r.note;
}

// Frontier continuity (policy v6, issue 41): a step from a base the frontier
// has never stood at (main moved on by unsubmitted commits) counts only if the
// run's own base samples are consistent with the frontier's value: it lies
// within [lowest base sample x (1 - gate), highest x (1 + gate)]. Otherwise
// the gain would be counted from somewhere the frontier is not (a base slower
// than the frontier makes the frontier pass every head ever measured). Why,
// in words, or "" when it is consistent.
std::string ContinuityGap(const MetricSeries& primary, double frontier, double gate_frac) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Round& r : primary.rounds)
    for (double b : {r.b1, r.b2}) lo = std::min(lo, b), hi = std::max(hi, b);
  if (!(lo <= hi)) return "";
  if (frontier >= lo * (1 - gate_frac) && frontier <= hi * (1 + gate_frac)) return "";
  return "its base, a place this frontier has never stood at, measured " + NumText(lo) + " .. " + NumText(hi) +
         ", and the frontier stands at " + NumText(frontier) + ", outside those samples widened by the gate " +
         PctText(gate_frac) + ": a gain from there is not a step from where the frontier stands";
}

// Why the step `id` counts already on the frontier of another box of this
// machine (a box of another VERITY_BOX_LABEL, same metric and workload), if it does.
Result<std::optional<std::string>> CountsOnTheSameMachine(Db& d, const measure::Box& box, int64_t box_id,
                                                          const FrontierKey& key, const ChangeIdentity& id) {
  VERITY_ASSIGN_OR_RETURN(auto boxes, d.Query("SELECT id, fingerprint, detail FROM boxes WHERE id != ?", {box_id}));
  for (const auto& b : boxes) {
    if (measure::MachineFingerprint(AsText(b[2])) != box.Machine()) continue;
    VERITY_ASSIGN_OR_RETURN(Ladder other, LoadLadder(d, FrontierKey{key.metric, AsInt(b[0]), key.workload}));
    for (const std::string& k : CountingKeys(id.head))
      if (auto it = other.counted_heads.find(k); it != other.counted_heads.end())
        return std::optional<std::string>("head " + KeyText(k) + " already counts on box " + AsText(b[1]) +
                                          ", the same machine under another label (run " + std::to_string(it->second) +
                                          "): a label names a box, it does not make a "
                                          "second machine");
  }
  return std::optional<std::string>();
}

// One measured attempt (a run), as Measure's steps share it: what it is
// measured with, where its numbers go, and the outcome so far.
struct MeasureRun {
  Db& d;
  const Policy& pol;
  const SequentialPlan& plan;
  const ChangeRequest& c;
  const MeasureOptions& opt;
  const measure::Box& box;
  Kind kind;
  int64_t change_id, box_id, run_id;
  std::optional<int64_t> queue_id;
  int attempt;
  bool v4;  // policy v4 and later
  Say say;
  // The Ledger's own steps: queue the parked changes behind a frontier event,
  // and a reapply's --retract (empty: none asked).
  std::function<Status(int64_t, const FrontierKey&)> queue_parked = nullptr;
  std::function<Status()> retract = nullptr;
  Outcome o = {};
};

// Records the run as failed with `msg`: it ends without a score.
Result<Outcome> Fail(MeasureRun& m, const std::string& msg) {
  VERITY_RETURN_IF_ERROR(m.d.Transaction([&]() -> Status {
    return m.d.InsertSealed("run_failures", {{"run_id", m.run_id}, {"message", msg}, {"failed_at", NowUtc()}}).status();
  }));
  m.o.verdict = Verdict::kFailed;
  m.o.note = msg;
  m.say("run " + std::to_string(m.run_id) + " failed: " + msg);
  return m.o;
}

// Scores the run `v` without a speed measurement; `also` runs in the same transaction.
Result<Outcome> ScoreWithoutSpeed(MeasureRun& m, Verdict v, const std::string& note,
                                  std::function<Status()> also = nullptr) {
  m.o.verdict = v;
  m.o.note = note;
  VERITY_RETURN_IF_ERROR(m.d.Transaction([&]() -> Status {
    if (also) VERITY_RETURN_IF_ERROR(also());
    return InsertScore(m.d, m.run_id, m.pol.version, m.o, m.c.metric, std::nullopt);
  }));
  m.say(std::string("scored: ") + VerdictName(m.o.verdict) + ": " + m.o.note);
  return m.o;
}

// A revert accepted on parity evidence that main is wrong: the change's factor leaves the ladder.
Status RevertOnEvidence(MeasureRun& m) {
  const ChangeRequest& c = m.c;
  Outcome& o = m.o;
  // It measured nothing: it acts on the ladder that counts the change.
  // Re-checked here: a concurrent revert may have taken the change out already.
  auto refuse = [&] {
    o.verdict = Verdict::kRefused;
    o.note = "revert: change " + std::to_string(*c.target_change) +
             " no longer counts in this box's frontier (reverted or retracted while this revert ran); "
             "nothing undone; the evidence was: " +
             o.note;
    return OkStatus();
  };
  VERITY_ASSIGN_OR_RETURN(auto workload, FrontierWorkloadOfChange(m.d, *c.target_change, c.metric, m.box_id));
  if (!workload) return refuse();
  const FrontierKey key{c.metric, m.box_id, *workload};
  VERITY_ASSIGN_OR_RETURN(auto undone, FrontierRunOf(m.d, *c.target_change, key, true));
  if (!undone) return refuse();
  VERITY_ASSIGN_OR_RETURN(Ladder before, LoadLadder(m.d, key));
  VERITY_ASSIGN_OR_RETURN(
      int64_t ev, InsertFrontierEvent(m.d, key, m.run_id, "revert", before.value.value_or(0), std::nullopt, undone));
  VERITY_ASSIGN_OR_RETURN(Ladder after, LoadLadder(m.d, key));
  o.frontier_before = before.value;
  o.frontier_after = after.value;
  return m.queue_parked(ev, key);
}

// The measured read bandwidth of `fingerprint` (a box, or a box's GPU 0),
// if `verity roofline` cached it: the physical ceiling.
Result<std::optional<double>> ReadCeiling(const std::string& cache_dir, const std::string& fingerprint) {
  std::optional<double> best;
  if (cache_dir.empty()) return best;
  VERITY_ASSIGN_OR_RETURN(auto roof, measure::CachedRoofline(cache_dir, fingerprint));
  if (roof)
    for (const auto& p : roof->read) best = std::max(best.value_or(0.0), p.best * 1e9);
  return best;
}

// What TakeRounds measures with: under v4 a resubmission of a pair continues that pair's attempts.
RoundsInput RoundsInputOf(MeasureRun& m) {
  RoundsInput ri{&m.d, m.run_id, m.box_id, m.opt.timeout_s, m.say, m.box, m.opt.read_box, nullptr};
  if (!ri.read_box) ri.read_box = measure::ThisBox;
  if (m.v4)
    ri.attempt_of = [&m](const ChangeIdentity& id) {
      return SpentAttempts(m.d, m.run_id, m.change_id, m.c.kind, m.c.metric, id);
    };
  return ri;
}

// Another process may have scored this change (or answered this queue
// item) while we measured: the error budget we spent was for `attempt`.
// True when it did, the run's failure (`superseded`) recorded.
Result<bool> RecordIfSuperseded(MeasureRun& m, const ChangeIdentity& identity, std::string& superseded) {
  int attempt_now = 0;
  if (m.v4) {
    VERITY_ASSIGN_OR_RETURN(attempt_now, SpentAttempts(m.d, m.run_id, m.change_id, m.c.kind, m.c.metric, identity));
  } else {
    VERITY_ASSIGN_OR_RETURN(attempt_now, PriorAttempts(m.d, m.change_id));
  }
  VERITY_ASSIGN_OR_RETURN(auto answered, m.d.Query("SELECT r.id FROM runs r JOIN scores s ON s.run_id = r.id WHERE "
                                                   "r.queue_id = ? AND r.id != ? LIMIT 1",
                                                   {m.queue_id ? Value(*m.queue_id) : Value(), m.run_id}));
  if (attempt_now != m.attempt || !answered.empty()) {
    superseded = "superseded: another run scored change " + std::to_string(m.change_id) +
                 " (or the same artifact pair) while this one measured; its samples are kept, its score is not";
    VERITY_RETURN_IF_ERROR(
        m.d.InsertSealed("run_failures", {{"run_id", m.run_id}, {"message", superseded}, {"failed_at", NowUtc()}})
            .status());
    return true;
  }
  return false;
}

// A revert counts only where its change counts now, on the workload its
// own benches measured: a concurrent revert may have taken it out already.
// Why it does not, if it does not.
Result<std::optional<std::string>> RevertRefusal(MeasureRun& m, const FrontierKey& key) {
  std::optional<std::string> revert_refusal;
  if (m.kind == Kind::kRevert) {
    VERITY_ASSIGN_OR_RETURN(auto live, FrontierRunOf(m.d, *m.c.target_change, key, true));
    if (!live)
      revert_refusal = "revert: change " + std::to_string(*m.c.target_change) + " does not count on workload '" +
                       key.workload +
                       "' (what this revert's benches measured) now: never accepted there, retracted, "
                       "or already reverted; nothing banked";
  }
  return revert_refusal;
}

// What the score is computed from; `prediction_note` says when the prediction
// scored against is another change's.
Result<ScoreInput> ScoreInputOf(MeasureRun& m, const GateResult& gate, const Measured& measured, const Ladder& ladder,
                                std::optional<double> head_ceiling, std::string& prediction_note) {
  const ChangeRequest& c = m.c;
  ScoreInput in;
  in.kind = m.kind;
  in.primary = measured.primary;
  in.guards = measured.guards;
  in.declared_regressions = c.accept_regressions;
  in.frontier = ladder.value;
  if (c.predict_pct) in.predict_frac = *c.predict_pct / 100.0;
  if (m.v4 && m.kind == Kind::kChange) {
    // A resubmission is scored against the prediction made before the pair was first measured.
    VERITY_ASSIGN_OR_RETURN(auto first, FirstPredictionOfPair(m.d, m.change_id, c.metric, measured.identity));
    if (first && (!c.predict_pct || first->predict_pct != *c.predict_pct)) {
      in.predict_frac = first->predict_pct / 100.0;
      prediction_note = "scored against change " + std::to_string(first->change_id) + "'s prediction " +
                        PctText(first->predict_pct / 100.0) + ", made before this artifact pair was first measured";
    }
  }
  in.attempt = m.attempt;
  in.verified = gate.verified && !measured.unbound;
  in.plan = measured.plan;
  in.read_bytes_per_s = head_ceiling;
  if (measured.head_on_device) in.ceiling_of = "GPU 0's";
  in.head_bytes_per_token = measured.head_bytes_per_token;
  return in;
}

// Refuses a score that would bank what is no new step from where the frontier
// stands: a step it counts already (v4), one another label of this machine
// counts (v6), or one from a base it has never stood at (v6).
Status RefuseCountedSteps(MeasureRun& m, const FrontierKey& key, const Ladder& ladder, const Measured& measured,
                          ScoreResult& r) {
  const Policy& pol = m.pol;
  const Kind kind = m.kind;
  const bool would_bank = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise;
  if (m.v4 && kind != Kind::kRevert && would_bank)
    if (auto no = ladder.StepRefusal(CountingKeys(measured.identity.base), CountingKeys(measured.identity.head)))
      RefuseStep(r, "not a new frontier step: " + *no + "; recorded, nothing banked");
  // One machine, many labels: a step that counts on another label's frontier
  // of this machine (same metric and workload) counts already (finding 6).
  if (pol.version >= 6 && kind != Kind::kRevert &&
      (r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise)) {
    VERITY_ASSIGN_OR_RETURN(auto twin, CountsOnTheSameMachine(m.d, m.box, m.box_id, key, measured.identity));
    if (twin) RefuseStep(r, "not a new frontier step: " + *twin + "; recorded, nothing banked");
  }
  const bool still_banks = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise;
  if (pol.version >= 6 && kind == Kind::kChange && still_banks && ladder.value && !ladder.stands_keys.empty() &&
      !SharesKey(CountingKeys(measured.identity.base), ladder.stands_keys))
    if (const std::string gap = ContinuityGap(measured.primary, *ladder.value, pol.gate_frac); !gap.empty())
      RefuseStep(r, "not a frontier step: " + gap + "; recorded, nothing banked");
  return OkStatus();
}

// An empty frontier is seeded from the run's base.
Status SeedFrontier(MeasureRun& m, const FrontierKey& key, const ScoreResult& r) {
  VERITY_RETURN_IF_ERROR(
      InsertFrontierEvent(m.d, key, m.run_id, "seed", r.base_median, std::nullopt, std::nullopt).status());
  m.say("empty frontier for " + m.c.metric + " on this box" +
        (key.workload.empty() ? std::string() : " and workload '" + key.workload + "'") + ": seeded from the base, " +
        NumText(r.base_median));
  return OkStatus();
}

// Banks the step the score moves the frontier by.
Status MoveFrontier(MeasureRun& m, const FrontierKey& key, const ScoreResult& r) {
  const Kind kind = m.kind;
  Outcome& o = m.o;
  // A reapply names the revert run it replaces; the ladder counts it only
  // while that revert counts (see DeriveLadder).
  // A speed revert names the change run it takes out of the live runs.
  std::optional<int64_t> undoes;
  if (kind == Kind::kReapply) {
    VERITY_ASSIGN_OR_RETURN(undoes, FrontierRunOf(m.d, *m.c.target_change, key, false));
  } else if (kind == Kind::kRevert) {
    VERITY_ASSIGN_OR_RETURN(undoes, FrontierRunOf(m.d, *m.c.target_change, key, true));
  }
  VERITY_ASSIGN_OR_RETURN(int64_t ev,
                          InsertFrontierEvent(m.d, key, m.run_id, kind == Kind::kRevert ? "revert" : "accepted",
                                              r.frontier_after, r.factor, undoes));
  // --retract applies only now that the reapply is accepted (a held one: on confirm).
  if (m.retract) VERITY_RETURN_IF_ERROR(m.retract());
  VERITY_ASSIGN_OR_RETURN(Ladder after, LoadLadder(m.d, key));
  if (after.last_event != ev)
    o.note +=
        "; recorded but not counted: the revert it undoes no longer counts, so the change's own gain is "
        "already in the frontier";
  o.frontier_after = after.value;
  return m.queue_parked(ev, key);
}

// The score, against the frontier as derived now (the body of one transaction).
Status RecordScore(MeasureRun& m, const GateResult& gate, const Measured& measured, std::optional<double> head_ceiling,
                   std::string& superseded) {
  VERITY_ASSIGN_OR_RETURN(const bool lost, RecordIfSuperseded(m, measured.identity, superseded));
  if (lost) return OkStatus();
  const FrontierKey key{m.c.metric, m.box_id, measured.workload};
  VERITY_ASSIGN_OR_RETURN(Ladder ladder, LoadLadder(m.d, key));
  VERITY_ASSIGN_OR_RETURN(const std::optional<std::string> revert_refusal, RevertRefusal(m, key));
  std::string prediction_note;
  VERITY_ASSIGN_OR_RETURN(const ScoreInput in, ScoreInputOf(m, gate, measured, ladder, head_ceiling, prediction_note));
  ScoreResult r = Score(m.pol, in);
  if (revert_refusal) RefuseStep(r, *revert_refusal);
  VERITY_RETURN_IF_ERROR(RefuseCountedSteps(m, key, ladder, measured, r));
  Outcome& o = m.o;
  FillFromScore(r, &o);
  if (!prediction_note.empty()) o.note += "; " + prediction_note;
  if (!measured.noise_note.empty()) o.note += "; " + measured.noise_note;
  if (measured.unbound) o.note += "; " + measured.unbound_note;
  if (!measured.dtype_note.empty()) o.note += "; " + measured.dtype_note;
  // Only a sound measurement of main seeds: not one the gate or the rules refused.
  const bool sound = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kNone || r.verdict == Verdict::kRefused ||
                     r.verdict == Verdict::kHeldSurprise;
  if (r.seeds_frontier && sound && in.verified && !revert_refusal) VERITY_RETURN_IF_ERROR(SeedFrontier(m, key, r));
  if (r.moves_frontier) VERITY_RETURN_IF_ERROR(MoveFrontier(m, key, r));
  const std::optional<ScoreResult> scored = r;
  return InsertScore(m.d, m.run_id, m.pol.version, o, m.c.metric, scored);
}

// 3. The score, against the frontier as derived now, recorded in one transaction.
Result<Outcome> ScoreRun(MeasureRun& m, const GateResult& gate, const Measured& measured,
                         std::optional<double> head_ceiling) {
  std::string superseded;
  VERITY_RETURN_IF_ERROR(
      m.d.Transaction([&]() -> Status { return RecordScore(m, gate, measured, head_ceiling, superseded); }));
  Outcome& o = m.o;
  if (!superseded.empty()) {
    o.verdict = Verdict::kFailed;
    o.note = superseded;
    m.say("run " + std::to_string(m.run_id) + " " + superseded);
    return o;
  }
  m.say(std::string("scored: ") + VerdictName(o.verdict) +
        (o.tier != Tier::kNone ? std::string(" (") + TierName(o.tier) + ")" : "") + ": " + o.note);
  return o;
}

// 2. Speed, under the box lock: a warm-up round (recorded, not scored), then
// ABBA rounds until the sequential rule decides; then the score.
Result<Outcome> MeasureSpeed(MeasureRun& m, const GateResult& gate, bool records_lock) {
  auto box_ceiling = ReadCeiling(m.opt.cache_dir, m.box.fingerprint);
  if (!box_ceiling.ok()) return Fail(m, box_ceiling.status().message());
  const std::optional<double> read_bytes_per_s = *box_ceiling;

  auto lock = measure::BoxLock::Acquire(m.opt.lock_dir, m.box.Machine(), m.say);
  if (!lock.ok()) return Fail(m, lock.status().message());
  if (records_lock)
    if (Status held = RecordLock(m.d, m.run_id, **lock); !held.ok()) return Fail(m, held.message());
  auto measured = TakeRounds(RoundsInputOf(m), m.c, gate, m.plan, m.pol.gate_frac, m.attempt);
  lock.value().reset();  // the lock covers the timings only
  if (!measured.ok()) return Fail(m, measured.status().message());
  if (measured->mismatch) return ScoreWithoutSpeed(m, Verdict::kRejectedParity, measured->mismatch_note);
  m.attempt = m.o.attempt = measured->attempt;
  // Not `none`: an unresolvable measurement says nothing about the change.
  if (measured->too_noisy) return ScoreWithoutSpeed(m, Verdict::kFailed, measured->noise_note);
  m.o.rounds = static_cast<int>(measured->primary.rounds.size());
  // A head benched with --backend cuda is bounded by GPU 0's bandwidth
  // (`verity roofline --backend cuda`), read only then.
  std::optional<double> head_ceiling = read_bytes_per_s;
  if (measured->head_on_device) {
    auto device = ReadCeiling(m.opt.cache_dir, measure::DeviceRooflineFingerprint(m.box.fingerprint));
    if (!device.ok()) return Fail(m, device.status().message());
    head_ceiling = *device;
  }
  return ScoreRun(m, gate, *measured, head_ceiling);
}

}  // namespace

std::string DtypeNameError(const std::string& dtype) {
  if (dtype.empty()) return "an empty dtype names nothing";
  for (char ch : dtype)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
      return "'" + dtype + "' is not a dtype name (letters, digits and '_', e.g. f32, bf16, q8_0)";
  return "";
}

Result<int64_t> Ledger::InsertChange(const ChangeRequest& req) {
  if (req.title.empty()) return Status::Error("a change needs a title");
  if (req.kind != "revert" && !req.predict_pct)
    return Status::Error("a " + req.kind +
                         " needs a prediction: it is scored against the submitter's prediction, "
                         "recorded before anything is measured");
  for (auto* v : {&req.predict_pct, &req.claim_pct})
    if (*v && !std::isfinite(**v)) return Status::Error("prediction and claim must be finite percentages");
  if (req.base_cmd.empty() || req.head_cmd.empty())
    return Status::Error("a change needs a base and a head bench command");
  if (req.metric.empty()) return Status::Error("the scored metric name must not be empty");
  if (const std::string bad = terminal::FirstInvisible(req.metric); !bad.empty())
    return Status::Error("the metric name '" + terminal::Visible(req.metric) + "' holds " + bad +
                         ", a character that does not print as itself: a metric key must");
  if (auto unit = UnitOf(req.metric); !unit.ok()) return unit.status();
  if (!req.reference_dtype.empty())
    if (std::string bad = DtypeNameError(req.reference_dtype); !bad.empty())
      return Status::Error("--reference-dtype: " + bad);
  if (!req.reference_dtype.empty() && schema_version_ < kInputsSchema)
    return Status::Error("--reference-dtype: " + db_->path() + " is at schema " + std::to_string(schema_version_) +
                         ", which cannot record it (run `verity ledger migrate`)");
  int64_t id = 0;
  VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(
        id, db_->InsertSealed("changes", {{"kind", req.kind},
                                          {"title", req.title},
                                          {"author", req.author},
                                          {"claim_pct", Opt(req.claim_pct)},
                                          {"predict_pct", Opt(req.predict_pct)},
                                          {"claim_bit_identical", int64_t{req.claim_bit_identical}},
                                          {"metric", req.metric},
                                          {"base_cmd", req.base_cmd},
                                          {"head_cmd", req.head_cmd},
                                          {"parity_cmd", OptText(req.parity_cmd)},
                                          {"base_parity_cmd", OptText(req.base_parity_cmd)},
                                          {"base_ref", OptText(req.base_ref)},
                                          {"head_ref", OptText(req.head_ref)},
                                          {"base_sha", OptText(req.base_sha)},
                                          {"head_sha", OptText(req.head_sha)},
                                          {"target_change", req.target_change ? Value(*req.target_change) : Value()},
                                          {"reason", OptText(req.reason)},
                                          {"created_at", NowUtc()}}));
    for (const auto& m : req.accept_regressions)
      VERITY_RETURN_IF_ERROR(db_->InsertSealed("accepted_regressions", {{"change_id", id}, {"metric", m}}));
    if (!req.reference_dtype.empty())
      VERITY_RETURN_IF_ERROR(
          db_->InsertSealed("change_reference_dtypes", {{"change_id", id}, {"dtype", req.reference_dtype}}));
    return OkStatus();
  }));
  return id;
}

Result<ChangeRequest> Ledger::LoadChange(int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      db_->Query("SELECT kind, title, author, claim_pct, predict_pct, claim_bit_identical, metric, base_cmd, "
                 "head_cmd, parity_cmd, base_parity_cmd, base_ref, head_ref, base_sha, head_sha, "
                 "target_change, reason FROM changes WHERE id = ?",
                 {change_id}));
  if (rows.empty()) return Status::Error("change " + std::to_string(change_id) + " does not exist in " + db_->path());
  const Row& r = rows[0];
  ChangeRequest c;
  c.kind = AsText(r[0]);
  c.title = AsText(r[1]);
  c.author = AsText(r[2]);
  if (!IsNull(r[3])) c.claim_pct = AsDouble(r[3]);
  if (!IsNull(r[4])) c.predict_pct = AsDouble(r[4]);
  c.claim_bit_identical = AsInt(r[5]) != 0;
  c.metric = AsText(r[6]);
  c.base_cmd = AsText(r[7]);
  c.head_cmd = AsText(r[8]);
  c.parity_cmd = AsText(r[9]);
  c.base_parity_cmd = AsText(r[10]);
  c.base_ref = AsText(r[11]);
  c.head_ref = AsText(r[12]);
  c.base_sha = AsText(r[13]);
  c.head_sha = AsText(r[14]);
  if (!IsNull(r[15])) c.target_change = AsInt(r[15]);
  c.reason = AsText(r[16]);
  VERITY_ASSIGN_OR_RETURN(
      auto acc, db_->Query("SELECT metric FROM accepted_regressions WHERE change_id = ? ORDER BY id", {change_id}));
  for (const auto& a : acc) c.accept_regressions.push_back(AsText(a[0]));
  if (schema_version_ >= kInputsSchema) {
    VERITY_ASSIGN_OR_RETURN(auto dt,
                            db_->Query("SELECT dtype FROM change_reference_dtypes WHERE change_id = ?", {change_id}));
    if (!dt.empty()) c.reference_dtype = AsText(dt[0][0]);
  }
  return c;
}

Status Ledger::QueueParked(int64_t frontier_event, const FrontierKey& key) {
  // Parked changes of this ladder: last scored `none` on this workload, not queued already.
  VERITY_ASSIGN_OR_RETURN(
      auto parked,
      db_->Query(
          "SELECT c.id FROM changes c WHERE c.kind = 'change' AND c.metric = ? AND "
          "(SELECT s.verdict FROM scores s JOIN runs r ON s.run_id = r.id WHERE r.change_id = c.id "
          " ORDER BY s.id DESC LIMIT 1) = 'none' AND "
          "(SELECT COALESCE((SELECT w.workload FROM run_workloads w WHERE w.run_id = s.run_id), '') FROM scores s "
          " JOIN runs r ON s.run_id = r.id WHERE r.change_id = c.id ORDER BY s.id DESC LIMIT 1) = ? AND "
          "NOT EXISTS (SELECT 1 FROM remeasure_queue q "
          " WHERE q.change_id = c.id AND NOT EXISTS (SELECT 1 FROM runs r2 JOIN scores s2 ON s2.run_id = r2.id "
          " WHERE r2.queue_id = q.id)) ORDER BY c.id",
          {key.metric, key.workload}));
  for (const auto& p : parked)
    VERITY_RETURN_IF_ERROR(db_->InsertSealed(
        "remeasure_queue", {{"change_id", p[0]}, {"frontier_event_id", frontier_event}, {"queued_at", NowUtc()}}));
  return OkStatus();
}

Result<Outcome> Ledger::Submit(const ChangeRequest& req, const MeasureOptions& opt) {
  if (req.kind != "change") return Status::Error("Submit records kind 'change' only");
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  if (auto bad = RoundsRequestError(pol, opt)) return Status::Error(*bad);
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  if (opt.progress)
    opt.progress("change " + std::to_string(id) + " recorded with prediction " + PctText(*req.predict_pct / 100.0));
  return Measure(id, req, "submit", std::nullopt, opt);
}

Result<int64_t> Ledger::StartRun(int64_t change_id, const std::string& purpose, std::optional<int64_t> queue_id,
                                 int64_t box_id, const Policy& pol, int min_rounds, int max_rounds) {
  int64_t run_id = 0;
  VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(run_id, db_->InsertSealed("runs", {{"change_id", change_id},
                                                               {"purpose", purpose},
                                                               {"box_id", box_id},
                                                               {"policy_version", int64_t{pol.version}},
                                                               {"min_rounds", int64_t{min_rounds}},
                                                               {"max_rounds", int64_t{max_rounds}},
                                                               {"queue_id", queue_id ? Value(*queue_id) : Value()},
                                                               {"started_at", NowUtc()}}));
    return OkStatus();
  }));
  return run_id;
}

Result<Outcome> Ledger::Measure(int64_t change_id, const ChangeRequest& c, const std::string& purpose,
                                std::optional<int64_t> queue_id, const MeasureOptions& opt,
                                std::optional<PendingRetraction> retraction) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  const SequentialPlan plan = PlanFor(pol, opt.min_rounds, opt.max_rounds);
  const measure::Box box = opt.read_box ? opt.read_box() : measure::ThisBox();
  const Kind kind = KindFromName(c.kind).value_or(Kind::kChange);
  Db& d = *db_;
  int64_t box_id = 0;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(box_id, EnsureBox(d, box));
    return OkStatus();
  }));
  VERITY_ASSIGN_OR_RETURN(int attempt, PriorAttempts(d, change_id));
  VERITY_ASSIGN_OR_RETURN(int64_t run_id,
                          StartRun(change_id, purpose, queue_id, box_id, pol, plan.min_rounds, plan.max_rounds));
  MeasureRun m{.d = d,
               .pol = pol,
               .plan = plan,
               .c = c,
               .opt = opt,
               .box = box,
               .kind = kind,
               .change_id = change_id,
               .box_id = box_id,
               .run_id = run_id,
               .queue_id = queue_id,
               .attempt = attempt,
               .v4 = pol.version >= 4,
               .say = say,
               .queue_parked = [this](int64_t ev, const FrontierKey& key) { return QueueParked(ev, key); }};
  if (retraction)
    m.retract = [&] { return RetractInTransaction(retraction->run, retraction->reason, std::nullopt, change_id); };
  m.o.change = change_id;
  m.o.run = run_id;
  m.o.attempt = attempt;

  // 1. The correctness gate: the head's speed is never measured if it fails.
  GateInput gi{&d, &pol, run_id, opt.timeout_s, say};
  VERITY_ASSIGN_OR_RETURN(GateResult gate, RunGate(gi, c, kind));
  if (gate.stop) {
    std::function<Status()> also;
    if (gate.verdict == Verdict::kAccepted && kind == Kind::kRevert) also = [&m] { return RevertOnEvidence(m); };
    return ScoreWithoutSpeed(m, gate.verdict, gate.note, also);
  }
  // 2. Speed, then 3. the score.
  return MeasureSpeed(m, gate, schema_version_ >= kInputsSchema);
}

}  // namespace verity::ledger
