#include "verify/audit.h"
#include "engine/weights.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "formats/safetensors.h"

namespace verity {
namespace fs = std::filesystem;

std::string AuditReport::Summary() const {
  return "audit: tensors=" + std::to_string(tensors) + " shards=" + std::to_string(shards_ok) + "/" +
         std::to_string(shards_total) + " missing=" + std::to_string(missing) + " fatal=" + std::to_string(fatal) +
         " verdict=" + (pass ? "PASS" : "FAIL");
}

namespace {

// One audit's state as its steps fill it in: the report, and the map from
// tensor to shard with the shards' headers.
struct Audit {
  Audit(const std::string& dir, bool experts_elsewhere) : dir(dir), experts_elsewhere(experts_elsewhere) {}

  const std::string& dir;
  bool experts_elsewhere;
  AuditReport r;
  std::string want_dtype;  // the dtype the config declares, or "" when it declares none
  std::map<std::string, std::string> where;
  SafetensorsIndex index;
  bool have_index = false;
  std::map<std::string, Result<SafetensorsHeader>> shards;
  std::set<std::string> wanted;
  int64_t total = 0;

  void Fatal(const std::string& line) {
    r.findings.push_back("FATAL " + line);
    r.fatal++;
  }
};

// How many tensors the config implies, counted (ExpectedTensors lists them
// only after the config has been checked against the headers): per layer two
// norms, q, k, v and o (Phi-3: qkv fused), Qwen2's three biases, Qwen3's two
// norms, and the FFN's three (Phi-3: gate_up fused) or the router and experts.
int CountImpliedTensors(const ModelConfig& c) {
  const int64_t attention = (c.fused_projections ? 2 : 4) + (c.qkv_bias ? 3 : 0) + (c.qk_norm ? 2 : 0);
  const int64_t ffn = c.n_experts > 0 ? 1 + 3 * static_cast<int64_t>(c.n_experts) : c.fused_projections ? 2 : 3;
  const int64_t count = 2 + static_cast<int64_t>(c.n_layers) * (2 + attention + ffn) + (c.shared_classifier ? 0 : 1);
  return static_cast<int>(std::min<int64_t>(count, INT32_MAX));
}

// The dtype the config declares, when it declares one (torch_dtype).
void ReadDeclaredDtype(Audit& a) {
  std::ifstream cf(a.dir + "/config.json");
  std::stringstream cs;
  cs << cf.rdbuf();
  auto j = nlohmann::json::parse(cs.str(), nullptr, false);
  if (j.is_object() && j.contains("torch_dtype") && j["torch_dtype"].is_string()) {
    const std::string t = j["torch_dtype"];
    a.want_dtype = t == "float32" ? "F32" : t == "float16" ? "F16" : t == "bfloat16" ? "BF16" : "";
    if (a.want_dtype.empty()) a.Fatal("config: torch_dtype \"" + t + "\" is not float32, float16 or bfloat16");
  }
}

// The map from tensor to shard: the index, or a single model.safetensors.
// False (with the finding) when there is neither, or it cannot be read.
bool MapTensorsToShards(Audit& a) {
  const std::string index_path = a.dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    std::ifstream f(index_path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto idx = f ? ParseSafetensorsIndex(ss.str(), index_path)
                 : Result<SafetensorsIndex>(Status::Error(index_path + ": unreadable"));
    if (!idx.ok()) {
      a.Fatal("index: " + idx.status().message());
      return false;
    }
    a.index = idx.value();
    a.where = a.index.weight_map;
    a.have_index = true;
  } else if (fs::exists(a.dir + "/model.safetensors", ec)) {
    auto h = ReadSafetensorsHeader(a.dir + "/model.safetensors");
    if (!h.ok()) {
      a.r.shards_total = 1;
      a.Fatal("shard model.safetensors: " + h.status().message());
      return false;
    }
    for (const auto& [name, e] : h->tensors) a.where[name] = "model.safetensors";
  } else {
    a.Fatal("index: " + index_path + " is missing (and there is no single model.safetensors)");
    return false;
  }
  return true;
}

// Every shard's header, read once; an unreadable one is a finding.
void ReadShardHeaders(Audit& a) {
  for (const auto& [name, shard] : a.where)
    if (!a.shards.count(shard)) a.shards.emplace(shard, ReadSafetensorsHeader(a.dir + "/" + shard));
  a.r.shards_total = static_cast<int>(a.shards.size());
  for (const auto& [shard, h] : a.shards) {
    if (h.ok()) a.r.shards_ok++;
    else a.Fatal("shard " + shard + ": " + h.status().message());
  }
}

// One tensor the config requires: mapped, its shard readable, in that shard's
// header, with the shape and dtype the config implies; its bytes count
// towards the total.
void CheckExpectedTensor(Audit& a, const CheckpointTensor& t) {
  a.wanted.insert(t.name);
  auto it = a.where.find(t.name);
  const bool expert = t.kind == TensorKind::kExpert;
  auto missing = [&](const std::string& why) {
    a.r.missing++;
    if (expert && a.experts_elsewhere)
      a.r.findings.push_back("ALLOWED " + t.name + " (routed expert): " + why + "; supplied elsewhere");
    else a.Fatal(t.name + " (" + TensorKindName(t.kind) + "): " + why);
  };
  if (it == a.where.end()) {
    missing(a.have_index ? "missing from the index" : "missing from model.safetensors");
    return;
  }
  const auto& h = a.shards.at(it->second);
  if (!h.ok()) {
    missing("its shard " + it->second + " is unreadable");
    return;
  }
  auto e = h->tensors.find(t.name);
  if (e == h->tensors.end()) {
    missing("not in the header of its shard " + it->second);
    return;
  }
  if (e->second.shape != t.shape) {
    a.Fatal(t.name + ": shape " + ShapeString(e->second.shape) + " in " + it->second + ", config implies " +
            ShapeString(t.shape));
    return;
  }
  if (!a.want_dtype.empty() && TensorDTypeName(e->second.dtype) != a.want_dtype) {
    a.Fatal(t.name + ": dtype " + TensorDTypeName(e->second.dtype) + " in " + it->second +
            ", config torch_dtype implies " + a.want_dtype);
    return;
  }
  a.total += e->second.end - e->second.begin;
}

// Tensors the config does not imply, and header tensors the index omits.
void CheckStrayTensors(Audit& a) {
  for (const auto& [name, shard] : a.where)
    if (!a.wanted.count(name)) a.Fatal(name + ": unexpected tensor (in " + shard + ")");
  for (const auto& [shard, h] : a.shards)
    if (h.ok())
      for (const auto& [name, e] : h->tensors)
        if (!a.where.count(name)) a.Fatal(name + ": in shard " + shard + " but not in the index");
}

// The index's metadata.total_size against the tensors' bytes, once all is well.
void CheckTotalSize(Audit& a) {
  if (!a.have_index) return;
  if (!a.index.has_total_size) {
    a.Fatal("index: metadata.total_size is missing");
  } else if (a.r.fatal == 0 && a.r.missing == 0 && a.index.total_size != a.total) {
    a.Fatal("index: metadata.total_size " + std::to_string(a.index.total_size) + " disagrees with the tensors' " +
            std::to_string(a.total) + " bytes");
  }
}

}  // namespace

AuditReport AuditCheckpoint(const std::string& dir, bool experts_elsewhere) {
  Audit a(dir, experts_elsewhere);
  auto cfg = ReadHfConfig(dir);
  if (!cfg.ok()) {
    a.Fatal("config: " + cfg.status().message());
    return a.r;
  }
  a.r.tensors = CountImpliedTensors(cfg.value());
  ReadDeclaredDtype(a);
  if (!MapTensorsToShards(a)) return a.r;
  // The config's dimensions against the headers, before it sizes anything.
  if (Status fit = CheckConfigAgainstCheckpoint(cfg.value(), a.where, dir); !fit.ok()) {
    a.Fatal("config: " + fit.message());
    return a.r;
  }
  ReadShardHeaders(a);
  // The tensors the checkpoint must hold (fused ones once: Phi-3's).
  for (const auto& t : CheckpointTensors(ExpectedTensors(cfg.value()))) CheckExpectedTensor(a, t);
  CheckStrayTensors(a);
  CheckTotalSize(a);
  a.r.pass = a.r.fatal == 0;
  return a.r;
}

Result<std::vector<Probe>> ReadProbes(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error(path + ": cannot open probes file");
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const std::exception&) {
    return Status::Error(path + ": not valid JSON");
  }
  if (!j.is_array() || j.empty()) return Status::Error(path + ": expected a non-empty JSON array of probes");
  std::vector<Probe> out;
  for (const auto& p : j) {
    if (!p.is_object() || !p.contains("prompt") || !p["prompt"].is_string() || !p.contains("expect") ||
        !p["expect"].is_string() || p["expect"].get<std::string>().empty())
      return Status::Error(path + ": each probe needs string \"prompt\" and non-empty \"expect\"");
    out.push_back({p["prompt"], p["expect"]});
  }
  return out;
}

std::string DefaultProbesPath(const std::string& model_path) {
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) return model_path + "/probes.json";
  fs::path p(model_path);
  return (p.parent_path() / (p.stem().string() + ".probes.json")).string();
}

Result<std::vector<ProbeResult>> RunProbes(const Model& model, const Tokenizer& tok, const std::vector<Probe>& probes) {
  std::vector<ProbeResult> out;
  for (const auto& p : probes) {
    VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend("reference"));
    VERITY_ASSIGN_OR_RETURN(auto made, Transformer::Create(model, std::move(kern)));
    Transformer& t = *made;
    GenerateOptions opt;
    opt.prompt = p.prompt;
    const int prompt_tokens = static_cast<int>(tok.Encode(p.prompt, true, false).size());
    const int want_tokens = static_cast<int>(tok.Encode(p.expect, false, false).size());
    opt.steps = std::min(model.config.seq_len, prompt_tokens + want_tokens + 4);
    VERITY_ASSIGN_OR_RETURN(GenerateResult g, Generate(t, tok, opt));
    ProbeResult r;
    r.probe = p;
    std::string text = g.text.substr(0, g.text.size() - 1);  // drop run.c's final newline
    r.got = text.rfind(p.prompt, 0) == 0 ? text.substr(p.prompt.size()) : text;
    r.pass = text.rfind(p.prompt + p.expect, 0) == 0;
    out.push_back(r);
  }
  return out;
}

}  // namespace verity
