// The markdown changelog, generated from the ledger alone. The same ledger
// always yields byte-identical output (no clocks, stable order, fixed formats).
// A printer over the ledger's read model (ledger/read_model.h): it runs no SQL
// of its own.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/ledger.h"

namespace verity::reports {

struct ReportOptions {
  std::string out;         // FILE.md
  std::string charts_dir;  // SVGs go here; default: the directory of `out`
  std::string since;       // "" | change id | date prefix (YYYY-MM-DD...): limits the per-change sections
};

struct WrittenReport {
  std::string markdown_path;
  std::vector<std::string> charts;
  int changes = 0;
};

// Renders the report and its charts and writes them. Errors name the file.
Result<WrittenReport> WriteReport(ledger::Ledger& ledger, const ReportOptions& opt);

// One step of the derived frontier ladder, for the chart.
struct LadderPoint {
  std::string label;  // e.g. "#3"
  double value;       // counted: the frontier after the step; retracted: the value it claimed
  bool counted = true;     // not counted: drawn hollow and grey, off the line
  bool retracted = false;  // (a retracted step is never counted)
};
// An SVG step chart of the frontier over the ladder (self-contained, no scripts).
std::string LadderSvg(const std::string& title, const std::vector<LadderPoint>& points);

}  // namespace verity::reports
