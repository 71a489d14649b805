// After the first score: confirm a held surprise with verified deep parity,
// re-measure parked changes, revert and reapply — each through the same gates
// as a change.
#include <cmath>

#include "ledger/evidence.h"
#include "ledger/frontier.h"
#include "ledger/ledger.h"
#include "ledger/record.h"
#include "measure/measure.h"

namespace verity::ledger {
namespace {

// The latest verdict recorded for a change (nullopt if none).
Result<std::optional<Verdict>> LatestVerdict(Db& d, int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT s.verdict FROM scores s JOIN runs r ON s.run_id = r.id "
                                             "WHERE r.change_id = ? ORDER BY s.id DESC LIMIT 1",
                                             {change_id}));
  if (rows.empty()) return std::optional<Verdict>();
  const std::string name = AsText(rows[0][0]);
  const std::optional<Verdict> v = VerdictFromName(name);
  if (!v)
    return Status::Error("change " + std::to_string(change_id) + " has a score with verdict '" + name +
                         "', which is no verdict of the ledger's");
  return v;
}

// Why the step run `run_id` measured is not a new step of `ladder` (policy v4; v6 by identity), if it is not.
Result<std::optional<std::string>> StepRefusalOfRun(Db& d, const Ladder& ladder, int64_t run_id) {
  VERITY_ASSIGN_OR_RETURN(const ChangeIdentity id, IdentityOfRun(d, run_id));
  return ladder.StepRefusal(CountingKeys(id.base), CountingKeys(id.head));
}

// The --retract a reapply asked for (reapply_retractions), if it asked and the run is not retracted yet.
struct PendingRetract {
  int64_t run = 0;
  std::string reason;
};
Result<std::optional<PendingRetract>> PendingRetractionOf(Db& d, int64_t reapply_change) {
  VERITY_ASSIGN_OR_RETURN(const bool has_table, d.HasTable("reapply_retractions"));
  if (!has_table) return std::optional<PendingRetract>();
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT q.run_id, q.reason FROM reapply_retractions q WHERE "
                                             "q.change_id = ? AND q.run_id NOT IN (SELECT run_id FROM retractions)",
                                             {reapply_change}));
  if (rows.empty()) return std::optional<PendingRetract>();
  return std::optional<PendingRetract>(PendingRetract{AsInt(rows[0][0]), AsText(rows[0][1])});
}

// The latest score of a change, which confirm needs held: its score, run and
// stats columns (the row Confirm reads).
Result<Row> LatestHeldScore(Db& d, int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows, d.Query("SELECT s.id, s.run_id, s.verdict, s.tier, s.gain, s.ci_low, s.ci_high, s.base_median, "
                         "s.head_median, s.rounds, r.box_id, st.ratio, st.ratio_low, st.ratio_high, st.alpha, "
                         "st.attempt FROM scores s JOIN runs r ON s.run_id = r.id LEFT JOIN score_stats st ON "
                         "st.score_id = s.id WHERE r.change_id = ? ORDER BY s.id DESC LIMIT 1",
                         {change_id}));
  if (rows.empty() || VerdictFromName(AsText(rows[0][2])) != Verdict::kHeldSurprise)
    return Status::Error("confirm: change " + std::to_string(change_id) + " is not held (latest verdict: " +
                         (rows.empty() ? std::string("none recorded") : AsText(rows[0][2])) + ")");
  return rows[0];
}

// Runs the head's parity command in deep mode (VERITY_PARITY_MODE=deep); it
// passes only on evidence from the artifact the run measured.
Result<ParityOutcome> RunDeepParity(Db& d, const Policy& pol, const std::string& parity_cmd, int64_t run_id,
                                    const MeasureOptions& opt) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  // Deep evidence is judged against the run's own standard evidence.
  VERITY_ASSIGN_OR_RETURN(auto standard, RecordedParity(d, run_id, "head", "standard"));
  if (!standard)
    return Status::Error("confirm: run " + std::to_string(run_id) + " has no standard parity evidence to deepen");
  say("deep parity (VERITY_PARITY_MODE=deep): " + parity_cmd);
  VERITY_ASSIGN_OR_RETURN(auto po,
                          RunParityCommand(d, pol, run_id, "head", parity_cmd, true, opt.timeout_s, &*standard));
  say("  " + po.message);
  if (po.passed && po.evidence->artifact_sha256 != standard->artifact_sha256) {
    po.passed = false;
    po.message += "; FAIL: the deep evidence came from artifact " + po.evidence->artifact_sha256.substr(0, 16) +
                  ", the measured head is " + standard->artifact_sha256.substr(0, 16);
  }
  return po;
}

// The held score `h` (a LatestHeldScore row), as the confirm's outcome starts.
// A stored tier that names none is an error naming the score row.
Result<Outcome> HeldOutcome(int64_t change_id, const Row& h) {
  Outcome o;
  o.change = change_id;
  o.run = AsInt(h[1]);
  const std::optional<Tier> tier = TierFromName(AsText(h[3]));
  if (!tier) return Status::Error("score " + std::to_string(AsInt(h[0])) + ": unknown tier '" + AsText(h[3]) + "'");
  o.tier = *tier;
  o.gain = AsDouble(h[4]);
  if (!IsNull(h[5])) o.ci_low = AsDouble(h[5]);
  if (!IsNull(h[6])) o.ci_high = AsDouble(h[6]);
  o.base_median = AsDouble(h[7]);
  o.head_median = AsDouble(h[8]);
  o.rounds = static_cast<int>(AsInt(h[9]));
  o.attempt = static_cast<int>(AsInt(h[15]));
  if (!IsNull(h[14])) o.alpha = AsDouble(h[14]);
  o.surprise = true;
  return o;
}

// The held score's ratio and its bounds, recorded again with the confirm (old scores have none).
std::optional<ScoreResult> HeldStats(const Row& h, double oriented, int rounds) {
  std::optional<ScoreResult> stats;
  if (!IsNull(h[11])) {
    stats.emplace();
    stats->decision = Decision::kAbove;
    stats->ratio = Bounds{oriented, IsNull(h[12]) ? -INFINITY : AsDouble(h[12]),
                          IsNull(h[13]) ? INFINITY : AsDouble(h[13]), AsDouble(h[14]), rounds};
  }
  return stats;
}

// Still held? A concurrent confirm may have banked it while deep parity ran.
Status StillHeld(Db& d, int64_t change_id, int64_t held_score) {
  VERITY_ASSIGN_OR_RETURN(auto latest, d.Query("SELECT s.id FROM scores s JOIN runs r ON s.run_id = r.id WHERE "
                                               "r.change_id = ? ORDER BY s.id DESC LIMIT 1",
                                               {change_id}));
  if (latest.empty() || AsInt(latest[0][0]) != held_score)
    return Status::Error("confirm: change " + std::to_string(change_id) +
                         " was scored again while deep parity ran (a concurrent confirm?); nothing banked");
  return OkStatus();
}

}  // namespace

Result<Outcome> Ledger::Confirm(int64_t change_id, const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(ChangeRequest c, LoadChange(change_id));
  VERITY_ASSIGN_OR_RETURN(const Row h, LatestHeldScore(*db_, change_id));
  const int64_t run_id = AsInt(h[1]), box_id = AsInt(h[10]);
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  VERITY_ASSIGN_OR_RETURN(const ParityOutcome po, RunDeepParity(*db_, pol, c.parity_cmd, run_id, opt));
  VERITY_ASSIGN_OR_RETURN(Outcome o, HeldOutcome(change_id, h));
  // The factor banked is the run's own median ratio (old scores: head/base medians).
  const double oriented = IsNull(h[11]) ? *o.head_median / *o.base_median : AsDouble(h[11]);
  // The frontier is in metric units: a lower-is-better metric moves down by the ratio.
  const double ratio = IsNull(h[11]) || HigherIsBetter(c.metric) ? oriented : 1.0 / oriented;
  const std::optional<ScoreResult> stats = HeldStats(h, oriented, o.rounds);
  VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    VERITY_RETURN_IF_ERROR(StillHeld(*db_, change_id, AsInt(h[0])));
    VERITY_ASSIGN_OR_RETURN(std::string workload, WorkloadOfRun(*db_, run_id));
    const FrontierKey key{c.metric, box_id, workload};
    VERITY_ASSIGN_OR_RETURN(Ladder before, LoadLadder(*db_, key));
    o.frontier_before = before.value;
    o.gate = before.value ? std::optional<double>(pol.gate_frac * *before.value) : std::nullopt;
    o.frontier_after = before.value;
    std::optional<std::string> not_new;
    if (po.passed && pol.version >= 4) {
      VERITY_ASSIGN_OR_RETURN(not_new, StepRefusalOfRun(*db_, before, run_id));
    }
    if (!po.passed) {
      o.verdict = Verdict::kRejectedParity;
      o.tier = Tier::kNone;
      o.note = "deep parity failed on confirm: " + po.message;
    } else if (not_new) {
      // v4: the same step confirmed through another change (a resubmission) is not banked twice.
      o.verdict = Verdict::kRefused;
      o.tier = Tier::kNone;
      o.note =
          "confirm: not a new frontier step: " + *not_new + "; deep parity passed (" + po.message + "), nothing banked";
    } else {
      o.verdict = Verdict::kAccepted;
      o.note = "confirmed by deep parity: " + po.message;
      VERITY_RETURN_IF_ERROR(BankConfirmed(c, key, before, ratio, o));
    }
    return InsertScore(*db_, run_id, pol.version, o, c.metric, stats);
  }));
  return o;
}

// Banks the confirmed step in the confirm's transaction: its frontier event, a
// held reapply's --retract, and the parked changes queued behind it.
Status Ledger::BankConfirmed(const ChangeRequest& c, const FrontierKey& key, const Ladder& before, double ratio,
                             Outcome& o) {
  const int64_t run_id = o.run, change_id = o.change;
  // A confirmed reapply, like an accepted one, counts only while its revert does.
  std::optional<int64_t> undoes;
  if (c.kind == "reapply") {
    VERITY_ASSIGN_OR_RETURN(undoes, FrontierRunOf(*db_, *c.target_change, key, false));
  }
  VERITY_ASSIGN_OR_RETURN(
      int64_t ev, InsertFrontierEvent(*db_, key, run_id, "confirmed", before.value.value_or(*o.base_median) * ratio,
                                      ratio, undoes));
  // A held reapply's --retract applies only now that it is accepted.
  VERITY_ASSIGN_OR_RETURN(auto pending, PendingRetractionOf(*db_, change_id));
  if (pending) VERITY_RETURN_IF_ERROR(RetractInTransaction(pending->run, pending->reason, std::nullopt, change_id));
  VERITY_ASSIGN_OR_RETURN(Ladder after, LoadLadder(*db_, key));
  o.frontier_after = after.value;
  return QueueParked(ev, key);
}

Result<std::vector<Outcome>> Ledger::Remeasure(const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(auto pending,
                          db_->Query("SELECT q.id, q.change_id FROM remeasure_queue q WHERE NOT EXISTS (SELECT 1 FROM "
                                     "runs r JOIN scores s ON s.run_id = r.id WHERE r.queue_id = q.id) ORDER BY q.id"));
  std::vector<Outcome> out;
  for (const auto& p : pending) {
    VERITY_ASSIGN_OR_RETURN(ChangeRequest c, LoadChange(AsInt(p[1])));
    if (opt.progress) opt.progress("re-measuring change " + std::to_string(AsInt(p[1])) + " '" + c.title + "'");
    VERITY_ASSIGN_OR_RETURN(Outcome o, Measure(AsInt(p[1]), c, "remeasure", AsInt(p[0]), opt));
    out.push_back(o);
  }
  return out;
}

Result<Outcome> Ledger::Revert(int64_t change_id, ChangeRequest req, const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(ChangeRequest target, LoadChange(change_id));
  if (target.kind == "revert")
    return Status::Error("revert: " + std::to_string(change_id) + " is a revert; reapply it instead");
  if (req.reason.empty()) return Status::Error("revert: a reason is required");
  if (req.parity_cmd.empty())
    return Status::Error(
        "revert: a parity command for main without the change is required (its head passes the "
        "parity gate like any change's)");
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  if (auto bad = RoundsRequestError(pol, opt)) return Status::Error(*bad);
  // Only a change whose gain is in this box's frontier can be reverted: a
  // revert of anything else would bank a gain with no prediction.
  VERITY_ASSIGN_OR_RETURN(auto box,
                          db_->Query("SELECT id FROM boxes WHERE fingerprint = ?", {measure::ThisBox().fingerprint}));
  std::optional<int64_t> live;
  if (!box.empty()) {
    const int64_t box_id = AsInt(box[0][0]);
    VERITY_ASSIGN_OR_RETURN(auto workload, FrontierWorkloadOfChange(*db_, change_id, target.metric, box_id));
    if (workload) {
      VERITY_ASSIGN_OR_RETURN(live,
                              FrontierRunOf(*db_, change_id, FrontierKey{target.metric, box_id, *workload}, true));
    }
  }
  if (!live)
    return Status::Error("revert: change " + std::to_string(change_id) +
                         " does not count in this box's frontier (never "
                         "accepted here, retracted, or already reverted): submit a change with a prediction instead");
  req.kind = "revert";
  req.target_change = change_id;
  req.metric = target.metric;
  req.predict_pct.reset();
  if (req.title.empty()) req.title = "Revert \"" + target.title + "\"";
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  return Measure(id, req, "revert", std::nullopt, opt);
}

Result<Outcome> Ledger::Reapply(int64_t revert_id, ChangeRequest req, std::optional<int64_t> retract_run,
                                const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(ChangeRequest rev, LoadChange(revert_id));
  if (rev.kind != "revert") return Status::Error("reapply: " + std::to_string(revert_id) + " is not a revert");
  if (req.reason.empty()) return Status::Error("reapply: a reason is required (why the revert was wrong)");
  if (!req.predict_pct) return Status::Error("reapply: a prediction is required: a reapply is scored like any change");
  VERITY_ASSIGN_OR_RETURN(const std::optional<Verdict> verdict, LatestVerdict(*db_, revert_id));
  if (verdict != Verdict::kAccepted)
    return Status::Error("reapply: revert " + std::to_string(revert_id) + " was not accepted (latest verdict: " +
                         (verdict ? std::string(VerdictName(*verdict)) : std::string("none recorded")) +
                         "): there is nothing to reapply");
  VERITY_ASSIGN_OR_RETURN(auto others, db_->Query("SELECT c.id FROM changes c WHERE c.kind = 'reapply' AND "
                                                  "c.target_change = ? AND (SELECT s.verdict FROM scores s JOIN runs r "
                                                  "ON s.run_id = r.id WHERE r.change_id = c.id ORDER BY s.id DESC "
                                                  "LIMIT 1) IN ('accepted', 'held-surprise')",
                                                  {revert_id}));
  if (!others.empty())
    return Status::Error("reapply: revert " + std::to_string(revert_id) + " was already reapplied by change " +
                         AsText(others[0][0]));
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  if (auto bad = RoundsRequestError(pol, opt)) return Status::Error(*bad);
  req.kind = "reapply";
  req.target_change = revert_id;
  req.metric = rev.metric;
  if (req.title.empty()) req.title = "Reapply (undo " + rev.title + ")";
  if (retract_run) {
    VERITY_ASSIGN_OR_RETURN(auto r, db_->Query("SELECT 1 FROM runs WHERE id = ? AND change_id = ? AND id NOT IN "
                                               "(SELECT run_id FROM retractions)",
                                               {*retract_run, revert_id}));
    if (r.empty())
      return Status::Error("reapply: run " + std::to_string(*retract_run) + " is not an unretracted run of revert " +
                           std::to_string(revert_id));
  }
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  // The revert's evidence is retracted only once the reapply is accepted: now
  // if it is scored so, or on confirm if it is held. The request is recorded for confirm.
  std::optional<PendingRetraction> pending;
  if (retract_run) {
    pending = PendingRetraction{*retract_run, "reapply " + std::to_string(id) + ": " + req.reason};
    VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
      return db_
          ->InsertSealed("reapply_retractions",
                         {{"change_id", id}, {"run_id", *retract_run}, {"reason", pending->reason}})
          .status();
    }));
  }
  return Measure(id, req, "reapply", std::nullopt, opt, pending);
}

}  // namespace verity::ledger
