// Maintainers' queries: show one change, the frontier, the history of reverts,
// retractions and parked changes. Read-only; every answer is JSON.
#include "ledger/frontier.h"
#include "ledger/ledger.h"

namespace verity::ledger {
namespace {

nlohmann::json Cell(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return nullptr;
  if (auto* n = std::get_if<int64_t>(&v)) return *n;
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

// Rows as JSON objects keyed by the given column names.
nlohmann::json Objects(const std::vector<Row>& rows, const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o;
    for (size_t i = 0; i < names.size() && i < r.size(); i++) o[names[i]] = Cell(r[i]);
    out.push_back(o);
  }
  return out;
}

const char* kChangeCols =
    "id, kind, title, author, claim_pct, predict_pct, claim_bit_identical, metric, base_cmd, head_cmd, parity_cmd, "
    "base_ref, head_ref, base_sha, head_sha, target_change, reason, created_at";
const std::vector<std::string> kChangeNames = {
    "id",       "kind",       "title",    "author",   "claim_pct", "predict_pct", "claim_bit_identical",
    "metric",   "base_cmd",   "head_cmd", "parity_cmd", "base_ref", "head_ref",   "base_sha",
    "head_sha", "target_change", "reason", "created_at"};
const char* kScoreCols =
    "id, verdict, tier, gain, ci_low, ci_high, gate, frontier_before, frontier_after, base_median, head_median, "
    "rounds, surprise, policy_version, note, scored_at";
const std::vector<std::string> kScoreNames = {
    "id",          "verdict",     "tier",   "gain",     "ci_low",         "ci_high", "gate", "frontier_before",
    "frontier_after", "base_median", "head_median", "rounds", "surprise", "policy_version", "note", "scored_at"};

}  // namespace

Result<nlohmann::json> Ledger::Show(int64_t change_id) {
  Db& d = *db_;
  VERITY_ASSIGN_OR_RETURN(auto ch, d.Query(std::string("SELECT ") + kChangeCols + " FROM changes WHERE id = ?", {change_id}));
  if (ch.empty()) return Status::Error("show: change " + std::to_string(change_id) + " does not exist in " + d.path());
  nlohmann::json j;
  j["change"] = Objects(ch, kChangeNames)[0];
  VERITY_ASSIGN_OR_RETURN(auto runs, d.Query("SELECT r.id, r.purpose, r.started_at, b.fingerprint, r.queue_id, "
                                             "r.min_rounds, r.max_rounds FROM runs r JOIN boxes b ON b.id = r.box_id "
                                             "WHERE r.change_id = ? ORDER BY r.id",
                                             {change_id}));
  j["runs"] = nlohmann::json::array();
  std::string state = "unscored";
  for (const auto& r : runs) {
    const int64_t run = AsInt(r[0]);
    nlohmann::json jr = Objects({r}, {"run", "purpose", "started_at", "box", "queue_id", "min_rounds", "max_rounds"})[0];
    VERITY_ASSIGN_OR_RETURN(auto arts, d.Query("SELECT side, build_id, artifact_sha256 FROM artifacts WHERE run_id = ? ORDER BY id", {run}));
    jr["artifacts"] = Objects(arts, {"side", "build_id", "artifact_sha256"});
    VERITY_ASSIGN_OR_RETURN(auto par, d.Query("SELECT side, mode, exit_code, passed, worst_top1, worst_mean_kl, logits_sha256, "
                                              "message FROM parity_results WHERE run_id = ? ORDER BY id",
                                              {run}));
    jr["parity"] = Objects(par, {"side", "mode", "exit_code", "passed", "worst_top1", "worst_mean_kl", "logits_sha256", "message"});
    VERITY_ASSIGN_OR_RETURN(auto cnt, d.Query("SELECT count(*), sum(round = 0), max(round) FROM samples WHERE run_id = ?", {run}));
    jr["samples"] = AsInt(cnt[0][0]);
    jr["warmup_samples"] = AsInt(cnt[0][1]);
    VERITY_ASSIGN_OR_RETURN(auto sc, d.Query(std::string("SELECT ") + kScoreCols + " FROM scores WHERE run_id = ? ORDER BY id", {run}));
    jr["scores"] = Objects(sc, kScoreNames);
    VERITY_ASSIGN_OR_RETURN(auto fl, d.Query("SELECT message, failed_at FROM run_failures WHERE run_id = ?", {run}));
    VERITY_ASSIGN_OR_RETURN(auto rt, d.Query("SELECT reason, replaced_by_run, by_change, retracted_at FROM retractions WHERE run_id = ?", {run}));
    jr["retraction"] = rt.empty() ? nlohmann::json(nullptr) : Objects(rt, {"reason", "replaced_by_run", "by_change", "retracted_at"})[0];
    if (!sc.empty()) {
      jr["status"] = "complete";
      state = AsText(sc.back()[1]);
    } else if (!fl.empty()) {
      jr["status"] = "failed";
      jr["failure"] = AsText(fl[0][0]);
      state = "failed";
    } else {
      jr["status"] = "incomplete";  // killed or still running
      state = "incomplete";
    }
    j["runs"].push_back(jr);
  }
  j["state"] = state;
  VERITY_ASSIGN_OR_RETURN(auto rel, d.Query("SELECT id, kind, title, reason FROM changes WHERE target_change = ? ORDER BY id", {change_id}));
  j["related"] = Objects(rel, {"id", "kind", "title", "reason"});
  return j;
}

Result<nlohmann::json> Ledger::Frontier() {
  Db& d = *db_;
  VERITY_ASSIGN_OR_RETURN(auto keys, d.Query("SELECT DISTINCT f.metric, f.box_id, b.fingerprint FROM frontier_events f "
                                             "JOIN boxes b ON b.id = f.box_id ORDER BY f.metric, f.box_id"));
  VERITY_ASSIGN_OR_RETURN(Policy pol, CurrentPolicy());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : keys) {
    // The frontier is derived from the non-retracted events, never read from one row.
    VERITY_ASSIGN_OR_RETURN(Ladder ladder, LoadLadder(d, AsText(k[0]), AsInt(k[1])));
    if (!ladder.value) continue;
    const LadderStep* last = nullptr;
    for (const auto& s : ladder.steps)
      if (s.event.event_id == ladder.last_event) last = &s;
    nlohmann::json e = {{"metric", AsText(k[0])},
                        {"box", AsText(k[2])},
                        {"value", *ladder.value},
                        {"gate", pol.gate_frac * *ladder.value},
                        {"policy_version", pol.version},
                        {"event", last->event.event_id},
                        {"run", last->event.run_id},
                        {"change", last->event.change_id},
                        {"reason", last->event.reason},
                        {"at", last->event.at},
                        {"counted_events", 0}};
    int counted = 0;
    for (const auto& s : ladder.steps) counted += s.counted;
    e["counted_events"] = counted;
    out.push_back(e);
  }
  return nlohmann::json{{"frontier", out}};
}

Result<nlohmann::json> Ledger::History(const std::string& what) {
  Db& d = *db_;
  if (what != "reverts" && what != "retractions" && what != "none" && what != "all")
    return Status::Error("history: unknown kind '" + what + "' (expected reverts, retractions, none or all)");
  nlohmann::json j;
  const std::string latest =
      "(SELECT s.verdict FROM scores s JOIN runs r ON s.run_id = r.id WHERE r.change_id = c.id ORDER BY s.id DESC LIMIT 1)";
  if (what == "reverts" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT c.id, c.kind, c.title, c.target_change, c.reason, c.created_at, " + latest +
                           ", (SELECT min(x.id) FROM changes x WHERE x.kind = 'reapply' AND x.target_change = c.id) "
                           "FROM changes c WHERE c.kind IN ('revert', 'reapply') ORDER BY c.id"));
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json e = Objects({r}, {"id", "kind", "title", "target", "reason", "created_at", "verdict"})[0];
      if (AsText(r[1]) == "revert") {
        e["found_wrong"] = !IsNull(r[7]);
        e["reapplied_by"] = Cell(r[7]);
      }
      VERITY_ASSIGN_OR_RETURN(auto runs, d.Query("SELECT id FROM runs WHERE change_id = ? ORDER BY id", {AsInt(r[0])}));
      nlohmann::json ids = nlohmann::json::array();
      for (const auto& x : runs) ids.push_back(AsInt(x[0]));
      e["runs"] = ids;
      list.push_back(e);
    }
    j["reverts"] = list;
  }
  if (what == "retractions" || what == "all") {
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT t.id, t.run_id, r.change_id, c.title, t.reason, t.replaced_by_run, t.by_change, "
                           "t.retracted_at, s.verdict, s.gain, s.base_median, s.head_median FROM retractions t "
                           "JOIN runs r ON r.id = t.run_id JOIN changes c ON c.id = r.change_id "
                           "LEFT JOIN scores s ON s.id = (SELECT max(id) FROM scores WHERE run_id = t.run_id) ORDER BY t.id"));
    j["retractions"] = Objects(rows, {"id", "run", "change", "title", "reason", "replaced_by_run", "by_change",
                                      "retracted_at", "verdict", "gain", "base_median", "head_median"});
  }
  if (what == "none" || what == "all") {
    // Every change ever parked, with each attempt and the frontier it faced.
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT DISTINCT c.id, c.title FROM changes c JOIN runs r ON r.change_id = c.id JOIN scores s "
                           "ON s.run_id = r.id WHERE s.verdict = 'none' AND c.kind = 'change' ORDER BY c.id"));
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json e = {{"id", Cell(r[0])}, {"title", Cell(r[1])}};
      VERITY_ASSIGN_OR_RETURN(auto att, d.Query("SELECT r.id, r.purpose, s.verdict, s.tier, s.gain, s.frontier_before, s.scored_at "
                                                "FROM runs r JOIN scores s ON s.run_id = r.id WHERE r.change_id = ? ORDER BY s.id",
                                                {AsInt(r[0])}));
      e["attempts"] = Objects(att, {"run", "purpose", "verdict", "tier", "gain", "frontier_before", "scored_at"});
      VERITY_ASSIGN_OR_RETURN(std::vector<Row> q, d.Query("SELECT count(*) FROM remeasure_queue q WHERE q.change_id = ? AND NOT "
                                                          "EXISTS (SELECT 1 FROM runs r JOIN scores s ON s.run_id = r.id "
                                                          "WHERE r.queue_id = q.id)",
                                                          {AsInt(r[0])}));
      e["queued"] = AsInt(q[0][0]) > 0;
      list.push_back(e);
    }
    j["none"] = list;
  }
  if (what == "all") {
    VERITY_ASSIGN_OR_RETURN(
        auto rows, d.Query("SELECT s.scored_at, c.id, c.kind, c.title, r.id, r.purpose, s.verdict, s.tier, s.gain, "
                           "s.frontier_before, s.frontier_after FROM scores s JOIN runs r ON r.id = s.run_id JOIN changes c "
                           "ON c.id = r.change_id ORDER BY s.id"));
    j["timeline"] = Objects(rows, {"at", "change", "kind", "title", "run", "purpose", "verdict", "tier", "gain",
                                   "frontier_before", "frontier_after"});
  }
  return j;
}

}  // namespace verity::ledger
