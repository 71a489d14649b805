// The one place that reads VERITY_* environment switches. Nothing else in the
// project calls getenv; each switch, its meaning and its default are listed here.
#pragma once

#include <string>

namespace verity::env {

// VERITY_THREADS: worker threads for the fast CPU path. Default: hardware cores.
int Threads();
// VERITY_PARITY_MODE: "standard" (default) or "deep" (more depths and wider windows).
bool ParityDeep();
// VERITY_LEDGER: ledger file when --ledger is not given. Default: ./verity.db.
std::string LedgerPath();
// VERITY_BENCH_TIMEOUT_S: per-run timeout for bench and parity commands. Default: 600.
int CommandTimeoutSeconds();
// VERITY_WORKTREES: cache folder for ref builds. Default: <repo>/.verity/worktrees.
std::string WorktreeCache(const std::string& repo_root);

}  // namespace verity::env
