// `verity bisect`: which commit between a good and a bad ref made the metric
// slower (or broke parity). A binary search over the first-parent commits in
// (good, bad], each commit built once into the ref-build cache
// (measure::BuildRef). Every step gates on parity first; a step that passes is
// measured ABBA against good with the ledger's sequential sign-test bounds
// (stats.h). Every measurement is recorded as a run of purpose 'bisect'
// (migration 0009); none of them can move or seed a frontier. docs/ledger.md
// "Bisect" states the classification rule and its error rate.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/ledger.h"
#include "measure/measure.h"

namespace verity::ledger {

// The commands a built commit is measured with. An empty parity_cmd means
// the build cannot gate on parity (the step is untestable); `note` says why.
struct CommitCommands {
  std::string bench_cmd, parity_cmd, note;
};

struct BisectRequest {
  std::string repo = ".";  // any path inside the git repository
  std::string good, bad;   // refs
  std::string metric = "decode_tok_s";
  std::optional<double> threshold_pct;  // default: the policy's gate (2%)
  std::string cache_dir;                // the ref-build cache ("" = env::WorktreeCache's default for the repo)
  std::string bench_args;               // recorded with the session: what every commit's bench ran
  measure::BuildRecipe recipe;          // how each commit is built (the project config's [build])
  // Builds the commands a commit's build is measured with (bench, parity).
  std::function<Result<CommitCommands>(const measure::BuiltRef&)> commands;
};

// One decided step (an endpoint check or a search step).
struct BisectStep {
  int64_t id = 0, run = 0;
  std::string role;    // endpoint | step
  std::string search;  // speed | correctness
  std::string sha, subject;
  std::string verdict;     // good | bad | untestable | parity-fail
  std::string decided_by;  // parity | bounds | median | build
  std::string workload;
  std::optional<double> ratio, ci_low, ci_high, alpha;  // ratio > 1: faster than good
  int rounds = 0;
  bool remeasured = false;
  std::string note;
  nlohmann::json ToJson() const;
};

struct BisectResult {
  int64_t session = 0;
  std::string kind;  // speed | correctness | nothing
  std::string good_sha, bad_sha, metric, workload;
  double threshold_pct = 0;
  std::optional<std::string> culprit;  // the first bad commit, when skips leave exactly one candidate
  std::string culprit_subject;
  std::vector<std::string> candidates;  // the commits the answer may be (one when exact)
  std::vector<BisectStep> steps;        // in the order decided, endpoints included
  int search_steps = 0, skipped = 0;
  std::string summary;  // the one line `verity bisect` prints
  // Returns true iff the endpoints allowed a search (kind != nothing).
  bool searched() const { return kind != "nothing"; }
  nlohmann::json ToJson() const;
};

// Runs a bisect session, recording everything; progress lines go to opt.progress.
// Errors are for bad input (unknown refs, good not an ancestor on bad's first-parent
// line, an unknown metric, a threshold outside (0, 100)) and ledger failures; a
// session whose endpoints give nothing to search returns kind "nothing".
Result<BisectResult> Bisect(Ledger& l, const BisectRequest& req, const MeasureOptions& opt);

// Bisect sessions as recorded, newest last, each with its steps and result.
struct BisectHistory {
  std::vector<BisectResult> sessions;
};
Result<BisectHistory> LoadBisectHistory(Db& d);
nlohmann::json ToJson(const BisectHistory& h);
std::string ToText(const BisectHistory& h);

}  // namespace verity::ledger
