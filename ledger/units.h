// The metric-unit table (policy v4 on; applied to every score made now): a
// metric's name ends in one unit suffix of this table, which says whether the
// metric is a rate, a time or an amount of memory, and so whether higher or
// lower is better. The one place a metric's direction is decided; a name that
// matches no entry, or that is ambiguous, is refused with a named error.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace verity::ledger {

enum class UnitKind { kRate, kTime, kMemory };

struct MetricUnit {
  const char* suffix;  // "_tok_s", "_ms", "_mb", ...
  UnitKind kind;
  bool higher_is_better;  // rates: higher; times and memory: lower
  const char* unit;       // how an amount is written: "tok/s", "ms", "MiB"
};

// Every suffix the ledger knows, rates first.
const std::vector<MetricUnit>& UnitTable();

// The entry `metric` ends in: the longest matching suffix ("_mb_s" before
// "_s"). Refused when none matches, or when the name ends in "_s" after a
// token that names a quantity the table has no rate for ("read_kb_s",
// "x_tokens_s": kilobytes per second, or seconds?). Errors name the metric.
[[nodiscard]] Result<MetricUnit> UnitOf(const std::string& metric);

}  // namespace verity::ledger
