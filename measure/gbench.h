// Google Benchmark output as the bench protocol: a benchmark binary's
// --benchmark_format=json report becomes one verity.bench/1 record whose
// metrics are each benchmark's real time in nanoseconds ("<name>_ns", lower is
// better by its unit), so the ledger can score any Google Benchmark binary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace verity::measure {

// "BM_History/reverts" -> "BM_History_reverts_ns": letters, digits and '_'
// kept, anything else one '_', the unit appended.
std::string GbenchMetricName(const std::string& benchmark_name);

// Converts a Google Benchmark JSON report. Where the report holds aggregates
// (--benchmark_repetitions), the median aggregate of each benchmark is used;
// otherwise the plain iteration entries. Errors name `what` and the field:
// no benchmarks, a time that is not a positive finite number, an unknown
// time_unit, two benchmarks with one metric name.
// `build` is the {id, artifact_sha256} of the build the binary belongs to;
// `binary_sha256` names the benchmark binary itself; `workload` is recorded
// as the record's workload (what the ledger keeps one frontier for).
[[nodiscard]] Result<nlohmann::json> GbenchToBench(const nlohmann::json& report, const nlohmann::json& build,
                                                   const std::string& binary, const std::string& binary_sha256,
                                                   const std::string& workload, const std::string& what);

}  // namespace verity::measure
