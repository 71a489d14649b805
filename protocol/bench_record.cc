#include "protocol/bench_record.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "protocol/json_object.h"

namespace verity::protocol {
namespace {

// A bench number: positive, finite and inside [kMinBenchValue, kMaxBenchValue].
Status CheckBenchValue(const nlohmann::json& v, const std::string& name, const std::string& what) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0.0)
    return Status::Error(what + ": " + name + " is not a positive finite number");
  const double x = v.get<double>();
  if (x < kMinBenchValue || x > kMaxBenchValue) {
    char b[160];
    std::snprintf(b, sizeof b, " is %g, outside the ledger's range [%g, %g] (its sums and ratios could overflow)", x,
                  kMinBenchValue, kMaxBenchValue);
    return Status::Error(what + ": " + name + b);
  }
  return OkStatus();
}

Result<BuildIdentity> ReadBuild(const nlohmann::json& j, const std::string& what) {
  const auto& b = j.contains("build") ? j["build"] : nlohmann::json();
  if (!b.is_object() || !b.contains("id") || !b["id"].is_string() || !b.contains("artifact_sha256") ||
      !b["artifact_sha256"].is_string())
    return Status::Error(what + " printed no build.id / build.artifact_sha256");
  return BuildIdentity{b["id"], b["artifact_sha256"]};
}

// The workload fields that have their type move from `rest` into `r`; a
// malformed one stays in `rest`, so that ToJson prints it back as it was.
void TakeWorkloadFields(nlohmann::json* rest, BenchRecord* r) {
  auto take_string = [&](const char* key, std::optional<std::string>* dst) {
    if (rest->contains(key) && (*rest)[key].is_string()) *dst = (*rest)[key].get<std::string>(), rest->erase(key);
  };
  auto take_int = [&](const char* key, std::optional<int>* dst) {
    if (!rest->contains(key)) return;
    const auto& v = (*rest)[key];
    if (v.is_number_integer() && v.get<long long>() >= INT32_MIN && v.get<long long>() <= INT32_MAX)
      *dst = v.get<int>(), rest->erase(key);
  };
  if (rest->contains("workload") && (*rest)["workload"].is_string())
    r->workload = (*rest)["workload"].get<std::string>(), rest->erase("workload");
  take_string("model", &r->model);
  take_string("dtype", &r->dtype);
  take_string("backend", &r->backend);
  take_int("threads", &r->threads);
  take_int("prompt_tokens", &r->prompt_tokens);
  take_int("gen_tokens", &r->gen_tokens);
  take_int("batch", &r->batch);
}

// A word that names a weight dtype: f16/f32/f64/bf16/fp8/fp16/fp32, q<digit>...
// (q8_0, q4_k), iq<digit>... (GGML's names), int4/int8.
bool IsDtypeWord(const std::string& w) {
  static const char* kPlain[] = {"f16", "f32", "f64", "bf16", "fp8", "fp16", "fp32", "int4", "int8", "i8"};
  for (const char* p : kPlain)
    if (w == p) return true;
  const size_t digit = w.rfind("iq", 0) == 0 ? 2 : w.rfind("q", 0) == 0 ? 1 : std::string::npos;
  return digit != std::string::npos && w.size() > digit && std::isdigit(static_cast<unsigned char>(w[digit]));
}

}  // namespace

nlohmann::json ToJson(const BenchRecord& r) {
  nlohmann::json j = r.extra.is_object() ? r.extra : nlohmann::json::object();
  j["schema"] = kBenchSchema;
  j["build"] = {{"id", r.build.id}, {"artifact_sha256", r.build.artifact_sha256}};
  j["ok"] = r.ok;
  j["metrics"] = nlohmann::json::object();
  for (const auto& [name, v] : r.metrics) j["metrics"][name] = v;
  if (!r.workload.empty()) j["workload"] = r.workload;
  for (auto [key, v] : {std::pair{"model", &r.model}, {"dtype", &r.dtype}, {"backend", &r.backend}})
    if (*v) j[key] = **v;
  for (auto [key, v] : {std::pair{"threads", &r.threads},
                        {"prompt_tokens", &r.prompt_tokens},
                        {"gen_tokens", &r.gen_tokens},
                        {"batch", &r.batch}})
    if (*v) j[key] = **v;
  if (r.bytes_per_token) {
    if (!j.contains("roofline") || !j["roofline"].is_object()) j["roofline"] = nlohmann::json::object();
    j["roofline"]["bytes_per_token"] = *r.bytes_per_token;
  }
  return j;
}

Result<BenchRecord> BenchRecordFromJson(const nlohmann::json& j, const std::string& what) {
  VERITY_RETURN_IF_ERROR(CheckSchema(j, what, kBenchSchema));
  BenchRecord r;
  VERITY_ASSIGN_OR_RETURN(r.build, ReadBuild(j, what));
  r.ok = j.contains("ok") && j["ok"] == true;
  if (!j.contains("metrics") || !j["metrics"].is_object()) return Status::Error(what + " printed no metrics object");
  for (const auto& [name, m] : j["metrics"].items()) {
    VERITY_RETURN_IF_ERROR(CheckBenchValue(m, "metric '" + name + "'", what));
    r.metrics[name] = m.get<double>();
  }
  nlohmann::json rest = j;
  for (const char* core : {"schema", "build", "ok", "metrics"}) rest.erase(core);
  if (rest.contains("roofline") && rest["roofline"].is_object() && rest["roofline"].contains("bytes_per_token")) {
    const auto& b = rest["roofline"]["bytes_per_token"];
    VERITY_RETURN_IF_ERROR(CheckBenchValue(b, "roofline.bytes_per_token", what));
    r.bytes_per_token = b.get<double>();
    rest["roofline"].erase("bytes_per_token");
  }
  TakeWorkloadFields(&rest, &r);
  r.extra = std::move(rest);
  return r;
}

std::string WorkloadKey(const nlohmann::json& j) {
  // A record that states its workload (verity gbench) is taken at its word.
  if (j.contains("workload") && j["workload"].is_string()) return j["workload"];
  if (!j.contains("model") || !j["model"].is_string()) return "";
  std::string model = j["model"];
  if (auto slash = model.find_last_of('/'); slash != std::string::npos) model = model.substr(slash + 1);
  auto text = [&](const char* key, const std::string& absent) -> std::string {
    if (!j.contains(key)) return absent;
    const auto& v = j[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    return std::string(key) + "?";
  };
  // A GPU's speed is not the CPU's: a cuda bench is a workload of its own
  // (CPU records keep the key they always had).
  const bool device = j.contains("backend") && j["backend"] == "cuda";
  // So is a batched one (--batch): its tok/s count every sequence of a step.
  const std::string batch = j.contains("batch") && text("batch", "1") != "1" ? " x" + text("batch", "1") : "";
  return model + " " + text("dtype", "f32") + " " + text("threads", "?") + "t pp" + text("prompt_tokens", "?") + "+tg" +
         text("gen_tokens", "?") + batch + (device ? " cuda" : "");
}

std::string DtypeKey(const nlohmann::json& j, const std::string& workload) {
  std::string field;
  if (j.contains("dtype")) field = j["dtype"].is_string() ? j["dtype"].get<std::string>() : "dtype?";
  else if (j.contains("model") && j["model"].is_string()) field = "f32";
  const bool stated = j.contains("workload") && j["workload"].is_string();
  if (!field.empty() && !stated) return field;  // the workload was built from these very fields
  std::string named;
  std::istringstream words(workload);
  for (std::string w; words >> w;) {
    if (!IsDtypeWord(w)) continue;
    if (!named.empty() && named != w) return "dtype?";
    named = w;
  }
  if (field.empty()) return named;
  // A stated workload that names another dtype than the field: neither is trusted.
  if (!named.empty() && named != field) return "dtype?";
  return field;
}

}  // namespace verity::protocol
