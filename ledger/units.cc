#include "ledger/units.h"

#include <cstring>

namespace verity::ledger {
namespace {

// Quantities that, before a bare "_s", would make the name read as a rate
// ("<quantity> per second") rather than as seconds; the table has no rate for
// them, so such a name is ambiguous and refused rather than guessed.
constexpr const char* kQuantities[] = {
    "_b",     "_kb",   "_kib",    "_mib",    "_gib",   "_tb",    "_tib",  "_bytes", "_byte",     "_tok",   "_tokens",
    "_token", "_flop", "_flops",  "_mflops", "_ops",   "_op",    "_req",  "_reqs",  "_requests", "_items", "_samples",
    "_iters", "_it",   "_frames", "_rows",   "_words", "_chars", "_bits", "_kbits", "_mbits",    "_gbits"};

std::string Suffixes() {
  std::string out;
  for (const auto& u : UnitTable()) out += (out.empty() ? "" : ", ") + std::string(u.suffix);
  return out;
}

}  // namespace

const std::vector<MetricUnit>& UnitTable() {
  static const std::vector<MetricUnit> kTable = {
      {"_tok_s", UnitKind::kRate, true, "tok/s"},    {"_per_s", UnitKind::kRate, true, "/s"},
      {"_mb_s", UnitKind::kRate, true, "MB/s"},      {"_gb_s", UnitKind::kRate, true, "GB/s"},
      {"_gflops", UnitKind::kRate, true, "GFLOP/s"}, {"_tflops", UnitKind::kRate, true, "TFLOP/s"},
      {"_ns", UnitKind::kTime, false, "ns"},         {"_us", UnitKind::kTime, false, "us"},
      {"_ms", UnitKind::kTime, false, "ms"},         {"_s", UnitKind::kTime, false, "s"},
      {"_seconds", UnitKind::kTime, false, "s"},     {"_mb", UnitKind::kMemory, false, "MiB"},
      {"_gb", UnitKind::kMemory, false, "GiB"},      {"_bytes", UnitKind::kMemory, false, "bytes"},
  };
  return kTable;
}

Result<MetricUnit> UnitOf(const std::string& metric) {
  const MetricUnit* best = nullptr;
  for (const auto& u : UnitTable())
    if (metric.ends_with(u.suffix) && (!best || std::strlen(u.suffix) > std::strlen(best->suffix))) best = &u;
  if (!best)
    return Status::Error("metric '" + metric +
                         "': cannot tell whether higher or lower is better: its name ends in no "
                         "unit of the metric-unit table (" +
                         Suffixes() + ")");
  if (std::strcmp(best->suffix, "_s") == 0) {
    const std::string stem = metric.substr(0, metric.size() - 2);
    for (const char* q : kQuantities)
      if (stem.ends_with(q))
        return Status::Error("metric '" + metric +
                             "': cannot tell whether higher or lower is better: ambiguous unit '" + std::string(q) +
                             "_s' (seconds, or " + std::string(q + 1) +
                             " per second?); the metric-unit table's rates "
                             "are _tok_s, _per_s, _mb_s, _gb_s, _gflops, _tflops: rename it");
  }
  return *best;
}

}  // namespace verity::ledger
