#include "protocol/parity_record.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "protocol/json_object.h"

namespace verity::protocol {
namespace {

using nlohmann::json;

// ---- writing ---------------------------------------------------------------

json DepthsJson(const std::vector<ParityRecord::Depth>& depths) {
  json ds = json::array();
  for (const auto& d : depths) {
    json x = {
        {"depth", d.depth}, {"top1", d.top1}, {"mean_kl", d.mean_kl}, {"max_kl", d.max_kl}, {"positions", d.positions}};
    if (d.worst_position) x["worst_position"] = *d.worst_position;
    if (!d.logits_sha256.empty()) x["logits_sha256"] = d.logits_sha256;
    ds.push_back(std::move(x));
  }
  return ds;
}

json IdentityJson(const ParityRecord::Identity& id) {
  json x = {{"against", id.against},
            {"head_bytes", id.head_bytes},
            {"base_bytes", id.base_bytes},
            {"identical", id.identical},
            {"first_diff", id.first_diff}};
  for (auto [key, v] :
       {std::pair{"head_sha256", &id.head_sha256}, {"base_sha256", &id.base_sha256}, {"golden", &id.golden}})
    if (!v->empty()) x[key] = *v;
  // Where they differ, what each says there (empty when one output is).
  if (!id.identical) x["head_snippet"] = id.head_snippet, x["base_snippet"] = id.base_snippet;
  return x;
}

// ---- reading ---------------------------------------------------------------

// Worst-of that keeps a NaN: std::min/std::max silently drop one.
double Lowest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double Highest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

bool IsHex64(const json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  return s.size() == 64 && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// Reads obj[key] as a number. null, NaN or infinity (nlohmann prints NaN and
// infinity as null) is evidence of a FAIL, not a malformed report: it is
// named in `nonfinite` and kept as NaN so no threshold passes it.
// Returns false when the key is absent or not a number at all.
bool ReadNumber(const json& obj, const char* key, const std::string& where, double* out,
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

// An optional non-negative integer field; absent leaves *out as it is.
Status ReadCount(const json& obj, const char* key, const std::string& what, int* out) {
  if (!obj.contains(key)) return OkStatus();
  const auto& v = obj[key];
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX)
    return Status::Error(what + " printed \"" + key + "\": " + v.dump() + " (expected a non-negative integer)");
  *out = v.get<int>();
  return OkStatus();
}

// One depth entry: depth, top1 and mean_kl must be there; max_kl and positions may be.
Result<ParityRecord::Depth> ReadDepth(const json& d, size_t i, const std::string& what,
                                      std::vector<std::string>* nonfinite) {
  const std::string where = "depths[" + std::to_string(i) + "]";
  ParityRecord::Depth x;
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

// build, mode, dtype, window, tokens, nonfinite, all_rows_sha256: optional, but well-formed when present.
Status ReadOptionalFields(const json& j, const std::string& what, ParityRecord* p) {
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
Result<long long> IdentityCount(const json& id, const char* key, long long lo, const std::string& what) {
  if (!id.contains(key) || !id[key].is_number_integer() || id[key].get<long long>() < lo)
    return Status::Error(what + " printed identity." + key + " " + (id.contains(key) ? id[key].dump() : "(missing)") +
                         " (expected an integer >= " + std::to_string(lo) + ")");
  return id[key].get<long long>();
}

// Kind "tokens": the identity object instead of depths (verity parity-tokens).
Status ReadIdentity(const json& j, const std::string& what, ParityRecord* p) {
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
  // Descriptive only: kept when they are strings.
  for (auto [key, dst] : {std::pair{"head_snippet", &x.head_snippet},
                          {"base_snippet", &x.base_snippet},
                          {"head_sha256", &x.head_sha256},
                          {"base_sha256", &x.base_sha256},
                          {"golden", &x.golden}})
    if (id.contains(key) && id[key].is_string()) *dst = id[key];
  p->worst_top1 = p->worst_mean_kl = NAN;  // no logits were compared
  return OkStatus();
}

// Kinds "verity" and "logits": the depths, the worst recomputed, the digest.
Status ReadDepths(const json& j, const std::string& what, ParityRecord* p) {
  if (!j.contains("depths") || !j["depths"].is_array() || j["depths"].empty())
    return Status::Error(what + " printed no depths (an empty comparison proves nothing)");
  p->worst_top1 = 1.0;
  p->worst_mean_kl = 0.0;
  for (size_t i = 0; i < j["depths"].size(); i++) {
    VERITY_ASSIGN_OR_RETURN(auto x, ReadDepth(j["depths"][i], i, what, &p->nonfinite));
    p->depths.push_back(x);
    p->worst_top1 = Lowest(p->worst_top1, x.top1);
    p->worst_mean_kl = Highest(p->worst_mean_kl, x.mean_kl);
  }
  // worst is recomputed above, not trusted; a non-finite one still condemns the report.
  if (j.contains("worst") && j["worst"].is_object()) {
    double ignored = 0.0;
    ReadNumber(j["worst"], "top1", "worst", &ignored, &p->nonfinite);
    ReadNumber(j["worst"], "mean_kl", "worst", &ignored, &p->nonfinite);
  }
  if (!j.contains("logits_sha256") || !j["logits_sha256"].is_string() ||
      j["logits_sha256"].get<std::string>().size() != 64)
    return Status::Error(what + " printed no 64-hex logits_sha256");
  p->logits_sha256 = j["logits_sha256"];
  return OkStatus();
}

constexpr const char* kKnownKeys[] = {"schema",          "kind",      "depths", "worst",   "logits_sha256",
                                      "all_rows_sha256", "mode",      "window", "tokens",  "build",
                                      "dtype",           "nonfinite", "ok",     "identity"};

}  // namespace

json ToJson(const ParityRecord& r) {
  json j = r.extra.is_object() ? r.extra : json::object();
  j["schema"] = kParitySchema;
  if (r.kind != "verity") j["kind"] = r.kind;
  if (!r.mode.empty()) j["mode"] = r.mode;
  if (!r.dtype.empty()) j["dtype"] = r.dtype;
  if (r.tokens > 0) j["tokens"] = r.tokens;
  if (r.window > 0) j["window"] = r.window;
  if (r.kind == "tokens") {
    j["identity"] = IdentityJson(r.identity);
    if (!r.nonfinite.empty()) j["nonfinite"] = r.nonfinite;
  } else {
    j["depths"] = DepthsJson(r.depths);
    j["worst"] = {{"top1", r.worst_top1}, {"mean_kl", r.worst_mean_kl}};
    j["logits_sha256"] = r.logits_sha256;
    j["nonfinite"] = r.nonfinite;
  }
  if (!r.all_rows_sha256.empty()) j["all_rows_sha256"] = r.all_rows_sha256;
  if (!r.build_id.empty() || !r.artifact_sha256.empty())
    j["build"] = {{"id", r.build_id}, {"artifact_sha256", r.artifact_sha256}};
  j["ok"] = r.ok;
  return j;
}

Result<ParityRecord> ParityRecordFromJson(const json& j, const std::string& what) {
  VERITY_RETURN_IF_ERROR(CheckSchema(j, what, kParitySchema));
  ParityRecord p;
  if (j.contains("kind")) {
    if (j["kind"] != "verity" && j["kind"] != "logits" && j["kind"] != "tokens")
      return Status::Error(what + " printed kind " + j["kind"].dump() +
                           " (expected \"verity\", \"logits\" or \"tokens\")");
    p.kind = j["kind"];
  }
  if (p.kind == "tokens") {
    VERITY_RETURN_IF_ERROR(ReadIdentity(j, what, &p));
  } else {
    VERITY_RETURN_IF_ERROR(ReadDepths(j, what, &p));
  }
  VERITY_RETURN_IF_ERROR(ReadOptionalFields(j, what, &p));
  p.ok = j.contains("ok") && j["ok"] == true;
  p.extra = j;
  for (const char* key : kKnownKeys) p.extra.erase(key);
  return p;
}

}  // namespace verity::protocol
