// Recording steps shared by the submission sequence (submit.cc) and the
// lifecycle commands (lifecycle.cc). Each must run inside Db::Transaction.
#pragma once

#include <optional>
#include <string>

#include "ledger/db.h"
#include "ledger/frontier.h"
#include "ledger/identity.h"
#include "ledger/ledger.h"
#include "ledger/score.h"
#include "measure/measure.h"

namespace verity::ledger {

// The box's row id, inserting (sealed) the box the first time it is seen.
Result<int64_t> EnsureBox(Db& d, const measure::Box& box);
// Returns how many measured attempts the change already has: the k-th
// re-measurement spends less of the error budget than the first did.
Result<int> PriorAttempts(Db& d, int64_t change_id);
// Policy v4 (v6: by identity): the attempts already spent on the change this
// run measures -- its own runs, and the runs of any change of the same kind
// and metric that is the same change (ledger/identity.h: the same builds, or
// artifacts, or one artifact run by the same commands) -- each counted if it
// was scored with a measurement or took a look (its timed rounds reached its
// min_rounds) before it failed. `run_id` itself is excluded. A run that is no
// pair (one artifact, one command) is grouped by its change only.
Result<int> SpentAttempts(Db& d, int64_t run_id, int64_t change_id, const std::string& kind, const std::string& metric,
                          const ChangeIdentity& id);
// The earliest other change of kind 'change' and this metric, before `change_id`,
// whose run is the same change as `id`: its id and prediction (percent), if any.
struct PairPrediction {
  int64_t change_id = 0;
  double predict_pct = 0;
};
Result<std::optional<PairPrediction>> FirstPredictionOfPair(Db& d, int64_t change_id, const std::string& metric,
                                                            const ChangeIdentity& id);
// What run `run_id` is (ledger/identity.h), from its recorded artifacts and its change's commands.
Result<ChangeIdentity> IdentityOfRun(Db& d, int64_t run_id);
// Records the score row of `o`, its statistics and guards (from `sr` when speed was measured).
Status InsertScore(Db& d, int64_t run_id, int policy_version, const Outcome& o, const std::string& metric,
                   const std::optional<ScoreResult>& sr);
// Inserts a frontier event with how it moves the ladder; returns its id.
Result<int64_t> InsertFrontierEvent(Db& d, const FrontierKey& key, int64_t run_id, const std::string& reason,
                                    double value_now, std::optional<double> ratio, std::optional<int64_t> undoes_run);
// The run of `change_id` whose factor is live in the ladder now (or, with
// `live_only` false, whose frontier event was recorded last), if any.
Result<std::optional<int64_t>> FrontierRunOf(Db& d, int64_t change_id, const FrontierKey& key, bool live_only);
// Returns why a request for rounds is refused (fewer than the policy's floor), if it is.
std::optional<std::string> RoundsRequestError(const Policy& pol, const MeasureOptions& opt);
// Copies a score's verdict and numbers into the outcome printed to the user.
void FillFromScore(const ScoreResult& r, Outcome* o);

}  // namespace verity::ledger
