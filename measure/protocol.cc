// The bench and parity protocols, parsed strictly: one JSON object on stdout,
// the right schema, the fields present and typed. Absence is failure.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include <sstream>
#include <cctype>

#include "measure/measure.h"
#include "measure/llama_bench.h"
#include "measure/raw_report.h"

namespace verity::measure {
namespace {

std::string Tail(const std::string& s) { return OutputTail(s, 300); }

// A parser callback that notes, in *found, the first key an object states twice.
nlohmann::json::parser_callback_t DuplicateKeyFinder(std::string* found) {
  auto open = std::make_shared<std::vector<std::set<std::string>>>();  // keys of each open object
  return [open, found](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open->emplace_back();
    else if (event == E::object_end && !open->empty()) open->pop_back();
    else if (event == E::key && !open->empty() && !open->back().insert(parsed.get<std::string>()).second &&
             found->empty())
      *found = parsed.get<std::string>();
    return true;
  };
}

// The whole stdout as one JSON object, from a command that finished.
Result<nlohmann::json> ParseJsonObject(const CommandOutput& run, const std::string& what, const char* schema,
                                       bool require_zero_exit) {
  if (run.timed_out)
    return Status::Error(what + " timed out after " + std::to_string(static_cast<int>(run.seconds)) + "s");
  if (!run.stopped.empty()) return Status::Error(what + " " + run.stopped);
  if (run.exit_code >= 126 || (require_zero_exit && run.exit_code != 0))
    return Status::Error(what + " exited with status " + std::to_string(run.exit_code) +
                         (run.err.empty() ? "" : ": " + Tail(run.err)));
  if (run.out.find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::Error(what + " printed nothing on stdout (expected one " + schema + " JSON object)");
  nlohmann::json j;
  std::string duplicate;
  try {
    j = nlohmann::json::parse(run.out, DuplicateKeyFinder(&duplicate));
  } catch (const std::exception&) {
    return Status::Error(what + " did not print one JSON object on stdout: '" + Tail(run.out) + "'");
  }
  // The parser keeps the last of two equal keys: the first "ok": false would be gone.
  if (!duplicate.empty())
    return Status::Error(what + " printed key \"" + duplicate + "\" twice in one object: a record whose keys repeat "
                         "is ambiguous (which value counts?), refused");
  if (!j.is_object()) return Status::Error(what + " printed JSON that is not an object");
  return j;
}

// ... that states `schema`.
Status CheckSchema(const nlohmann::json& j, const std::string& what, const char* schema) {
  if (!j.contains("schema") || !j["schema"].is_string())
    return Status::Error(what + " printed JSON without a \"schema\" field (expected " + schema + ")");
  if (j["schema"] != schema)
    return Status::Error(what + " printed schema '" + j["schema"].get<std::string>() + "', expected " + schema);
  return OkStatus();
}

Result<nlohmann::json> ParseObject(const CommandOutput& run, const std::string& what, const char* schema,
                                   bool require_zero_exit) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(run, what, schema, require_zero_exit));
  VERITY_RETURN_IF_ERROR(CheckSchema(j, what, schema));
  return j;
}

bool IsFiniteNumber(const nlohmann::json& j) { return j.is_number() && std::isfinite(j.get<double>()); }

// A bench number: positive, finite and inside [kMinBenchValue, kMaxBenchValue].
Status CheckBenchValue(const nlohmann::json& v, const std::string& name, const std::string& what) {
  if (!IsFiniteNumber(v) || v.get<double>() <= 0.0)
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

}  // namespace

namespace {

// See BenchSample::workload. Fields absent from older records read as their
// defaults then (dtype f32); a malformed field is named in the key so that it
// never matches a well-formed one.
std::string WorkloadOf(const nlohmann::json& j) {
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
  return model + " " + text("dtype", "f32") + " " + text("threads", "?") + "t pp" + text("prompt_tokens", "?") +
         "+tg" + text("gen_tokens", "?") + batch + (device ? " cuda" : "");
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

// The dtype a record measured, whatever its layout (issue 41, finding 3): its
// "dtype" field when it has one; else f32 when it names a model (WorkloadOf's
// default); else the one dtype word of its stated workload, so that
// "stories260K.bin q8_0 1t pp256+tg256" is q8_0 with or without a model field.
// A workload naming two different dtypes, or one disagreeing with the field,
// reads "dtype?", which no evidence matches. "" only when nothing names one.
std::string DtypeOf(const nlohmann::json& j, const std::string& workload) {
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

}  // namespace

Result<BenchSample> ParseBench(const CommandOutput& run, const std::string& metric, const std::string& what,
                               const std::string& command) {
  nlohmann::json j;
  std::string raw_format;
  if (!run.timed_out && run.exit_code == 0 && LooksLikeLlamaBench(run.out)) {
    // llama-bench's -o json / -o jsonl records (measure/llama_bench.h).
    raw_format = "llama-bench";
    VERITY_ASSIGN_OR_RETURN(j, LlamaBenchToBench(run.out, command, what));
  } else {
    VERITY_ASSIGN_OR_RETURN(j, ParseJsonObject(run, what, "verity.bench/1", true));
  }
  // A raw Google Benchmark or hyperfine report (no schema; recognised by its shape) is converted.
  if (raw_format.empty() && !j.contains("schema") && !RawReportFormat(j).empty()) {
    raw_format = RawReportFormat(j);
    VERITY_ASSIGN_OR_RETURN(j, RawReportToBench(j, command, what));
  }
  VERITY_RETURN_IF_ERROR(CheckSchema(j, what, "verity.bench/1"));
  if (!j.contains("ok") || j["ok"] != true) return Status::Error(what + " reported \"ok\": not true");
  const auto& build = j.contains("build") ? j["build"] : nlohmann::json();
  if (!build.is_object() || !build.contains("id") || !build["id"].is_string() ||
      !build.contains("artifact_sha256") || !build["artifact_sha256"].is_string())
    return Status::Error(what + " printed no build.id / build.artifact_sha256");
  if (!j.contains("metrics") || !j["metrics"].is_object() || !j["metrics"].contains(metric))
    return Status::Error(what + " printed no metric '" + metric + "'");
  const auto& v = j["metrics"][metric];
  VERITY_RETURN_IF_ERROR(CheckBenchValue(v, "metric '" + metric + "'", what));
  BenchSample s;
  s.build_id = build["id"];
  s.artifact_sha256 = build["artifact_sha256"];
  s.value = v.get<double>();
  for (const auto& [name, m] : j["metrics"].items()) {
    VERITY_RETURN_IF_ERROR(CheckBenchValue(m, "metric '" + name + "'", what));
    s.metrics[name] = m.get<double>();
  }
  if (j.contains("roofline") && j["roofline"].is_object() && j["roofline"].contains("bytes_per_token")) {
    const auto& b = j["roofline"]["bytes_per_token"];
    VERITY_RETURN_IF_ERROR(CheckBenchValue(b, "roofline.bytes_per_token", what));
    s.bytes_per_token = b.get<double>();
  }
  s.workload = WorkloadOf(j);
  s.raw_format = raw_format;
  if (j.contains("backend") && j["backend"].is_string()) s.backend = j["backend"].get<std::string>();
  s.dtype = DtypeOf(j, s.workload);
  return s;
}

namespace {

// Worst-of that keeps a NaN: std::min/std::max silently drop one.
double Lowest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double Highest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

bool IsHex64(const nlohmann::json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  return s.size() == 64 && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// Reads obj[key] as a number. null, NaN or infinity (nlohmann prints NaN and
// infinity as null) is evidence of a FAIL, not a malformed report: it is
// named in `nonfinite` and kept as NaN so no threshold passes it.
// Returns false when the key is absent or not a number at all.
bool ReadNumber(const nlohmann::json& obj, const char* key, const std::string& where, double* out,
                std::vector<std::string>* nonfinite) {
  if (!obj.contains(key)) return false;
  const auto& v = obj[key];
  if (v.is_null() || (v.is_number() && !std::isfinite(v.get<double>()))) {
    nonfinite->push_back(where + "." + key);
    *out = NAN;
    return true;
  }
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return true;
}

// An optional positive integer field; absent leaves *out as it is.
Status ReadCount(const nlohmann::json& obj, const char* key, const std::string& what, int* out) {
  if (!obj.contains(key)) return OkStatus();
  const auto& v = obj[key];
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX)
    return Status::Error(what + " printed \"" + key + "\": " + v.dump() + " (expected a non-negative integer)");
  *out = v.get<int>();
  return OkStatus();
}

// One depth entry: depth, top1 and mean_kl must be there; max_kl and positions may be.
Result<ParityEvidence::Depth> ParseDepth(const nlohmann::json& d, size_t i, const std::string& what,
                                         std::vector<std::string>* nonfinite) {
  const std::string where = "depths[" + std::to_string(i) + "]";
  ParityEvidence::Depth x;
  if (!d.is_object() || !d.contains("depth") || !d["depth"].is_number_integer() ||
      !ReadNumber(d, "top1", where, &x.top1, nonfinite) || !ReadNumber(d, "mean_kl", where, &x.mean_kl, nonfinite))
    return Status::Error(what + ": a depth entry lacks depth/top1/mean_kl numbers (" + where + ")");
  // Range-checked before narrowing: 2^32 + 512 must not become depth 512.
  const auto& depth = d["depth"];
  const bool fits = depth.is_number_unsigned() ? depth.get<uint64_t>() <= static_cast<uint64_t>(INT_MAX)
                                               : depth.get<int64_t>() >= INT_MIN && depth.get<int64_t>() <= INT_MAX;
  if (!fits) return Status::Error(what + " printed " + where + ".depth " + depth.dump() + ", outside the int range");
  x.depth = static_cast<int>(depth.get<int64_t>());
  if (!ReadNumber(d, "max_kl", where, &x.max_kl, nonfinite)) x.max_kl = x.mean_kl;
  VERITY_RETURN_IF_ERROR(ReadCount(d, "positions", what + " " + where, &x.positions));
  return x;
}

// build, mode, window, tokens, nonfinite, all_rows_sha256: optional, but well-formed when present.
Status ParseEvidenceFields(const nlohmann::json& j, const std::string& what, ParityEvidence* p) {
  if (j.contains("build")) {
    const auto& b = j["build"];
    if (!b.is_object() || !b.contains("id") || !b["id"].is_string() || !b.contains("artifact_sha256") ||
        !b["artifact_sha256"].is_string())
      return Status::Error(what + " printed a build without string id / artifact_sha256");
    p->build_id = b["id"];
    p->artifact_sha256 = b["artifact_sha256"];
  }
  if (j.contains("mode")) {
    const auto& m = j["mode"];
    if (m != "standard" && m != "deep")
      return Status::Error(what + " printed mode " + m.dump() + " (expected \"standard\" or \"deep\")");
    p->mode = m;
  }
  if (j.contains("dtype")) {
    if (!j["dtype"].is_string() || j["dtype"].get<std::string>().empty())
      return Status::Error(what + " printed dtype " + j["dtype"].dump() + " (expected a dtype name such as \"f32\")");
    p->dtype = j["dtype"];
  }
  VERITY_RETURN_IF_ERROR(ReadCount(j, "window", what, &p->window));
  VERITY_RETURN_IF_ERROR(ReadCount(j, "tokens", what, &p->tokens));
  if (j.contains("nonfinite")) {  // the producer's own findings (e.g. a NaN row no depth scored)
    const auto& n = j["nonfinite"];
    if (!n.is_array() || !std::all_of(n.begin(), n.end(), [](const auto& e) { return e.is_string(); }))
      return Status::Error(what + " printed a nonfinite that is not a list of strings");
    for (const auto& e : n) p->nonfinite.push_back(e.get<std::string>());
  }
  if (j.contains("all_rows_sha256")) {
    if (!IsHex64(j["all_rows_sha256"])) return Status::Error(what + " printed an all_rows_sha256 that is not 64 hex");
    p->all_rows_sha256 = j["all_rows_sha256"];
  }
  return OkStatus();
}

// A byte count or offset of a token-identity record: an integer from `lo`.
Result<long long> IdentityCount(const nlohmann::json& id, const char* key, long long lo, const std::string& what) {
  if (!id.contains(key) || !id[key].is_number_integer() || id[key].get<long long>() < lo)
    return Status::Error(what + " printed identity." + key + " " + (id.contains(key) ? id[key].dump() : "(missing)") +
                         " (expected an integer >= " + std::to_string(lo) + ")");
  return id[key].get<long long>();
}

// Kind "tokens": the identity object instead of depths (verity parity-tokens).
Status ParseIdentity(const nlohmann::json& j, const std::string& what, ParityEvidence* p) {
  if (!j.contains("identity") || !j["identity"].is_object())
    return Status::Error(what + " printed kind \"tokens\" without an identity object");
  const auto& id = j["identity"];
  auto& x = p->identity;
  if (!id.contains("identical") || !id["identical"].is_boolean())
    return Status::Error(what + " printed identity.identical that is not true or false");
  x.identical = id["identical"];
  if (!id.contains("against") || (id["against"] != "base" && id["against"] != "golden"))
    return Status::Error(what + " printed identity.against that is not \"base\" or \"golden\"");
  x.against = id["against"];
  VERITY_ASSIGN_OR_RETURN(x.head_bytes, IdentityCount(id, "head_bytes", 0, what));
  VERITY_ASSIGN_OR_RETURN(x.base_bytes, IdentityCount(id, "base_bytes", 0, what));
  VERITY_ASSIGN_OR_RETURN(x.first_diff, IdentityCount(id, "first_diff", -1, what));
  // The facts must agree with each other: identical outputs have one length and no difference.
  if (x.identical != (x.first_diff < 0) || (x.identical && x.head_bytes != x.base_bytes))
    return Status::Error(what + " printed an identity whose identical, first_diff and byte counts disagree");
  for (const char* k : {"head_snippet", "base_snippet"})
    if (id.contains(k) && id[k].is_string()) (k[0] == 'h' ? x.head_snippet : x.base_snippet) = id[k];
  p->worst_top1 = p->worst_mean_kl = NAN;  // no logits were compared
  return OkStatus();
}

}  // namespace

Result<ParityEvidence> ParseParity(const CommandOutput& run, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(run, what, "verity.parity/1", false));
  ParityEvidence p;
  p.raw = run.out;  // as printed, byte for byte: what the seal covers is what the command said
  if (j.contains("kind")) {
    if (j["kind"] != "verity" && j["kind"] != "logits" && j["kind"] != "tokens")
      return Status::Error(what + " printed kind " + j["kind"].dump() + " (expected \"verity\", \"logits\" or \"tokens\")");
    p.kind = j["kind"];
  }
  if (p.kind == "tokens") {
    VERITY_RETURN_IF_ERROR(ParseIdentity(j, what, &p));
    VERITY_RETURN_IF_ERROR(ParseEvidenceFields(j, what, &p));
    p.reported_ok = j.contains("ok") && j["ok"] == true;
    p.exit_code = run.exit_code;
    return p;
  }
  if (!j.contains("depths") || !j["depths"].is_array() || j["depths"].empty())
    return Status::Error(what + " printed no depths (an empty comparison proves nothing)");
  p.worst_top1 = 1.0;
  p.worst_mean_kl = 0.0;
  for (size_t i = 0; i < j["depths"].size(); i++) {
    VERITY_ASSIGN_OR_RETURN(auto x, ParseDepth(j["depths"][i], i, what, &p.nonfinite));
    p.depths.push_back(x);
    p.worst_top1 = Lowest(p.worst_top1, x.top1);
    p.worst_mean_kl = Highest(p.worst_mean_kl, x.mean_kl);
  }
  // worst is recomputed above, not trusted; a non-finite one still condemns the report.
  if (j.contains("worst") && j["worst"].is_object()) {
    double ignored = 0.0;
    ReadNumber(j["worst"], "top1", "worst", &ignored, &p.nonfinite);
    ReadNumber(j["worst"], "mean_kl", "worst", &ignored, &p.nonfinite);
  }
  if (!j.contains("logits_sha256") || !j["logits_sha256"].is_string() ||
      j["logits_sha256"].get<std::string>().size() != 64)
    return Status::Error(what + " printed no 64-hex logits_sha256");
  p.logits_sha256 = j["logits_sha256"];
  VERITY_RETURN_IF_ERROR(ParseEvidenceFields(j, what, &p));
  p.reported_ok = j.contains("ok") && j["ok"] == true;
  p.exit_code = run.exit_code;
  return p;
}

}  // namespace verity::measure
