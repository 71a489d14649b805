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
#include "ledger/frontier.h"
#include "ledger/policy.h"
#include "ledger/score.h"
#include "measure/measure.h"

namespace verity::ledger {

struct ChangeRequest {
  std::string kind = "change";  // change | revert | reapply
  std::string title;
  std::string author = "unknown";
  std::optional<double> claim_pct;    // percent, as given
  std::optional<double> predict_pct;  // percent; required for kind == change
  bool claim_bit_identical = false;
  std::string metric = "decode_tok_s";
  std::string base_cmd, head_cmd;                      // bench-protocol commands, run with sh -c
  std::string parity_cmd;                              // parity-protocol command for the head ("" = unverified)
  std::string base_parity_cmd;                         // needed when bit identity is claimed
  std::string base_ref, head_ref, base_sha, head_sha;  // ref submissions only
  std::optional<int64_t> target_change;                // revert: the change; reapply: the revert
  std::string reason;
  std::vector<std::string> accept_regressions;  // guard metrics the submitter declares may regress
  // Metrics every bench record must carry (a project config's workload
  // guards): a sample without one fails, naming it. Not recorded: a
  // re-measurement checks the guards its records carry.
  std::vector<std::string> required_guards;
  // Parity evidence of this dtype may stand for the bench workload's own
  // (--reference-dtype; recorded). "": the evidence's dtype must be the workload's.
  std::string reference_dtype;
};

// "" when `dtype` can name a dtype (letters, digits, '_'), else why not.
std::string DtypeNameError(const std::string& dtype);

struct MeasureOptions {
  int min_rounds = 0;                                // 0 = the policy's floor; a request below the floor is refused
  int max_rounds = 0;                                // 0 = the policy's
  int timeout_s = 600;                               // per command run
  std::string lock_dir = "/tmp";                     // where the per-box measurement lock lives
  std::string cache_dir;                             // where `verity roofline` cached this box's bandwidth ("" = none)
  std::function<void(const std::string&)> progress;  // one line per event, may be empty
  // Reads the box's fingerprint (empty = measure::ThisBox); tests give a box that changes.
  std::function<measure::Box()> read_box;
};

// The result of one measured attempt (a run).
struct Outcome {
  int64_t change = 0, run = 0;
  Verdict verdict = Verdict::kFailed;           // stored and printed as VerdictName()
  Tier tier = Tier::kNone;                      // stored and printed as TierName()
  std::optional<double> gain, ci_low, ci_high;  // head vs its own base (median round ratio - 1) and its bounds
  std::optional<double> gate, frontier_before, frontier_after, base_median, head_median;
  int rounds = 0;
  int attempt = 0;              // 0 = first measurement of the change, k = k-th re-measurement
  std::optional<double> alpha;  // one-sided level of each bound
  bool surprise = false;
  nlohmann::json guards = nlohmann::json::array();  // [{metric, gain, low, high, regressed, declared}]
  std::string note;
  nlohmann::json ToJson() const;
  // Returns true iff the scoring completed (whatever the verdict).
  bool completed() const { return verdict != Verdict::kFailed; }
};

struct VerifyReport {
  bool ok = false;
  int64_t records = 0;          // chain records verified (every one on PASS)
  int64_t schema_objects = 0;   // tables, indexes, triggers, views compared with a replay of the migrations
  std::string first_broken;     // "table#row: why" when a record is broken
  std::string tip = "genesis";  // the chain's last seal as stored (64 hex), "genesis" when empty
  int64_t keyed = 0;            // records sealed with HMAC-SHA256 (VERITY_LEDGER_KEY)
  int64_t plain_records = 0;    // records sealed with plain SHA-256 (all before the first keyed one)
  std::string plain_tip;        // the last of them
  // With a key: the plain records are all that fails, and no keyed
  // seal_keyings row names them (`ledger start-keying` would).
  bool needs_keying = false;
  // With an expected tip: the full seal it matched and its 1-based record number
  // (0 when it was not found: the ledger was truncated or rewritten; !ok).
  std::string expected_tip_seal;
  int64_t expected_tip_record = 0;
  bool expected_tip_missing = false;
};

class Ledger {
 public:
  // Opens or creates the ledger, applying pending migrations up to
  // `up_to_version` (tests stop early to build an old database). Refuses a
  // ledger written by a newer schema or whose applied migrations differ.
  static Result<std::unique_ptr<Ledger>> Open(const std::string& path, int up_to_version = INT_MAX);
  // Opens an existing ledger read-only for Verify()/Tip(): never creates, migrates or installs policy.
  static Result<std::unique_ptr<Ledger>> OpenForVerify(const std::string& path);

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
  // Recomputes every seal (keyed ones with the Db's seal key) and names the first
  // broken record. `expect_tip` (a seal a reader noted earlier, 64 hex chars or a
  // prefix of at least 16; "" = none) must occur in the chain, or the verdict is
  // FAIL: that is how truncation of the chain's end is detected.
  Result<VerifyReport> Verify(const std::string& expect_tip = "");
  // Verify(), as an error naming the first failure when it does not PASS:
  // what `show` and `report` (`what`) run before reading anything.
  Status RequireVerified(const std::string& what);
  // Starts keying a plain ledger (`verity ledger start-keying`): with
  // VERITY_LEDGER_KEY set and the chain otherwise verifying, records under the
  // key a seal_keyings row naming the plain records before it. Refused when
  // there is no key or nothing plain to name.
  struct Keying {
    int64_t plain_records = 0;
    std::string plain_tip, seal;
  };
  static Result<Keying> StartKeying(const std::string& path, const std::string& by, const std::string& reason);
  // The chain's last seal as stored (64 hex), or "genesis" for an empty chain; unverified (see Verify).
  Result<std::string> Tip();

  Db& db() { return *db_; }

 private:
  explicit Ledger(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Status Migrate(int up_to_version);
  Status InstallPolicy();
  Result<int64_t> InsertChange(const ChangeRequest& req);
  Result<ChangeRequest> LoadChange(int64_t change_id);
  // A retraction a reapply makes, applied only once the reapply passed its gate.
  struct PendingRetraction {
    int64_t run = 0;
    std::string reason;
  };
  Result<Outcome> Measure(int64_t change_id, const ChangeRequest& c, const std::string& purpose,
                          std::optional<int64_t> queue_id, const MeasureOptions& opt,
                          std::optional<PendingRetraction> retraction = std::nullopt);
  Status RetractInTransaction(int64_t run, const std::string& reason, std::optional<int64_t> replaced_by,
                              std::optional<int64_t> by_change);
  Result<int64_t> StartRun(int64_t change_id, const std::string& purpose, std::optional<int64_t> queue_id,
                           int64_t box_id, const Policy& pol, int min_rounds, int max_rounds);
  Status QueueParked(int64_t frontier_event, const FrontierKey& key);
  // Confirm's banking of a step deep parity confirmed (in its transaction).
  Status BankConfirmed(const ChangeRequest& c, const FrontierKey& key, const Ladder& before, double ratio, Outcome& o);
  // Whether a seal_keyings row among `keyings` (sealed with the key) names exactly these plain records.
  Result<bool> PlainRecordsNamed(const std::vector<int64_t>& keyings, int64_t plain_records,
                                 const std::string& plain_tip);

  std::unique_ptr<Db> db_;
  int schema_version_ = 0;
  int applied_now_ = 0;
};

// The tables whose rows are sealed (everything but the chain and migrations).
const std::vector<std::string>& SealedTables();
// The guard floors policy `version` states (policy_guard_floors), in the order
// recorded; empty for versions before v3 and for ledgers of an older schema.
Result<std::vector<GuardFloor>> LoadGuardFloors(Db& d, int version);
// Current UTC time, ISO 8601 with milliseconds.
std::string NowUtc();

}  // namespace verity::ledger
