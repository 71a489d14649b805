// The bench and parity protocols, parsed strictly: one JSON object on stdout,
// the right schema, the fields present and typed. Absence is failure.
#include <cmath>
#include <nlohmann/json.hpp>

#include "measure/measure.h"

namespace verity::measure {
namespace {

std::string Tail(const std::string& s) {
  std::string t = s.size() > 300 ? "..." + s.substr(s.size() - 300) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

Result<nlohmann::json> ParseObject(const CommandOutput& run, const std::string& what, const char* schema,
                                   bool require_zero_exit) {
  if (run.timed_out)
    return Status::Error(what + " timed out after " + std::to_string(static_cast<int>(run.seconds)) + "s");
  if (run.exit_code >= 126 || (require_zero_exit && run.exit_code != 0))
    return Status::Error(what + " exited with status " + std::to_string(run.exit_code) +
                         (run.err.empty() ? "" : ": " + Tail(run.err)));
  if (run.out.find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::Error(what + " printed nothing on stdout (expected one " + schema + " JSON object)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(run.out);
  } catch (const std::exception&) {
    return Status::Error(what + " did not print one JSON object on stdout: '" + Tail(run.out) + "'");
  }
  if (!j.is_object()) return Status::Error(what + " printed JSON that is not an object");
  if (!j.contains("schema") || !j["schema"].is_string())
    return Status::Error(what + " printed JSON without a \"schema\" field (expected " + schema + ")");
  if (j["schema"] != schema)
    return Status::Error(what + " printed schema '" + j["schema"].get<std::string>() + "', expected " + schema);
  return j;
}

bool IsFiniteNumber(const nlohmann::json& j) { return j.is_number() && std::isfinite(j.get<double>()); }

}  // namespace

Result<BenchSample> ParseBench(const CommandOutput& run, const std::string& metric, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(run, what, "verity.bench/1", true));
  if (!j.contains("ok") || j["ok"] != true) return Status::Error(what + " reported \"ok\": not true");
  const auto& build = j.contains("build") ? j["build"] : nlohmann::json();
  if (!build.is_object() || !build.contains("id") || !build["id"].is_string() ||
      !build.contains("artifact_sha256") || !build["artifact_sha256"].is_string())
    return Status::Error(what + " printed no build.id / build.artifact_sha256");
  if (!j.contains("metrics") || !j["metrics"].is_object() || !j["metrics"].contains(metric))
    return Status::Error(what + " printed no metric '" + metric + "'");
  const auto& v = j["metrics"][metric];
  if (!IsFiniteNumber(v) || v.get<double>() <= 0.0)
    return Status::Error(what + ": metric '" + metric + "' is not a positive finite number");
  BenchSample s;
  s.build_id = build["id"];
  s.artifact_sha256 = build["artifact_sha256"];
  s.value = v.get<double>();
  return s;
}

Result<ParityEvidence> ParseParity(const CommandOutput& run, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(run, what, "verity.parity/1", false));
  ParityEvidence p;
  p.raw = j.dump();
  if (!j.contains("depths") || !j["depths"].is_array() || j["depths"].empty())
    return Status::Error(what + " printed no depths (an empty comparison proves nothing)");
  p.worst_top1 = 1.0;
  p.worst_mean_kl = 0.0;
  for (const auto& d : j["depths"]) {
    if (!d.is_object() || !d.contains("depth") || !d["depth"].is_number_integer() || !d.contains("top1") ||
        !IsFiniteNumber(d["top1"]) || !d.contains("mean_kl") || !IsFiniteNumber(d["mean_kl"]))
      return Status::Error(what + ": a depth entry lacks depth/top1/mean_kl numbers");
    ParityEvidence::Depth x{d["depth"].get<int>(), d["top1"].get<double>(), d["mean_kl"].get<double>(),
                            d.contains("max_kl") && IsFiniteNumber(d["max_kl"]) ? d["max_kl"].get<double>()
                                                                                  : d["mean_kl"].get<double>()};
    p.depths.push_back(x);
    p.worst_top1 = std::min(p.worst_top1, x.top1);
    p.worst_mean_kl = std::max(p.worst_mean_kl, x.mean_kl);
  }
  if (!j.contains("logits_sha256") || !j["logits_sha256"].is_string() ||
      j["logits_sha256"].get<std::string>().size() != 64)
    return Status::Error(what + " printed no 64-hex logits_sha256");
  p.logits_sha256 = j["logits_sha256"];
  p.reported_ok = j.contains("ok") && j["ok"] == true;
  p.exit_code = run.exit_code;
  return p;
}

}  // namespace verity::measure
