// The markdown changelog, generated from the ledger alone. The same ledger
// always yields byte-identical output (no clocks, stable order, fixed formats).
// A printer over the ledger's read model (ledger/read_model.h): it runs no SQL
// of its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ledger/ledger.h"
#include "ledger/read_model.h"

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

// ---- charts (render/chart.cc): static SVG 1.1, no scripts, deterministic ----

// How a measured attempt is drawn on the ladder.
enum class Mark {
  kAccepted,   // filled circle: accepted (or confirmed), banked
  kParked,     // hollow circle: scored `none` (parked), or a revert refused
  kNotBanked,  // hollow square: above the gate but not banked (unverified, held, a guard or plausibility rejection)
  kRejectedParity,  // cross at the frontier it faced: its speed was never measured
};

// One measured attempt (one run) on a ladder, in recording order.
struct LadderSlot {
  std::string label;                  // "#3": the change id
  std::optional<double> frontier;     // the derived frontier after this run (nullopt: not seeded yet)
  std::optional<double> seeded_from;  // the run seeded the frontier from this value (its base)
  std::optional<double> value;        // where the marker sits; nullopt: no marker
  Mark mark = Mark::kParked;
  bool retracted = false;       // drawn grey
  std::string note;             // beside the marker, e.g. "+7.0%"
  int64_t change = 0, run = 0;  // what the marker stands for
};

struct LadderChart {
  std::string title, subtitle, metric;  // the metric names its unit and direction (MetricUnit)
  double gate_frac = 0.0;               // the policy's gate, shaded on the better side of the frontier
  std::vector<LadderSlot> slots;
};
// The frontier as a step line over the attempts, the gate band shaded on its
// better side, every attempt as a marker, a legend and round ticks.
std::string LadderSvg(const LadderChart& chart);

// One series of measured medians with its change points (ledger/drift.h).
struct SeriesChart {
  std::string title, subtitle, metric;
  struct Point {
    double value = 0;
    std::string label;  // "r12": the run
    bool head = false;  // the head of an accepted change (else a base)
    int64_t run = 0;
  };
  struct Break {
    int index = 0;                 // the first point after the change
    double before = 0, after = 0;  // the segment medians either side
  };
  std::vector<Point> points;
  std::vector<Break> breaks;
  int min_points = 0;  // fewer points than this are too few to test for a change point
};
std::string SeriesSvg(const SeriesChart& chart);

// The charts' data, which the SVGs and the HTML dashboard (render/dashboard.h) both draw.
// The ladder of one (metric, box, workload): one slot per run on it (a step,
// or a score measured on its metric, box and workload), in recording order.
LadderChart BuildLadderChart(const ledger::LedgerView& d, const ledger::LadderView& l, double gate_frac);
// A drift series: main's measured medians with their change points.
SeriesChart BuildSeriesChart(const ledger::DriftSeries& series, const ledger::DriftOptions& options);

// Text for SVG or HTML (element content or a double-quoted attribute): data,
// never markup, and always valid UTF-8.
std::string MarkupText(const std::string& raw);

// The unit of a metric for an axis title, from its suffix ("decode_tok_s" ->
// "tok/s", "BM_X_ns" -> "ns"); "" when the suffix names none.
std::string MetricUnit(const std::string& metric);

// Round tick values covering [lo, hi]: multiples of 1, 2 or 5 x 10^k, at
// most `max_ticks` of them (at least 2), ascending.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

}  // namespace verity::reports
