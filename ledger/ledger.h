// The ledger: scores changes against the frontier and keeps every number.
//
// One SQLite file, schema from the embedded migrations, append-only tables,
// every row sealed into a SHA-256 chain. A submission is recorded step by
// step, each step committed before the next begins: the change and its
// prediction; the run; the correctness gate; (only if it passed) interleaved
// ABBA speed samples with artifact identity; the score.
#pragma once

#include <climits>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/db.h"
#include "ledger/policy.h"

namespace verity::ledger {

struct ChangeRequest {
  std::string kind = "change";  // change | revert | reapply
  std::string title;
  std::string author = "unknown";
  std::optional<double> claim_pct;    // percent, as given
  std::optional<double> predict_pct;  // percent; required for kind == change
  bool claim_bit_identical = false;
  std::string metric = "decode_tok_s";
  std::string base_cmd, head_cmd;     // bench-protocol commands, run with sh -c
  std::string parity_cmd;             // parity-protocol command for the head ("" = unverified)
  std::string base_parity_cmd;        // needed when bit identity is claimed
  std::string base_ref, head_ref, base_sha, head_sha;  // ref submissions only
  std::optional<int64_t> target_change;  // revert: the change; reapply: the revert
  std::string reason;
};

struct MeasureOptions {
  int min_rounds = 5;
  int max_rounds = 20;
  int timeout_s = 600;  // per command run
  std::function<void(const std::string&)> progress;  // one line per event, may be empty
};

// The result of one measured attempt (a run).
struct Outcome {
  int64_t change = 0, run = 0;
  std::string verdict;  // accepted | none | rejected-parity | rejected-implausible | held-surprise |
                        // unverified | refused (reverts) | failed
  std::string tier = "none";
  std::optional<double> gain, ci_low, ci_high;  // fractions of frontier_before
  std::optional<double> gate, frontier_before, frontier_after, base_median, head_median;
  int rounds = 0;
  bool surprise = false;
  std::string note;
  nlohmann::json ToJson() const;
  // Returns true iff the scoring completed (whatever the verdict).
  bool completed() const { return verdict != "failed"; }
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;
  std::string first_broken;  // "table#row: why" when !ok
};

class Ledger {
 public:
  // Opens or creates the ledger, applying pending migrations up to
  // `up_to_version` (tests stop early to build an old database). Refuses a
  // ledger written by a newer schema or whose applied migrations differ.
  static Result<std::unique_ptr<Ledger>> Open(const std::string& path, int up_to_version = INT_MAX);

  int schema_version() const { return schema_version_; }
  int migrations_applied_now() const { return applied_now_; }
  Result<Policy> CurrentPolicy();

  // Records and scores a change (kind "change"). Refused without a prediction.
  Result<Outcome> Submit(const ChangeRequest& req, const MeasureOptions& opt);
  // Re-runs the parity command of a held-surprise change in deep mode and banks it if it passes.
  Result<Outcome> Confirm(int64_t change_id, const MeasureOptions& opt);
  // Re-measures every queued parked change against the current frontier.
  Result<std::vector<Outcome>> Remeasure(const MeasureOptions& opt);
  // base = main, head = main without the change. Accepted only on evidence.
  Result<Outcome> Revert(int64_t change_id, ChangeRequest req, const MeasureOptions& opt);
  // Reapplies a reverted change, recording why the revert was wrong.
  Result<Outcome> Reapply(int64_t revert_id, ChangeRequest req, std::optional<int64_t> retract_run,
                          const MeasureOptions& opt);
  // Retracts a run's numbers (kept, marked, removed from the frontier).
  Status Retract(int64_t run, const std::string& reason, std::optional<int64_t> replaced_by,
                 std::optional<int64_t> by_change = std::nullopt);

  Result<nlohmann::json> Show(int64_t change_id);
  Result<nlohmann::json> Frontier();
  // what: reverts | retractions | none | all
  Result<nlohmann::json> History(const std::string& what);
  Result<VerifyReport> Verify();

  Db& db() { return *db_; }

 private:
  explicit Ledger(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Status Migrate(int up_to_version);
  Status InstallPolicy();
  Result<int64_t> InsertChange(const ChangeRequest& req);
  Result<ChangeRequest> LoadChange(int64_t change_id);
  Result<Outcome> Measure(int64_t change_id, const ChangeRequest& c, const std::string& purpose,
                          std::optional<int64_t> queue_id, const MeasureOptions& opt);
  Status QueueParked(int64_t frontier_event, const std::string& metric);

  std::unique_ptr<Db> db_;
  int schema_version_ = 0;
  int applied_now_ = 0;
};

// The tables whose rows are sealed (everything but the chain and migrations).
const std::vector<std::string>& SealedTables();
// Current UTC time, ISO 8601 with milliseconds.
std::string NowUtc();

}  // namespace verity::ledger
