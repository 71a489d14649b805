// The bench and parity protocols as the ledger takes them from a command:
// the run finished, its stdout is one record (protocol/), and the record
// holds what the ledger asked for. Absence is failure.
#include <nlohmann/json.hpp>

#include "measure/llama_bench.h"
#include "measure/measure.h"
#include "measure/raw_report.h"
#include "protocol/bench_record.h"
#include "protocol/json_object.h"
#include "protocol/parity_record.h"

namespace verity::measure {
namespace {

// The whole stdout as one JSON object, from a command that finished.
Result<nlohmann::json> ParseJsonObject(const CommandOutput& run, const std::string& what, const char* schema,
                                       bool require_zero_exit) {
  if (run.timed_out)
    return Status::Error(what + " timed out after " + std::to_string(static_cast<int>(run.seconds)) + "s");
  if (!run.stopped.empty()) return Status::Error(what + " " + run.stopped);
  if (run.exit_code >= 126 || (require_zero_exit && run.exit_code != 0))
    return Status::Error(what + " exited with status " + std::to_string(run.exit_code) +
                         (run.err.empty() ? "" : ": " + protocol::Tail(run.err)));
  return protocol::ParseObjectText(run.out, what, schema);
}

// The record's JSON: verity.bench/1 as printed, or converted from a
// llama-bench, Google Benchmark or hyperfine report; *raw_format names the
// converted tool ("" for a record).
Result<nlohmann::json> BenchJson(const CommandOutput& run, const std::string& what, const std::string& command,
                                 std::string* raw_format) {
  if (!run.timed_out && run.exit_code == 0 && LooksLikeLlamaBench(run.out)) {
    *raw_format = "llama-bench";
    return LlamaBenchToBench(run.out, command, what);
  }
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(run, what, protocol::kBenchSchema, true));
  // A raw Google Benchmark or hyperfine report (no schema; recognised by its shape) is converted.
  if (!j.contains("schema") && !RawReportFormat(j).empty()) {
    *raw_format = RawReportFormat(j);
    return RawReportToBench(j, command, what);
  }
  return j;
}

}  // namespace

Result<BenchSample> ParseBench(const CommandOutput& run, const std::string& metric, const std::string& what,
                               const std::string& command) {
  std::string raw_format;
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, BenchJson(run, what, command, &raw_format));
  VERITY_RETURN_IF_ERROR(protocol::CheckSchema(j, what, protocol::kBenchSchema));
  if (!j.contains("ok") || j["ok"] != true) return Status::Error(what + " reported \"ok\": not true");
  if (!j.contains("metrics") || !j["metrics"].is_object() || !j["metrics"].contains(metric))
    return Status::Error(what + " printed no metric '" + metric + "'");
  VERITY_ASSIGN_OR_RETURN(protocol::BenchRecord r, protocol::BenchRecordFromJson(j, what));
  BenchSample s;
  s.build_id = r.build.id;
  s.artifact_sha256 = r.build.artifact_sha256;
  s.value = r.metrics.at(metric);
  s.metrics = r.metrics;
  s.bytes_per_token = r.bytes_per_token;
  s.workload = protocol::WorkloadKey(j);
  s.raw_format = raw_format;
  s.backend = r.backend.value_or("");
  s.dtype = protocol::DtypeKey(j, s.workload);
  return s;
}

Result<ParityEvidence> ParseParity(const CommandOutput& run, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(run, what, protocol::kParitySchema, false));
  ParityEvidence p;
  VERITY_ASSIGN_OR_RETURN(static_cast<protocol::ParityRecord&>(p), protocol::ParityRecordFromJson(j, what));
  p.raw = run.out;  // as printed, byte for byte: what the seal covers is what the command said
  p.exit_code = run.exit_code;
  return p;
}

}  // namespace verity::measure
