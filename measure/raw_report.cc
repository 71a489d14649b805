// Raw Google Benchmark and hyperfine reports -> verity.bench/1; see raw_report.h.
#include "measure/raw_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "measure/gbench.h"
#include "measure/llama_bench.h"
#include "protocol/bench_record.h"

namespace verity::measure {
namespace {

bool IsPositiveTime(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0.0;
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::string RawReportFormat(const nlohmann::json& j) {
  if (!j.is_object()) return "";
  if (j.contains("context") && j.contains("benchmarks")) return "gbench";
  if (j.contains("results") && j["results"].is_array() && !j["results"].empty()) {
    for (const auto& r : j["results"])
      if (!r.is_object() || !r.contains("command") || !r.contains("mean") || !r.contains("median") ||
          !r.contains("times"))
        return "";
    return "hyperfine";
  }
  return "";
}

Result<nlohmann::json> HyperfineToBench(const nlohmann::json& report, const nlohmann::json& build,
                                        const std::string& workload, const std::string& what) {
  if (!report.is_object() || !report.contains("results") || !report["results"].is_array() || report["results"].empty())
    return Status::Error(what + ": no 'results' array with at least one result (not a hyperfine --export-json report)");
  protocol::BenchRecord rec;
  rec.build = {build.value("id", ""), build.value("artifact_sha256", "")};
  const auto& results = report["results"];
  for (size_t i = 0; i < results.size(); i++) {
    const auto& r = results[i];
    const std::string where = what + ": results[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("command") || !r["command"].is_string() ||
        r["command"].get<std::string>().empty())
      return Status::Error(where + ".command is missing or not a non-empty string");
    const std::string command = r["command"];
    if (!r.contains("times") || !r["times"].is_array())
      return Status::Error(where + ".times is missing or not an array (command '" + command + "')");
    std::vector<double> times;
    for (size_t k = 0; k < r["times"].size(); k++) {
      const auto& t = r["times"][k];
      if (!IsPositiveTime(t))
        return Status::Error(where + ".times[" + std::to_string(k) + "] is " + t.dump() +
                             ", not a positive finite "
                             "number of seconds (command '" +
                             command + "'; hyperfine -N avoids the shell correction)");
      times.push_back(t.get<double>());
    }
    if (r.contains("exit_codes") && r["exit_codes"].is_array())
      for (size_t k = 0; k < r["exit_codes"].size(); k++)
        if (r["exit_codes"][k] != 0)
          return Status::Error(where + ".exit_codes[" + std::to_string(k) + "] is " + r["exit_codes"][k].dump() +
                               ": a timed run of '" + command + "' failed");
    double seconds = 0;
    if (!times.empty()) {
      seconds = MedianOf(times);
    } else if (r.contains("median") && IsPositiveTime(r["median"])) {
      seconds = r["median"].get<double>();
    } else {
      return Status::Error(where + ".median is " +
                           (r.contains("median") ? r["median"].dump() : std::string("missing")) +
                           " and times is empty: no positive time for '" + command + "'");
    }
    const std::string metric = GbenchMetricName(command);
    if (metric == "_ns")
      return Status::Error(where + ".command '" + command + "' has no letter or digit to name a metric");
    if (rec.metrics.count(metric))
      return Status::Error(where + ".command '" + command + "': another result also maps to metric " + metric +
                           " (name the commands apart with hyperfine -n)");
    rec.metrics[metric] = seconds * 1e9;
  }
  rec.workload = workload;
  return protocol::ToJson(rec);
}

Result<nlohmann::json> RawReportToBench(const nlohmann::json& report, const std::string& command,
                                        const std::string& what) {
  const std::string format = RawReportFormat(report);
  if (format.empty()) return Status::Error(what + ": printed neither a Google Benchmark nor a hyperfine JSON report");
  // The identity: the executable the report names, when it is an absolute path
  // to a file here (a relative argv[0] is relative to wherever the command
  // ran, which may not be this directory); else the command line.
  std::string identity = "command", sha = Sha256Hex(command), workload = format;
  if (format == "gbench") {
    const auto& ctx = report["context"];
    if (!ctx.is_object()) return Status::Error(what + ": context is not an object");
    if (ctx.contains("executable") && ctx["executable"].is_string()) {
      const std::string exe = ctx["executable"];
      workload += " " + std::filesystem::path(exe).filename().string();
      std::error_code ec;
      if (std::filesystem::path(exe).is_absolute() && std::filesystem::is_regular_file(exe, ec)) {
        auto file_sha = Sha256File(exe);
        if (!file_sha.ok()) return Status::Error(what + ": context.executable: " + file_sha.status().message());
        identity = "executable", sha = *file_sha;
      }
    }
  }
  const nlohmann::json build = {{"id", "raw:" + format + ":" + identity}, {"artifact_sha256", sha}};
  nlohmann::json rec;
  if (format == "gbench") {
    VERITY_ASSIGN_OR_RETURN(rec, GbenchToBench(report, build, "", "", workload, what));
    rec.erase("gbench");
  } else {
    VERITY_ASSIGN_OR_RETURN(rec, HyperfineToBench(report, build, workload, what));
  }
  rec["raw"] = {{"format", format}, {"identity", identity}};
  return rec;
}

Result<nlohmann::json> LlamaBenchToBench(const std::string& out, const std::string& command, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(LlamaBenchReport rep, ParseLlamaBench(out, what));
  std::string workload = "llama-bench";
  if (!rep.model.empty()) workload += " " + rep.model;
  if (rep.threads > 0) workload += " " + std::to_string(rep.threads) + "t";
  protocol::BenchRecord rec;
  rec.build = {"raw:llama-bench:" + rep.build_commit, Sha256Hex(command + "\n" + rep.build_commit)};
  rec.metrics = {rep.metrics.begin(), rep.metrics.end()};
  rec.workload = workload;
  rec.extra["raw"] = {{"format", "llama-bench"}, {"identity", "command+build_commit"}};
  return protocol::ToJson(rec);
}

}  // namespace verity::measure
