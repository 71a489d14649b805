// Submitting, measuring and scoring: the correctness gate first, then
// interleaved ABBA speed rounds, then the score against the frontier. Every
// step is committed before the next begins, so a killed submission leaves its
// partial attempt visible (a run without a score).
#include <cmath>
#include <cstdio>

#include "measure/measure.h"
#include "ledger/ledger.h"
#include "ledger/stats.h"

namespace verity::ledger {
namespace {

std::string Pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", 100.0 * f);
  return b;
}
std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}
Value Opt(const std::optional<double>& v) { return v ? Value(*v) : Value(); }
Value OptText(const std::string& s) { return s.empty() ? Value() : Value(s); }

Result<int64_t> EnsureBox(Db& d, const measure::Box& box) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT id FROM boxes WHERE fingerprint = ?", {box.fingerprint}));
  if (!rows.empty()) return AsInt(rows[0][0]);
  return d.InsertSealed("boxes", {{"fingerprint", box.fingerprint}, {"detail", box.detail}});
}

struct FrontierNow {
  std::optional<double> value;
  int64_t event = 0;
};

// The frontier is the latest frontier event whose run has not been retracted.
Result<FrontierNow> CurrentFrontier(Db& d, const std::string& metric, int64_t box_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows, d.Query("SELECT id, value FROM frontier_events WHERE metric = ? AND box_id = ? AND run_id NOT IN "
                         "(SELECT run_id FROM retractions) ORDER BY id DESC LIMIT 1",
                         {metric, box_id}));
  FrontierNow f;
  if (!rows.empty()) {
    f.event = AsInt(rows[0][0]);
    f.value = AsDouble(rows[0][1]);
  }
  return f;
}

struct ParityOutcome {
  bool passed = false;
  std::string message;
  std::optional<measure::ParityEvidence> evidence;
};

// Runs one parity command and records what it said. Passing needs exit 0 AND
// the protocol JSON AND ok:true AND the policy thresholds on the worst depth.
Result<ParityOutcome> RunParity(Db& d, const Policy& pol, int64_t run_id, const std::string& side,
                                const std::string& cmd, bool deep, int timeout_s) {
  std::map<std::string, std::string> env;
  if (deep) env["VERITY_PARITY_MODE"] = "deep";
  measure::CommandOutput out = measure::RunCommand(cmd, timeout_s, env);
  auto ev = measure::ParseParity(out, side + " parity command");
  ParityOutcome po;
  if (!ev.ok()) {
    po.message = ev.status().message() + " (no parity evidence: refused, not assumed)";
  } else {
    po.evidence = ev.value();
    const auto& e = ev.value();
    po.passed = e.exit_code == 0 && e.reported_ok && pol.ParityPasses(e.worst_top1, e.worst_mean_kl);
    po.message = "worst top-1 " + Num(e.worst_top1) + ", worst mean KL " + Num(e.worst_mean_kl) + " over " +
                 std::to_string(e.depths.size()) + " depths, exit " + std::to_string(e.exit_code) +
                 (po.passed ? ": pass" : ": FAIL");
  }
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    return d.InsertSealed("parity_results",
                          {{"run_id", run_id},
                           {"side", side},
                           {"mode", std::string(deep ? "deep" : "standard")},
                           {"exit_code", int64_t{out.exit_code}},
                           {"passed", int64_t{po.passed}},
                           {"worst_top1", po.evidence ? Value(po.evidence->worst_top1) : Value()},
                           {"worst_mean_kl", po.evidence ? Value(po.evidence->worst_mean_kl) : Value()},
                           {"logits_sha256", po.evidence ? Value(po.evidence->logits_sha256) : Value()},
                           {"message", po.message},
                           {"seconds", out.seconds},
                           {"raw_json", po.evidence ? Value(po.evidence->raw) : Value()}})
        .status();
  }));
  return po;
}

// Records a score row for `run_id` from an outcome.
Status InsertScore(Db& d, int64_t run_id, int policy_version, const Outcome& o) {
  return d.InsertSealed("scores", {{"run_id", run_id},
                                   {"policy_version", int64_t{policy_version}},
                                   {"verdict", o.verdict},
                                   {"tier", o.tier},
                                   {"gain", Opt(o.gain)},
                                   {"ci_low", Opt(o.ci_low)},
                                   {"ci_high", Opt(o.ci_high)},
                                   {"gate", Opt(o.gate)},
                                   {"frontier_before", Opt(o.frontier_before)},
                                   {"frontier_after", Opt(o.frontier_after)},
                                   {"base_median", Opt(o.base_median)},
                                   {"head_median", Opt(o.head_median)},
                                   {"rounds", int64_t{o.rounds}},
                                   {"surprise", int64_t{o.surprise}},
                                   {"note", o.note},
                                   {"scored_at", NowUtc()}})
      .status();
}

}  // namespace

Result<int64_t> Ledger::InsertChange(const ChangeRequest& req) {
  if (req.title.empty()) return Status::Error("--title is required");
  if (req.kind == "change" && !req.predict_pct)
    return Status::Error("--predict is required: a change is scored against the submitter's prediction, "
                         "recorded before anything is measured");
  for (auto* v : {&req.predict_pct, &req.claim_pct})
    if (*v && !std::isfinite(**v)) return Status::Error("--predict/--claim must be finite percentages");
  if (req.base_cmd.empty() || req.head_cmd.empty()) return Status::Error("--base-cmd and --head-cmd are required");
  if (req.metric.empty()) return Status::Error("--metric must not be empty");
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
    return OkStatus();
  }));
  return id;
}

Result<ChangeRequest> Ledger::LoadChange(int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT kind, title, author, claim_pct, predict_pct, claim_bit_identical, metric, base_cmd, "
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
  return c;
}

Status Ledger::QueueParked(int64_t frontier_event, const std::string& metric) {
  VERITY_ASSIGN_OR_RETURN(
      auto parked,
      db_->Query("SELECT c.id FROM changes c WHERE c.kind = 'change' AND c.metric = ? AND "
                 "(SELECT s.verdict FROM scores s JOIN runs r ON s.run_id = r.id WHERE r.change_id = c.id "
                 " ORDER BY s.id DESC LIMIT 1) = 'none' AND NOT EXISTS (SELECT 1 FROM remeasure_queue q "
                 " WHERE q.change_id = c.id AND NOT EXISTS (SELECT 1 FROM runs r2 JOIN scores s2 ON s2.run_id = r2.id "
                 " WHERE r2.queue_id = q.id)) ORDER BY c.id",
                 {metric}));
  for (const auto& p : parked)
    VERITY_RETURN_IF_ERROR(db_->InsertSealed(
        "remeasure_queue", {{"change_id", p[0]}, {"frontier_event_id", frontier_event}, {"queued_at", NowUtc()}}));
  return OkStatus();
}

Result<Outcome> Ledger::Submit(const ChangeRequest& req, const MeasureOptions& opt) {
  if (req.kind != "change") return Status::Error("Submit records kind 'change' only");
  if (opt.min_rounds < 2 || opt.max_rounds < opt.min_rounds)
    return Status::Error("--min-rounds must be >= 2 and --max-rounds >= --min-rounds");
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  if (opt.progress) opt.progress("change " + std::to_string(id) + " recorded with prediction " +
                                 Pct(*req.predict_pct / 100.0));
  return Measure(id, req, "submit", std::nullopt, opt);
}

Result<Outcome> Ledger::Measure(int64_t change_id, const ChangeRequest& c, const std::string& purpose,
                                std::optional<int64_t> queue_id, const MeasureOptions& opt) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  const measure::Box box = measure::ThisBox();
  Db& d = *db_;
  int64_t box_id = 0, run_id = 0;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(box_id, EnsureBox(d, box));
    VERITY_ASSIGN_OR_RETURN(run_id, d.InsertSealed("runs", {{"change_id", change_id},
                                                            {"purpose", purpose},
                                                            {"box_id", box_id},
                                                            {"policy_version", int64_t{pol.version}},
                                                            {"min_rounds", int64_t{opt.min_rounds}},
                                                            {"max_rounds", int64_t{opt.max_rounds}},
                                                            {"queue_id", queue_id ? Value(*queue_id) : Value()},
                                                            {"started_at", NowUtc()}}));
    return OkStatus();
  }));
  Outcome o;
  o.change = change_id;
  o.run = run_id;
  auto fail = [&](const std::string& msg) -> Result<Outcome> {
    VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
      return d.InsertSealed("run_failures", {{"run_id", run_id}, {"message", msg}, {"failed_at", NowUtc()}}).status();
    }));
    o.verdict = "failed";
    o.note = msg;
    say("run " + std::to_string(run_id) + " failed: " + msg);
    return o;
  };
  auto record_score = [&]() -> Status { return InsertScore(d, run_id, pol.version, o); };
  auto score_without_speed = [&](const std::string& verdict, const std::string& note) -> Result<Outcome> {
    o.verdict = verdict;
    o.note = note;
    VERITY_RETURN_IF_ERROR(d.Transaction(record_score));
    return o;
  };

  // 1. The correctness gate. A failed gate means the head's speed is never measured.
  bool unverified = false;
  const bool is_revert = c.kind == "revert";
  if (is_revert) {
    if (!c.parity_cmd.empty()) {
      say("parity of current main: " + c.parity_cmd);
      VERITY_ASSIGN_OR_RETURN(auto po, RunParity(d, pol, run_id, "base", c.parity_cmd, false, opt.timeout_s));
      if (po.evidence && !po.passed)
        return score_without_speed("accepted", "parity evidence that main is wrong: " + po.message);
      say("  main passes parity (" + po.message + "); the revert needs speed evidence");
    }
  } else if (c.parity_cmd.empty()) {
    unverified = true;
    say("no parity command: the result is unverified and cannot move the frontier");
  } else {
    say("correctness gate: " + c.parity_cmd);
    VERITY_ASSIGN_OR_RETURN(auto po, RunParity(d, pol, run_id, "head", c.parity_cmd, false, opt.timeout_s));
    say("  " + po.message);
    if (!po.passed)
      return score_without_speed("rejected-parity", "parity gate failed: " + po.message +
                                                        "; the head's speed was never measured");
    if (c.claim_bit_identical) {
      if (c.base_parity_cmd.empty())
        return score_without_speed("rejected-parity",
                                   "bit identity claimed but no base parity command to byte-compare logits "
                                   "against; the head's speed was never measured");
      VERITY_ASSIGN_OR_RETURN(auto bp, RunParity(d, pol, run_id, "base", c.base_parity_cmd, false, opt.timeout_s));
      if (!bp.evidence || bp.evidence->logits_sha256 != po.evidence->logits_sha256)
        return score_without_speed(
            "rejected-parity", "bit identity claimed but logits differ: head " + po.evidence->logits_sha256.substr(0, 16) +
                                   " vs base " + (bp.evidence ? bp.evidence->logits_sha256.substr(0, 16) : "(none)") +
                                   "; the head's speed was never measured");
      say("  bit identity proved: logits sha256 " + po.evidence->logits_sha256.substr(0, 16) + " on both sides");
    }
  }

  // 2. Speed: a warm-up round (recorded, not scored), then ABBA rounds.
  struct Identity {
    std::string build, sha;
  };
  std::map<std::string, Identity> seen;
  auto take = [&](const std::string& side) -> Result<std::pair<double, double>> {
    const std::string& cmd = side == "base" ? c.base_cmd : c.head_cmd;
    measure::CommandOutput out = measure::RunCommand(cmd, opt.timeout_s);
    VERITY_ASSIGN_OR_RETURN(auto s, measure::ParseBench(out, c.metric, side + " bench command"));
    const std::string& want_build = side == "base" ? c.base_sha : c.head_sha;
    if (!want_build.empty() && s.build_id != want_build)
      return Status::Error(side + " binary reports build " + s.build_id + " but was built from " + want_build +
                           " (stale build: verify the artifact, not the transport)");
    auto it = seen.find(side);
    if (it == seen.end()) {
      seen[side] = {s.build_id, s.artifact_sha256};
      VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
        return d.InsertSealed("artifacts", {{"run_id", run_id},
                                            {"side", side},
                                            {"build_id", s.build_id},
                                            {"artifact_sha256", s.artifact_sha256}})
            .status();
      }));
    } else if (it->second.sha != s.artifact_sha256 || it->second.build != s.build_id) {
      return Status::Error(side + " artifact changed between rounds: " + it->second.sha.substr(0, 16) + " (" +
                           it->second.build + ") then " + s.artifact_sha256.substr(0, 16) + " (" + s.build_id + ")");
    }
    return std::make_pair(s.value, out.seconds);
  };
  struct Taken {
    std::string side;
    int ord;
    double value, seconds;
    std::string at;
  };
  auto record_round = [&](int round, const std::vector<Taken>& ts) {
    return d.Transaction([&]() -> Status {
      for (const auto& t : ts)
        VERITY_RETURN_IF_ERROR(d.InsertSealed("samples", {{"run_id", run_id},
                                                          {"round", int64_t{round}},
                                                          {"side", t.side},
                                                          {"ord", int64_t{t.ord}},
                                                          {"value", t.value},
                                                          {"seconds", t.seconds},
                                                          {"taken_at", t.at},
                                                          {"box_id", box_id}}));
      return OkStatus();
    });
  };
  auto run_round = [&](int round, const std::vector<std::string>& order) -> Result<std::vector<Taken>> {
    std::vector<Taken> ts;
    for (size_t i = 0; i < order.size(); i++) {
      std::string at = NowUtc();
      VERITY_ASSIGN_OR_RETURN(auto v, take(order[i]));
      ts.push_back({order[i], static_cast<int>(i), v.first, v.second, at});
    }
    VERITY_RETURN_IF_ERROR(record_round(round, ts));
    return ts;
  };

  VERITY_ASSIGN_OR_RETURN(FrontierNow f0, CurrentFrontier(d, c.metric, box_id));
  say("measuring on box " + box.fingerprint + ": warm-up, then " + std::to_string(opt.min_rounds) + ".." +
      std::to_string(opt.max_rounds) + " ABBA rounds");
  {
    auto warm = run_round(0, {"base", "head"});
    if (!warm.ok()) return fail(warm.status().message());
  }
  std::vector<double> diffs, base_vals, head_vals;
  Interval ci;
  const uint64_t seed = 0x5eedULL ^ static_cast<uint64_t>(run_id);
  for (int round = 1; round <= opt.max_rounds; round++) {
    auto ts = run_round(round, {"base", "head", "head", "base"});
    if (!ts.ok()) return fail(ts.status().message());
    const auto& t = ts.value();
    const double b = 0.5 * (t[0].value + t[3].value), h = 0.5 * (t[1].value + t[2].value);
    base_vals.push_back(t[0].value);
    base_vals.push_back(t[3].value);
    head_vals.push_back(t[1].value);
    head_vals.push_back(t[2].value);
    diffs.push_back(h - b);
    o.rounds = round;
    const double scale = f0.value ? *f0.value : Median(base_vals);
    const double gate = pol.gate_frac * scale;
    ci = BootstrapMedianCI(diffs, seed);
    char line[160];
    std::snprintf(line, sizeof line, "  round %2d/%d  base %.4g  head %.4g  diff %s  ci [%s, %s]", round,
                  opt.max_rounds, b, h, Pct((h - b) / scale).c_str(), Pct(ci.low / scale).c_str(),
                  Pct(ci.high / scale).c_str());
    say(line);
    if (round >= opt.min_rounds && ci.high - ci.low <= gate) break;  // tight relative to the gate
  }

  // 3. The score, against the frontier of this metric on this box.
  const double med = Median(diffs);
  o.base_median = Median(base_vals);
  o.head_median = Median(head_vals);
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(FrontierNow f, CurrentFrontier(d, c.metric, box_id));
    if (!f.value) {
      VERITY_ASSIGN_OR_RETURN(f.event, d.InsertSealed("frontier_events", {{"metric", c.metric},
                                                                         {"box_id", box_id},
                                                                         {"value", *o.base_median},
                                                                         {"run_id", run_id},
                                                                         {"reason", std::string("seed")},
                                                                         {"at", NowUtc()}}));
      f.value = *o.base_median;
      say("empty frontier for " + c.metric + " on this box: seeded from the base, " + Num(*f.value));
    }
    const double front = *f.value;
    o.frontier_before = front;
    o.gate = pol.gate_frac * front;
    o.gain = med / front;
    o.ci_low = ci.low / front;
    o.ci_high = ci.high / front;
    o.frontier_after = front;
    const bool significant = med >= *o.gate && ci.low > 0.0;
    const double ratio = *o.head_median / *o.base_median;
    if (c.predict_pct && !is_revert) o.surprise = pol.IsSurprise(*c.predict_pct / 100.0, *o.gain);
    auto move_frontier = [&](const std::string& reason) -> Status {
      o.frontier_after = front + med;
      VERITY_ASSIGN_OR_RETURN(int64_t ev, d.InsertSealed("frontier_events", {{"metric", c.metric},
                                                                             {"box_id", box_id},
                                                                             {"value", *o.frontier_after},
                                                                             {"run_id", run_id},
                                                                             {"reason", reason},
                                                                             {"at", NowUtc()}}));
      return QueueParked(ev, c.metric);
    };
    if (is_revert) {
      o.verdict = significant ? "accepted" : "refused";
      o.tier = significant ? pol.TierFor(*o.gain) : "none";
      o.note = significant ? "the change costs " + Pct(*o.gain) + " of the frontier (at least the gate)"
                           : "evidence too weak: removing the change gains " + Pct(*o.gain) + " (ci " +
                                 Pct(*o.ci_low) + ".." + Pct(*o.ci_high) + "), the gate is " + Pct(pol.gate_frac);
      if (significant) VERITY_RETURN_IF_ERROR(move_frontier("revert"));
    } else if (ratio > pol.ceiling_ratio) {
      o.verdict = "rejected-implausible";
      o.note = "head is " + Num(ratio) + "x the base, above the plausibility ceiling of " + Num(pol.ceiling_ratio) + "x";
    } else if (significant) {
      o.tier = pol.TierFor(*o.gain);
      if (unverified) {
        o.verdict = "unverified";
        o.note = "no parity evidence: recorded, cannot move the frontier";
      } else if (o.surprise) {
        o.verdict = "held-surprise";
        o.note = "measured " + Pct(*o.gain) + " vs predicted " + Pct(c.predict_pct.value_or(0) / 100.0) +
                 ": held until `verity confirm " + std::to_string(change_id) + "` passes deep parity";
      } else {
        o.verdict = "accepted";
        VERITY_RETURN_IF_ERROR(move_frontier("accepted"));
      }
    } else {
      o.verdict = "none";
      o.note = med < 0 && ci.high < 0 ? "slower than the base; parked" : "below the gate or not significant; parked";
    }
    if (o.surprise && o.verdict != "held-surprise") o.note += (o.note.empty() ? "" : "; ") + std::string("surprise vs prediction");
    return record_score();
  }));
  say("scored: " + o.verdict + (o.tier != "none" ? " (" + o.tier + ")" : ""));
  return o;
}

Result<Outcome> Ledger::Confirm(int64_t change_id, const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(ChangeRequest c, LoadChange(change_id));
  VERITY_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT s.run_id, s.verdict, s.tier, s.gain, s.ci_low, s.ci_high, "
                                                "s.frontier_before, s.base_median, s.head_median, s.rounds, r.box_id "
                                                "FROM scores s JOIN runs r ON s.run_id = r.id WHERE r.change_id = ? "
                                                "ORDER BY s.id DESC LIMIT 1",
                                                {change_id}));
  if (rows.empty() || AsText(rows[0][1]) != "held-surprise")
    return Status::Error("confirm: change " + std::to_string(change_id) + " is not held (latest verdict: " +
                         (rows.empty() ? std::string("none recorded") : AsText(rows[0][1])) + ")");
  const Row& h = rows[0];
  const int64_t run_id = AsInt(h[0]), box_id = AsInt(h[10]);
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  if (opt.progress) opt.progress("deep parity (VERITY_PARITY_MODE=deep): " + c.parity_cmd);
  VERITY_ASSIGN_OR_RETURN(auto po, RunParity(*db_, pol, run_id, "head", c.parity_cmd, true, opt.timeout_s));
  if (opt.progress) opt.progress("  " + po.message);
  Outcome o;
  o.change = change_id;
  o.run = run_id;
  o.tier = AsText(h[2]);
  o.gain = AsDouble(h[3]);
  o.ci_low = AsDouble(h[4]);
  o.ci_high = AsDouble(h[5]);
  o.base_median = AsDouble(h[7]);
  o.head_median = AsDouble(h[8]);
  o.rounds = static_cast<int>(AsInt(h[9]));
  o.surprise = true;
  const double med = *o.gain * AsDouble(h[6]);
  VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(FrontierNow f, CurrentFrontier(*db_, c.metric, box_id));
    o.frontier_before = f.value;
    o.gate = f.value ? std::optional<double>(pol.gate_frac * *f.value) : std::nullopt;
    o.frontier_after = f.value;
    if (!po.passed) {
      o.verdict = "rejected-parity";
      o.tier = "none";
      o.note = "deep parity failed on confirm: " + po.message;
    } else {
      o.verdict = "accepted";
      o.note = "confirmed by deep parity: " + po.message;
      o.frontier_after = f.value.value_or(*o.base_median) + med;
      VERITY_ASSIGN_OR_RETURN(int64_t ev, db_->InsertSealed("frontier_events", {{"metric", c.metric},
                                                                                {"box_id", box_id},
                                                                                {"value", *o.frontier_after},
                                                                                {"run_id", run_id},
                                                                                {"reason", std::string("confirmed")},
                                                                                {"at", NowUtc()}}));
      VERITY_RETURN_IF_ERROR(QueueParked(ev, c.metric));
    }
    return InsertScore(*db_, run_id, pol.version, o);
  }));
  return o;
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
  if (target.kind != "change") return Status::Error("revert: " + std::to_string(change_id) + " is a " + target.kind + ", not a change");
  if (req.reason.empty()) return Status::Error("revert: --reason is required");
  req.kind = "revert";
  req.target_change = change_id;
  req.metric = target.metric;
  if (req.title.empty()) req.title = "Revert \"" + target.title + "\"";
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  return Measure(id, req, "revert", std::nullopt, opt);
}

Result<Outcome> Ledger::Reapply(int64_t revert_id, ChangeRequest req, std::optional<int64_t> retract_run,
                                const MeasureOptions& opt) {
  VERITY_ASSIGN_OR_RETURN(ChangeRequest rev, LoadChange(revert_id));
  if (rev.kind != "revert") return Status::Error("reapply: " + std::to_string(revert_id) + " is not a revert");
  if (req.reason.empty()) return Status::Error("reapply: --reason is required (why the revert was wrong)");
  req.kind = "reapply";
  req.target_change = revert_id;
  req.metric = rev.metric;
  if (req.title.empty()) req.title = "Reapply (undo " + rev.title + ")";
  if (retract_run) {
    VERITY_ASSIGN_OR_RETURN(auto r, db_->Query("SELECT 1 FROM scores WHERE run_id = ? AND base_median IS NOT NULL "
                                               "AND run_id NOT IN (SELECT run_id FROM retractions)", {*retract_run}));
    if (r.empty()) return Status::Error("reapply: --retract " + std::to_string(*retract_run) +
                                        " is not a measured, unretracted run");
  }
  VERITY_ASSIGN_OR_RETURN(int64_t id, InsertChange(req));
  if (retract_run) VERITY_RETURN_IF_ERROR(Retract(*retract_run, "reapply " + std::to_string(id) + ": " + req.reason, std::nullopt, id));
  return Measure(id, req, "reapply", std::nullopt, opt);
}

}  // namespace verity::ledger
