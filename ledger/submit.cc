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
  Outcome o;
  o.change = change_id;
  o.run = run_id;
  o.attempt = attempt;
  auto fail = [&](const std::string& msg) -> Result<Outcome> {
    VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
      return d.InsertSealed("run_failures", {{"run_id", run_id}, {"message", msg}, {"failed_at", NowUtc()}}).status();
    }));
    o.verdict = Verdict::kFailed;
    o.note = msg;
    say("run " + std::to_string(run_id) + " failed: " + msg);
    return o;
  };
  auto score_without_speed = [&](Verdict v, const std::string& note,
                                 std::function<Status()> also = nullptr) -> Result<Outcome> {
    o.verdict = v;
    o.note = note;
    VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
      if (also) VERITY_RETURN_IF_ERROR(also());
      return InsertScore(d, run_id, pol.version, o, c.metric, std::nullopt);
    }));
    say(std::string("scored: ") + VerdictName(o.verdict) + ": " + o.note);
    return o;
  };

  // 1. The correctness gate: the head's speed is never measured if it fails.
  GateInput gi{&d, &pol, run_id, opt.timeout_s, say};
  VERITY_ASSIGN_OR_RETURN(GateResult gate, RunGate(gi, c, kind));
  if (gate.stop) {
    std::function<Status()> also;
    if (gate.verdict == Verdict::kAccepted && kind == Kind::kRevert) {
      // A revert on parity evidence that main is wrong: the change's factor leaves the ladder.
      also = [&]() -> Status {
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
        VERITY_ASSIGN_OR_RETURN(auto workload, FrontierWorkloadOfChange(d, *c.target_change, c.metric, box_id));
        if (!workload) return refuse();
        const FrontierKey key{c.metric, box_id, *workload};
        VERITY_ASSIGN_OR_RETURN(auto undone, FrontierRunOf(d, *c.target_change, key, true));
        if (!undone) return refuse();
        VERITY_ASSIGN_OR_RETURN(Ladder before, LoadLadder(d, key));
        VERITY_ASSIGN_OR_RETURN(
            int64_t ev, InsertFrontierEvent(d, key, run_id, "revert", before.value.value_or(0), std::nullopt, undone));
        VERITY_ASSIGN_OR_RETURN(Ladder after, LoadLadder(d, key));
        o.frontier_before = before.value;
        o.frontier_after = after.value;
        return QueueParked(ev, key);
      };
    }
    return score_without_speed(gate.verdict, gate.note, also);
  }

  // The measured read bandwidth of `fingerprint` (a box, or a box's GPU 0),
  // if `verity roofline` cached it: the physical ceiling.
  auto ceiling = [&](const std::string& fingerprint) -> Result<std::optional<double>> {
    std::optional<double> best;
    if (opt.cache_dir.empty()) return best;
    VERITY_ASSIGN_OR_RETURN(auto roof, measure::CachedRoofline(opt.cache_dir, fingerprint));
    if (roof)
      for (const auto& p : roof->read) best = std::max(best.value_or(0.0), p.best * 1e9);
    return best;
  };
  auto box_ceiling = ceiling(box.fingerprint);
  if (!box_ceiling.ok()) return fail(box_ceiling.status().message());
  const std::optional<double> read_bytes_per_s = *box_ceiling;

  // 2. Speed, under the box lock: a warm-up round (recorded, not scored), then
  // ABBA rounds until the sequential rule decides.
  auto lock = measure::BoxLock::Acquire(opt.lock_dir, box.Machine(), say);
  if (!lock.ok()) return fail(lock.status().message());
  const bool v4 = pol.version >= 4;
  if (schema_version_ >= kInputsSchema)
    if (Status held = RecordLock(d, run_id, **lock); !held.ok()) return fail(held.message());
  RoundsInput ri{&d, run_id, box_id, opt.timeout_s, say, box, opt.read_box, nullptr};
  if (!ri.read_box) ri.read_box = measure::ThisBox;
  if (v4)
    ri.attempt_of = [&](const ChangeIdentity& id) { return SpentAttempts(d, run_id, change_id, c.kind, c.metric, id); };
  auto measured = TakeRounds(ri, c, gate, plan, pol.gate_frac, attempt);
  lock.value().reset();  // the lock covers the timings only
  if (!measured.ok()) return fail(measured.status().message());
  if (measured->mismatch) return score_without_speed(Verdict::kRejectedParity, measured->mismatch_note);
  attempt = o.attempt = measured->attempt;
  // Not `none`: an unresolvable measurement says nothing about the change.
  if (measured->too_noisy) return score_without_speed(Verdict::kFailed, measured->noise_note);
  o.rounds = static_cast<int>(measured->primary.rounds.size());
  // A head benched with --backend cuda is bounded by GPU 0's bandwidth
  // (`verity roofline --backend cuda`), read only then.
  std::optional<double> head_ceiling = read_bytes_per_s;
  if (measured->head_on_device) {
    auto device = ceiling(measure::DeviceRooflineFingerprint(box.fingerprint));
    if (!device.ok()) return fail(device.status().message());
    head_ceiling = *device;
  }

  // 3. The score, against the frontier as derived now, recorded in one transaction.
  std::optional<ScoreResult> scored;
  std::string superseded;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    // Another process may have scored this change (or answered this queue
    // item) while we measured: the error budget we spent was for `attempt`.
    int attempt_now = 0;
    if (v4) {
      VERITY_ASSIGN_OR_RETURN(attempt_now, SpentAttempts(d, run_id, change_id, c.kind, c.metric, measured->identity));
    } else {
      VERITY_ASSIGN_OR_RETURN(attempt_now, PriorAttempts(d, change_id));
    }
    VERITY_ASSIGN_OR_RETURN(auto answered, d.Query("SELECT r.id FROM runs r JOIN scores s ON s.run_id = r.id WHERE "
                                                   "r.queue_id = ? AND r.id != ? LIMIT 1",
                                                   {queue_id ? Value(*queue_id) : Value(), run_id}));
    if (attempt_now != attempt || !answered.empty()) {
      superseded = "superseded: another run scored change " + std::to_string(change_id) +
                   " (or the same artifact pair) while this one measured; its samples are kept, its score is not";
      return d.InsertSealed("run_failures", {{"run_id", run_id}, {"message", superseded}, {"failed_at", NowUtc()}})
          .status();
    }
    const FrontierKey key{c.metric, box_id, measured->workload};
    VERITY_ASSIGN_OR_RETURN(Ladder ladder, LoadLadder(d, key));
    // A revert counts only where its change counts now, on the workload its
    // own benches measured: a concurrent revert may have taken it out already.
    std::optional<std::string> revert_refusal;
    if (kind == Kind::kRevert) {
      VERITY_ASSIGN_OR_RETURN(auto live, FrontierRunOf(d, *c.target_change, key, true));
      if (!live)
        revert_refusal = "revert: change " + std::to_string(*c.target_change) + " does not count on workload '" +
                         key.workload +
                         "' (what this revert's benches measured) now: never accepted there, retracted, "
                         "or already reverted; nothing banked";
    }
    ScoreInput in;
    in.kind = kind;
    in.primary = measured->primary;
    in.guards = measured->guards;
    in.declared_regressions = c.accept_regressions;
    in.frontier = ladder.value;
    if (c.predict_pct) in.predict_frac = *c.predict_pct / 100.0;
    std::string prediction_note;
    if (v4 && kind == Kind::kChange) {
      // A resubmission is scored against the prediction made before the pair was first measured.
      VERITY_ASSIGN_OR_RETURN(auto first, FirstPredictionOfPair(d, change_id, c.metric, measured->identity));
      if (first && (!c.predict_pct || first->predict_pct != *c.predict_pct)) {
        in.predict_frac = first->predict_pct / 100.0;
        prediction_note = "scored against change " + std::to_string(first->change_id) + "'s prediction " +
                          PctText(first->predict_pct / 100.0) + ", made before this artifact pair was first measured";
      }
    }
    in.attempt = attempt;
    in.verified = gate.verified && !measured->unbound;
    in.plan = measured->plan;
    in.read_bytes_per_s = head_ceiling;
    if (measured->head_on_device) in.ceiling_of = "GPU 0's";
    in.head_bytes_per_token = measured->head_bytes_per_token;
    ScoreResult r = Score(pol, in);
    if (revert_refusal) RefuseStep(r, *revert_refusal);
    const bool would_bank = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise;
    if (v4 && kind != Kind::kRevert && would_bank)
      if (auto no = ladder.StepRefusal(CountingKeys(measured->identity.base), CountingKeys(measured->identity.head)))
        RefuseStep(r, "not a new frontier step: " + *no + "; recorded, nothing banked");
    // One machine, many labels: a step that counts on another label's frontier
    // of this machine (same metric and workload) counts already (finding 6).
    if (pol.version >= 6 && kind != Kind::kRevert &&
        (r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise)) {
      VERITY_ASSIGN_OR_RETURN(auto twin, CountsOnTheSameMachine(d, box, box_id, key, measured->identity));
      if (twin) RefuseStep(r, "not a new frontier step: " + *twin + "; recorded, nothing banked");
    }
    const bool still_banks = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kHeldSurprise;
    if (pol.version >= 6 && kind == Kind::kChange && still_banks && ladder.value && !ladder.stands_keys.empty() &&
        !SharesKey(CountingKeys(measured->identity.base), ladder.stands_keys))
      if (const std::string gap = ContinuityGap(measured->primary, *ladder.value, pol.gate_frac); !gap.empty())
        RefuseStep(r, "not a frontier step: " + gap + "; recorded, nothing banked");
    FillFromScore(r, &o);
    if (!prediction_note.empty()) o.note += "; " + prediction_note;
    if (!measured->noise_note.empty()) o.note += "; " + measured->noise_note;
    if (measured->unbound) o.note += "; " + measured->unbound_note;
    if (!measured->dtype_note.empty()) o.note += "; " + measured->dtype_note;
    // Only a sound measurement of main seeds: not one the gate or the rules refused.
    const bool sound = r.verdict == Verdict::kAccepted || r.verdict == Verdict::kNone ||
                       r.verdict == Verdict::kRefused || r.verdict == Verdict::kHeldSurprise;
    if (r.seeds_frontier && sound && in.verified && !revert_refusal) {
      VERITY_RETURN_IF_ERROR(
          InsertFrontierEvent(d, key, run_id, "seed", r.base_median, std::nullopt, std::nullopt).status());
      say("empty frontier for " + c.metric + " on this box" +
          (key.workload.empty() ? std::string() : " and workload '" + key.workload + "'") + ": seeded from the base, " +
          NumText(r.base_median));
    }
    if (r.moves_frontier) {
      // A reapply names the revert run it replaces; the ladder counts it only
      // while that revert counts (see DeriveLadder).
      // A speed revert names the change run it takes out of the live runs.
      std::optional<int64_t> undoes;
      if (kind == Kind::kReapply) {
        VERITY_ASSIGN_OR_RETURN(undoes, FrontierRunOf(d, *c.target_change, key, false));
      } else if (kind == Kind::kRevert) {
        VERITY_ASSIGN_OR_RETURN(undoes, FrontierRunOf(d, *c.target_change, key, true));
      }
      VERITY_ASSIGN_OR_RETURN(int64_t ev,
                              InsertFrontierEvent(d, key, run_id, kind == Kind::kRevert ? "revert" : "accepted",
                                                  r.frontier_after, r.factor, undoes));
      // --retract applies only now that the reapply is accepted (a held one: on confirm).
      if (retraction)
        VERITY_RETURN_IF_ERROR(RetractInTransaction(retraction->run, retraction->reason, std::nullopt, change_id));
      VERITY_ASSIGN_OR_RETURN(Ladder after, LoadLadder(d, key));
      if (after.last_event != ev)
        o.note +=
            "; recorded but not counted: the revert it undoes no longer counts, so the change's own gain is "
            "already in the frontier";
      o.frontier_after = after.value;
      VERITY_RETURN_IF_ERROR(QueueParked(ev, key));
    }
    scored = r;
    return InsertScore(d, run_id, pol.version, o, c.metric, scored);
  }));
  if (!superseded.empty()) {
    o.verdict = Verdict::kFailed;
    o.note = superseded;
    say("run " + std::to_string(run_id) + " " + superseded);
    return o;
  }
  say(std::string("scored: ") + VerdictName(o.verdict) + (o.tier != "none" ? " (" + o.tier + ")" : "") + ": " + o.note);
  return o;
}

}  // namespace verity::ledger
