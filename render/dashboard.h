// `verity report --html DIR`: the ledger as a static dashboard that needs no
// server (open DIR/index.html). Per box and workload, the frontier ladder and
// the drift series drawn with uPlot (its files copied into DIR from the build,
// which embeds what npm installed); every attempt marked by verdict, hovering
// a point names its change and bounds, clicking opens the change's page
// (samples by round, scores, parity evidence, guards, prediction, retractions
// and reverts around it); the reverts and retractions history; filters by
// verdict, author and workload. A printer over the read model
// (ledger/read_model.h), like the markdown report: the same ledger always
// yields the same bytes.
#pragma once

#include <string>

#include "base/status.h"
#include "ledger/ledger.h"

namespace verity::reports {

struct DashboardOptions {
  std::string dir;  // created if missing; the files it writes are replaced
};

struct WrittenDashboard {
  std::string index_path;
  int files = 0, change_pages = 0, ladders = 0, series = 0;
};

// Writes the dashboard. Errors name the file or directory, or say that this
// build carries no uPlot (configured before `scripts/setup.sh` installed it).
Result<WrittenDashboard> WriteDashboard(ledger::Ledger& ledger, const DashboardOptions& opt);

}  // namespace verity::reports
