// Raw benchmark reports as the bench protocol: a bench command may print
// Google Benchmark's JSON (--benchmark_format=json) or hyperfine's
// (--export-json) instead of a verity.bench/1 record, and the ledger reads it
// without a wrapper. Each benchmark becomes one metric named by
// GbenchMetricName ("<name>_ns", a time in nanoseconds: lower is better by its
// suffix). docs/bench.md, "Raw Google Benchmark and hyperfine reports".
//
// A raw report names no build: its identity is the sha256 of the benchmark
// executable it names (Google Benchmark's context.executable, when that is an
// absolute path to a file here), else of the command line that printed it, and build.id says which
// ("raw:gbench:executable", "raw:gbench:command", "raw:hyperfine:command").
// That identity proves nothing about what parity evidence ran, so the ledger
// never binds parity (or bit identity) to a raw report: its runs are scored
// `unverified` at best and never move a frontier (ledger/evidence.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace verity::measure {

// The format a JSON object's shape says: "gbench" (an object with "context"
// and "benchmarks"), "hyperfine" (an object with a "results" array whose
// entries have "command", "mean", "median" and "times"), or "" for neither.
std::string RawReportFormat(const nlohmann::json& j);

// Converts a hyperfine report: one metric "<command>_ns" per result, the
// median of its `times` (seconds) in nanoseconds (`median` when `times` is
// empty). Errors name `what` and the field: no results, a command that is not
// a string, a time that is not a positive finite number (hyperfine subtracts
// the shell's start-up time, so a very short command can come out at or below
// zero: use -N), a run that exited non-zero, two results with one metric name.
[[nodiscard]] Result<nlohmann::json> HyperfineToBench(const nlohmann::json& report, const nlohmann::json& build,
                                                      const std::string& workload, const std::string& what);

// Converts a raw report (RawReportFormat not "") printed by `command` into a
// verity.bench/1 record with the identity described above and a "raw" field
// {format, identity}. Errors name `what` and the field.
[[nodiscard]] Result<nlohmann::json> RawReportToBench(const nlohmann::json& report, const std::string& command,
                                                      const std::string& what);

// Converts llama-bench's -o json / -o jsonl output (measure/llama_bench.h)
// printed by `command` into a verity.bench/1 record. Its build.id is
// "raw:llama-bench:<build_commit>"; its artifact_sha256 hashes the command
// line and the commit together (llama-bench names no executable), so a base
// and a head run by the same command line from builds of different commits
// are two artifacts. Like the other raw reports, no parity evidence binds to it.
[[nodiscard]] Result<nlohmann::json> LlamaBenchToBench(const std::string& out, const std::string& command,
                                                       const std::string& what);

}  // namespace verity::measure
