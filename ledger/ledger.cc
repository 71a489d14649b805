// Opening the ledger (migrations, policy), seals verification, retractions.
#include "ledger/ledger.h"

#include <chrono>
#include <ctime>
#include <set>

#include "base/sha256.h"
#include "ledger/format.h"
#include "ledger/migrations.h"

namespace verity::ledger {

const std::vector<std::string>& SealedTables() {
  static const std::vector<std::string> kTables = {
      "policy", "boxes", "changes", "runs", "artifacts", "parity_results", "samples", "scores", "run_failures",
      "frontier_events", "remeasure_queue", "retractions",
      // schema 3 (policy v2, derived ladder, guards)
      "policy_rules", "frontier_moves", "metric_samples", "score_stats", "score_guards", "accepted_regressions",
      // schema 5 (a frontier per workload)
      "run_workloads", "frontier_event_workloads",
      // schema 7 (box noise profiles)
      "box_noise",
      // schema 8 (triage)
      "triage",
      // schema 9 (bisect sessions and their runs of purpose 'bisect')
      "bisect_sessions", "bisect_runs", "bisect_parity", "bisect_samples", "bisect_steps", "bisect_results",
      // schema 10 (policy v3: guard floors)
      "policy_guard_floors", "score_guard_floors",
      // schema 11 (policy v4: identity-based counting)
      "policy_counting", "reapply_retractions",
      // schema 12 (the explicit start of keyed seals on a plain ledger)
      "seal_keyings",
      // schema 13 (inputs pinned down: declared reference dtypes, the box lock a run held)
      "change_reference_dtypes", "run_box_locks",
      // schema 14 (policy v5: a floor per parity kind)
      "policy_parity_kinds"};
  return kTables;
}

std::string NowUtc() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

nlohmann::json Outcome::ToJson() const {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"change", change},
                      {"run", run},
                      {"verdict", VerdictName(verdict)},
                      {"tier", TierName(tier)},
                      {"gain", opt(gain)},
                      {"ci", ci_low ? nlohmann::json::array({*ci_low, *ci_high}) : nlohmann::json(nullptr)},
                      {"gate", opt(gate)},
                      {"frontier_before", opt(frontier_before)},
                      {"frontier_after", opt(frontier_after)},
                      {"base_median", opt(base_median)},
                      {"head_median", opt(head_median)},
                      {"rounds", rounds},
                      {"attempt", attempt},
                      {"alpha", opt(alpha)},
                      {"guards", guards},
                      {"surprise", surprise},
                      {"note", note}};
  return j;
}

Result<std::unique_ptr<Ledger>> Ledger::Open(const std::string& path, int up_to_version) {
  VERITY_ASSIGN_OR_RETURN(auto db, Db::Open(path));
  std::unique_ptr<Ledger> l(new Ledger(std::move(db)));
  VERITY_RETURN_IF_ERROR(l->Migrate(up_to_version));
  VERITY_RETURN_IF_ERROR(l->InstallPolicy());
  return l;
}

Result<Ledger::Keying> Ledger::StartKeying(const std::string& path, const std::string& by, const std::string& reason) {
  if (by.empty() || reason.empty()) return Status::Error("ledger start-keying: --by and --reason are required");
  VERITY_ASSIGN_OR_RETURN(auto db, Db::Open(path));
  if (db->seal_key().empty())
    return Status::Error("ledger start-keying: set VERITY_LEDGER_KEY to the key that seals " + path + " from now on");
  std::unique_ptr<Ledger> l(new Ledger(std::move(db)));
  VERITY_RETURN_IF_ERROR(l->Migrate(INT_MAX));  // seal_keyings; migrations seal nothing
  VERITY_ASSIGN_OR_RETURN(const VerifyReport r, l->Verify(""));
  if (r.ok)
    return Status::Error(path + ": nothing to start: " +
                         (r.plain_records == 0 ? std::string("every seal is keyed already")
                                               : "keying already started (a keyed seal_keyings record names the " +
                                                     std::to_string(r.plain_records) + " plain records)"));
  if (!r.needs_keying)
    return Status::Error(path + ": ledger verify FAILs: " + r.first_broken +
                         "; refusing to key a ledger that does not verify");
  Db& d = *l->db_;
  Keying k{r.plain_records, r.plain_tip, ""};
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    // Re-read under the write lock: another writer may have sealed since.
    VERITY_ASSIGN_OR_RETURN(auto now,
                            d.Query("SELECT count(*), (SELECT seal FROM seal_chain ORDER BY seq DESC LIMIT 1) "
                                    "FROM seal_chain"));
    if (AsInt(now[0][0]) != r.records || AsText(now[0][1]) != r.tip)
      return Status::Error(path + ": the chain grew while it was being verified; run `ledger start-keying` again");
    d.set_starting_keying(true);
    auto id = d.InsertSealed("seal_keyings", {{"plain_records", k.plain_records},
                                              {"plain_tip", k.plain_tip},
                                              {"by", by},
                                              {"reason", reason},
                                              {"keyed_at", NowUtc()}});
    d.set_starting_keying(false);
    return id.status();
  }));
  VERITY_ASSIGN_OR_RETURN(k.seal, l->Tip());
  VERITY_RETURN_IF_ERROR(l->InstallPolicy());  // a policy this ledger lacked is sealed with the key now
  return k;
}

Status Ledger::Migrate(int up_to_version) {
  Db& d = *db_;
  VERITY_ASSIGN_OR_RETURN(const bool has_migrations, d.HasTable("schema_migrations"));
  // Created under the write lock: boxes opening one new PostgreSQL ledger at
  // once would otherwise race to create it.
  if (!has_migrations)
    VERITY_RETURN_IF_ERROR(d.Transaction([&] {
      return d.Exec(
          "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
          "sha256 TEXT NOT NULL, applied_at TEXT NOT NULL)");
    }));
  const auto& all = EmbeddedMigrations();
  VERITY_ASSIGN_OR_RETURN(auto applied,
                          d.Query("SELECT version, name, sha256 FROM schema_migrations ORDER BY version"));
  const int known = all.empty() ? 0 : all.back().version;
  for (const auto& row : applied) {
    const int v = static_cast<int>(AsInt(row[0]));
    if (v > known)
      return Status::Error(d.path() + ": ledger schema version " + std::to_string(v) + " (" + AsText(row[1]) +
                           ", in schema_migrations) is newer than this verity knows (" + std::to_string(known) +
                           "); use a newer verity, this one will not write to it");
    if (!FindMigration(v))
      return Status::Error(d.path() + ": schema_migrations holds version " + std::to_string(v) + " (" + AsText(row[1]) +
                           "), which is no migration this verity knows: the migration table was "
                           "edited; `verity ledger verify` names what else differs");
    for (const auto& m : all)
      if (m.version == v && Sha256Hex(m.sql) != AsText(row[2]))
        return Status::Error(d.path() + ": applied migration " + AsText(row[1]) +
                             " differs from the one built into this verity (sha256 mismatch)");
    schema_version_ = std::max(schema_version_, v);
  }
  for (const auto& m : all) {
    if (m.version <= schema_version_ || m.version > up_to_version) continue;
    // Re-check inside the write lock: another process may have just applied it.
    bool applied_here = false;
    VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(auto have,
                              d.Query("SELECT 1 FROM schema_migrations WHERE version = ?", {int64_t{m.version}}));
      if (!have.empty()) return OkStatus();
      VERITY_RETURN_IF_ERROR(d.Exec(m.sql));
      VERITY_RETURN_IF_ERROR(d.Query("INSERT INTO schema_migrations VALUES (?, ?, ?, ?)",
                                     {int64_t{m.version}, std::string(m.name), Sha256Hex(m.sql), NowUtc()}));
      applied_here = true;
      return OkStatus();
    }));
    schema_version_ = m.version;
    applied_now_ += applied_here ? 1 : 0;
  }
  return OkStatus();
}

namespace {
// The schema that first holds what a policy version records.
int SchemaFor(const Policy& p) {
  if (!p.parity_floors.empty()) return 14;  // policy_parity_kinds
  if (!p.step_rule.empty()) return 11;      // policy_counting
  if (!p.guard_floors.empty()) return 10;   // policy_guard_floors
  return p.look_every != 0 ? 3 : 1;         // policy_rules
}

Status InsertPolicyRules(Db& d, const Policy& p, const std::string& now) {
  if (p.look_every == 0) return OkStatus();  // v1 has no rules row
  VERITY_RETURN_IF_ERROR(d.InsertSealed("policy_rules", {{"version", int64_t{p.version}},
                                                         {"min_rounds", int64_t{p.min_rounds}},
                                                         {"max_rounds", int64_t{p.max_rounds}},
                                                         {"look_every", int64_t{p.look_every}},
                                                         {"alpha", p.alpha},
                                                         {"parity_min_depths", int64_t{p.parity_min_depths}},
                                                         {"parity_min_positions", int64_t{p.parity_min_positions}},
                                                         {"deep_factor", p.deep_factor},
                                                         {"gain_rule", p.gain_rule},
                                                         {"created_at", now}})
                             .status());
  for (const GuardFloor& f : p.guard_floors)
    VERITY_RETURN_IF_ERROR(
        d.InsertSealed("policy_guard_floors",
                       {{"version", int64_t{p.version}}, {"suffix", f.suffix}, {"amount", f.amount}, {"unit", f.unit}})
            .status());
  if (p.step_rule.empty()) return OkStatus();
  VERITY_RETURN_IF_ERROR(
      d.InsertSealed("policy_counting",
                     {{"version", int64_t{p.version}}, {"step_rule", p.step_rule}, {"budget_rule", p.budget_rule}})
          .status());
  for (const ParityFloor& f : p.parity_floors)
    VERITY_RETURN_IF_ERROR(d.InsertSealed("policy_parity_kinds", {{"version", int64_t{p.version}},
                                                                  {"kind", f.kind},
                                                                  {"min_depths", int64_t{f.min_depths}},
                                                                  {"min_positions", int64_t{f.min_positions}},
                                                                  {"min_bytes", int64_t{f.min_bytes}},
                                                                  {"rule", f.rule}})
                               .status());
  return OkStatus();
}
}  // namespace

Status Ledger::InstallPolicy() {
  // Every version this verity knows is recorded once, in order; the newest scores.
  for (const Policy& p : {PolicyV1(), PolicyV2(), PolicyV3(), PolicyV4(), PolicyV5(), PolicyV6()}) {
    if (schema_version_ < SchemaFor(p)) continue;  // a test stopped the schema early
    VERITY_RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(auto have, db_->Query("SELECT 1 FROM policy WHERE version = ?", {int64_t{p.version}}));
      if (!have.empty()) return OkStatus();
      nlohmann::json tiers = nlohmann::json::array();
      for (const auto& [tier, lower] : p.tiers) tiers.push_back({TierName(tier), lower});
      const std::string now = NowUtc();
      VERITY_RETURN_IF_ERROR(db_->InsertSealed("policy", {{"version", int64_t{p.version}},
                                                          {"gate_frac", p.gate_frac},
                                                          {"tiers", tiers.dump()},
                                                          {"ceiling_ratio", p.ceiling_ratio},
                                                          {"parity_min_top1", p.parity_min_top1},
                                                          {"parity_max_mean_kl", p.parity_max_mean_kl},
                                                          {"surprise_factor", p.surprise_factor},
                                                          {"created_at", now}})
                                 .status());
      return InsertPolicyRules(*db_, p, now);
    }));
  }
  return OkStatus();
}

Result<std::vector<GuardFloor>> LoadGuardFloors(Db& d, int version) {
  VERITY_ASSIGN_OR_RETURN(const bool has_table, d.HasTable("policy_guard_floors"));
  std::vector<GuardFloor> out;
  if (!has_table) return out;
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT suffix, amount, unit FROM policy_guard_floors WHERE version = ? "
                                             "ORDER BY id",
                                             {int64_t{version}}));
  for (const auto& r : rows) {
    GuardFloor f{AsText(r[0]), AsDouble(r[1]), AsText(r[2])};
    if (f.suffix.empty() || !(f.amount >= 0.0))
      return Status::Error(d.path() + ": policy v" + std::to_string(version) + " states an unusable guard floor '" +
                           f.suffix + "' = " + NumText(f.amount, 6));
    out.push_back(std::move(f));
  }
  return out;
}

// The counting rules policy `p->version` states (policy_counting, v4 on), read
// back into *p (declared where it is used, in read_model.cc).
Status LoadCountingRules(Db& d, Policy* p) {
  VERITY_ASSIGN_OR_RETURN(const bool has_table, d.HasTable("policy_counting"));
  if (!has_table) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT step_rule, budget_rule FROM policy_counting WHERE version = ?",
                                             {int64_t{p->version}}));
  if (rows.empty()) return OkStatus();
  p->step_rule = AsText(rows[0][0]);
  p->budget_rule = AsText(rows[0][1]);
  return OkStatus();
}

// The parity kinds' floors policy `p->version` states (policy_parity_kinds,
// v5 on), read back into *p (declared where it is used, in read_model.cc).
Status LoadParityFloors(Db& d, Policy* p) {
  VERITY_ASSIGN_OR_RETURN(const bool has_table, d.HasTable("policy_parity_kinds"));
  if (!has_table) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT kind, min_depths, min_positions, min_bytes, rule FROM "
                                             "policy_parity_kinds WHERE version = ? ORDER BY id",
                                             {int64_t{p->version}}));
  for (const auto& r : rows) {
    ParityFloor f{AsText(r[0]), static_cast<int>(AsInt(r[1])), static_cast<int>(AsInt(r[2])), AsInt(r[3]),
                  AsText(r[4])};
    if (f.kind.empty() || f.min_depths < 0 || f.min_positions < 0 || f.min_bytes < 0 ||
        (f.min_depths == 0 && f.min_bytes == 0))
      return Status::Error(d.path() + ": policy v" + std::to_string(p->version) +
                           " states an unusable parity floor for '" + f.kind + "'");
    p->parity_floors.push_back(std::move(f));
  }
  return OkStatus();
}

Result<Policy> Ledger::CurrentPolicy() {
  VERITY_ASSIGN_OR_RETURN(
      auto rows,
      db_->Query("SELECT p.version, p.gate_frac, p.tiers, p.ceiling_ratio, p.parity_min_top1, "
                 "p.parity_max_mean_kl, p.surprise_factor, r.min_rounds, r.max_rounds, r.look_every, "
                 "r.alpha, r.parity_min_depths, r.parity_min_positions, r.deep_factor, r.gain_rule "
                 "FROM policy p JOIN policy_rules r ON r.version = p.version ORDER BY p.version DESC LIMIT 1"));
  if (rows.empty()) return Status::Error(db_->path() + ": no policy with rules recorded");
  const Row& r = rows[0];
  Policy p;
  p.version = static_cast<int>(AsInt(r[0]));
  p.gate_frac = AsDouble(r[1]);
  try {
    for (const auto& t : nlohmann::json::parse(AsText(r[2]))) {
      auto tier = TierFromName(t[0].get<std::string>());
      if (!tier)
        return Status::Error(db_->path() + ": policy v" + std::to_string(p.version) + " names an unknown tier");
      p.tiers.emplace_back(*tier, t[1].get<double>());
    }
  } catch (const std::exception&) {
    return Status::Error(db_->path() + ": policy v" + std::to_string(p.version) + " tiers are unreadable");
  }
  p.ceiling_ratio = AsDouble(r[3]);
  p.parity_min_top1 = AsDouble(r[4]);
  p.parity_max_mean_kl = AsDouble(r[5]);
  p.surprise_factor = AsDouble(r[6]);
  p.min_rounds = static_cast<int>(AsInt(r[7]));
  p.max_rounds = static_cast<int>(AsInt(r[8]));
  p.look_every = static_cast<int>(AsInt(r[9]));
  p.alpha = AsDouble(r[10]);
  p.parity_min_depths = static_cast<int>(AsInt(r[11]));
  p.parity_min_positions = static_cast<int>(AsInt(r[12]));
  p.deep_factor = AsDouble(r[13]);
  p.gain_rule = AsText(r[14]);
  VERITY_ASSIGN_OR_RETURN(p.guard_floors, LoadGuardFloors(*db_, p.version));
  VERITY_RETURN_IF_ERROR(LoadCountingRules(*db_, &p));
  VERITY_RETURN_IF_ERROR(LoadParityFloors(*db_, &p));
  return p;
}

Status Ledger::Retract(int64_t run, const std::string& reason, std::optional<int64_t> replaced_by,
                       std::optional<int64_t> by_change) {
  return db_->Transaction([&]() -> Status { return RetractInTransaction(run, reason, replaced_by, by_change); });
}

Status Ledger::RetractInTransaction(int64_t run, const std::string& reason, std::optional<int64_t> replaced_by,
                                    std::optional<int64_t> by_change) {
  if (reason.empty()) return Status::Error("retract: a reason is required (what produced the wrong number)");
  // A run counts if it measured a number or moved the frontier (a revert on parity evidence).
  VERITY_ASSIGN_OR_RETURN(auto r, db_->Query("SELECT 1 FROM scores WHERE run_id = ? AND base_median IS NOT NULL UNION "
                                             "SELECT 1 FROM frontier_events WHERE run_id = ?",
                                             {run, run}));
  if (r.empty())
    return Status::Error("retract: run " + std::to_string(run) + " has no measured number and moved no frontier");
  VERITY_ASSIGN_OR_RETURN(auto dup, db_->Query("SELECT id FROM retractions WHERE run_id = ?", {run}));
  if (!dup.empty()) return Status::Error("retract: run " + std::to_string(run) + " is already retracted");
  if (replaced_by) {
    VERITY_ASSIGN_OR_RETURN(auto rb, db_->Query("SELECT 1 FROM runs WHERE id = ?", {*replaced_by}));
    if (rb.empty()) return Status::Error("retract: replacing run " + std::to_string(*replaced_by) + " does not exist");
  }
  return db_
      ->InsertSealed("retractions", {{"run_id", run},
                                     {"reason", reason},
                                     {"replaced_by_run", replaced_by ? Value(*replaced_by) : Value()},
                                     {"by_change", by_change ? Value(*by_change) : Value()},
                                     {"retracted_at", NowUtc()}})
      .status();
}

}  // namespace verity::ledger
