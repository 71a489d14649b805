// Google Benchmark JSON -> verity.bench/1; see gbench.h.
#include "measure/gbench.h"

#include <cctype>
#include <cmath>
#include <map>

#include "protocol/bench_record.h"

namespace verity::measure {

std::string GbenchMetricName(const std::string& benchmark_name) {
  std::string out;
  for (char c : benchmark_name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (keep) out += c;
    else if (out.empty() || out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out + "_ns";
}

namespace {

// Nanoseconds per unit of a Google Benchmark time_unit.
Result<double> NsPer(const std::string& unit, const std::string& where) {
  static const std::map<std::string, double> kNs = {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  auto it = kNs.find(unit);
  if (it == kNs.end()) return Status::Error(where + ": time_unit '" + unit + "' is not ns, us, ms or s");
  return it->second;
}

}  // namespace

Result<nlohmann::json> GbenchToBench(const nlohmann::json& report, const nlohmann::json& build,
                                     const std::string& binary, const std::string& binary_sha256,
                                     const std::string& workload, const std::string& what) {
  if (!report.is_object() || !report.contains("benchmarks") || !report["benchmarks"].is_array())
    return Status::Error(what + ": no 'benchmarks' array (not a --benchmark_format=json report)");
  const auto& all = report["benchmarks"];
  bool aggregates = false;
  for (const auto& b : all) aggregates = aggregates || (b.value("run_type", "") == "aggregate");
  protocol::BenchRecord rec;
  rec.build = {build.value("id", ""), build.value("artifact_sha256", "")};
  int used = 0;
  for (const auto& b : all) {
    if (!b.is_object()) return Status::Error(what + ": a benchmarks entry is not an object");
    const std::string type = b.value("run_type", "iteration");
    if (aggregates ? (type != "aggregate" || b.value("aggregate_name", "") != "median") : type != "iteration") continue;
    const std::string name = b.value("run_name", b.value("name", ""));
    const std::string where = what + ": benchmark '" + name + "'";
    if (name.empty()) return Status::Error(what + ": a benchmark has no name");
    if (!b.contains("real_time") || !b["real_time"].is_number())
      return Status::Error(where + ": real_time is missing or not a number");
    VERITY_ASSIGN_OR_RETURN(double ns_per, NsPer(b.value("time_unit", "ns"), where));
    const double ns = b["real_time"].get<double>() * ns_per;
    if (!std::isfinite(ns) || ns <= 0.0) return Status::Error(where + ": real_time is not a positive finite number");
    const std::string metric = GbenchMetricName(name);
    if (rec.metrics.count(metric)) return Status::Error(where + ": another benchmark also maps to metric " + metric);
    rec.metrics[metric] = ns;
    used++;
  }
  if (used == 0) return Status::Error(what + ": the report holds no benchmark results");
  nlohmann::json context =
      report.contains("context") && report["context"].is_object() ? report["context"] : nlohmann::json::object();
  rec.workload = workload;
  rec.extra["gbench"] = {{"binary", binary},
                         {"binary_sha256", binary_sha256},
                         {"benchmarks", used},
                         {"aggregates", aggregates ? "median" : "none"},
                         {"num_cpus", context.value("num_cpus", 0)},
                         {"library_build_type", context.value("library_build_type", "")}};
  return protocol::ToJson(rec);
}

}  // namespace verity::measure
