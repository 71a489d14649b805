// The ref flow: `verity submit/bisect` by git ref. The judged repository's
// project config (its verity.toml, or --config FILE; measure/project_config.h,
// docs/config.md) says how each ref is built, which artifact identifies it,
// and what a workload's bench and parity commands are; the flags below fill
// in or override the workload's variables.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/bisect.h"
#include "ledger/ledger.h"

namespace verity::cli {

struct RefOptions {
  std::string base, head, repo = ".", against, config, workload;
  // Overrides of the workload's variables ("" / 0: the workload's own).
  std::string model, dtype;
  int steps = 0;
  double min_seconds = 0.0;
  std::vector<std::string> given;  // the ref-only flags given on the command line (RefOnlyFlagsGiven)
};

// The ref flow's flags on `sub` (submit's without --base/--head, which it adds itself).
void AddRefFlowOptions(CLI::App* sub, RefOptions& refs);
// The flags of `sub` that only build the ref flow's commands, as given on its
// command line (none are used with --base-cmd/--head-cmd).
std::vector<std::string> RefOnlyFlagsGiven(CLI::App* sub);

// submit: with --base/--head, builds both refs by the config and fills in
// the commands, identities, metric and guards; otherwise checks the
// commands were given. `metric_given`: --metric was on the command line.
[[nodiscard]] Status PrepareRefs(const RefOptions& o, bool metric_given, ledger::ChangeRequest* r);
// bisect: the build recipe and each commit's commands, by the config.
[[nodiscard]] Result<ledger::BisectRequest> PrepareBisect(const RefOptions& o, bool metric_given,
                                                          ledger::BisectRequest req);

}  // namespace verity::cli
