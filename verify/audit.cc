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

AuditReport AuditCheckpoint(const std::string& dir, bool experts_elsewhere) {
  AuditReport r;
  auto fatal = [&](const std::string& line) {
    r.findings.push_back("FATAL " + line);
    r.fatal++;
  };
  auto cfg = ReadHfConfig(dir);
  if (!cfg.ok()) {
    fatal("config: " + cfg.status().message());
    return r;
  }
  {
    // How many tensors the config implies, counted (ExpectedTensors lists them
    // only after the config has been checked against the headers).
    const ModelConfig& c = cfg.value();
    const int64_t per_layer = 6 + (c.n_experts > 0 ? 1 + 3 * static_cast<int64_t>(c.n_experts) : 3);
    const int64_t count = 2 + static_cast<int64_t>(c.n_layers) * per_layer + (c.shared_classifier ? 0 : 1);
    r.tensors = static_cast<int>(std::min<int64_t>(count, INT32_MAX));
  }
  // The dtype the config declares, when it declares one (torch_dtype).
  std::string want_dtype;
  {
    std::ifstream cf(dir + "/config.json");
    std::stringstream cs;
    cs << cf.rdbuf();
    auto j = nlohmann::json::parse(cs.str(), nullptr, false);
    if (j.is_object() && j.contains("torch_dtype") && j["torch_dtype"].is_string()) {
      const std::string t = j["torch_dtype"];
      want_dtype = t == "float32" ? "F32" : t == "float16" ? "F16" : t == "bfloat16" ? "BF16" : "";
      if (want_dtype.empty()) fatal("config: torch_dtype \"" + t + "\" is not float32, float16 or bfloat16");
    }
  }

  // The map from tensor to shard: the index, or a single model.safetensors.
  std::map<std::string, std::string> where;
  SafetensorsIndex index;
  const std::string index_path = dir + "/model.safetensors.index.json";
  bool have_index = false;
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    std::ifstream f(index_path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto idx = f ? ParseSafetensorsIndex(ss.str(), index_path)
                 : Result<SafetensorsIndex>(Status::Error(index_path + ": unreadable"));
    if (!idx.ok()) {
      fatal("index: " + idx.status().message());
      return r;
    }
    index = idx.value();
    where = index.weight_map;
    have_index = true;
  } else if (fs::exists(dir + "/model.safetensors", ec)) {
    auto h = ReadSafetensorsHeader(dir + "/model.safetensors");
    if (!h.ok()) {
      r.shards_total = 1;
      fatal("shard model.safetensors: " + h.status().message());
      return r;
    }
    for (const auto& [name, e] : h->tensors) where[name] = "model.safetensors";
  } else {
    fatal("index: " + index_path + " is missing (and there is no single model.safetensors)");
    return r;
  }

  // The config's dimensions against the headers, before it sizes anything.
  if (Status fit = CheckConfigAgainstCheckpoint(cfg.value(), where, dir); !fit.ok()) {
    fatal("config: " + fit.message());
    return r;
  }
  const auto expected = ExpectedTensors(cfg.value());
  std::map<std::string, Result<SafetensorsHeader>> shards;
  for (const auto& [name, shard] : where)
    if (!shards.count(shard)) shards.emplace(shard, ReadSafetensorsHeader(dir + "/" + shard));
  r.shards_total = static_cast<int>(shards.size());
  for (const auto& [shard, h] : shards) {
    if (h.ok()) r.shards_ok++;
    else fatal("shard " + shard + ": " + h.status().message());
  }

  std::set<std::string> wanted;
  int64_t total = 0;
  for (const auto& t : expected) {
    wanted.insert(t.name);
    auto it = where.find(t.name);
    const bool expert = t.kind == TensorKind::kExpert;
    auto missing = [&](const std::string& why) {
      r.missing++;
      if (expert && experts_elsewhere)
        r.findings.push_back("ALLOWED " + t.name + " (routed expert): " + why + "; supplied elsewhere");
      else fatal(t.name + " (" + TensorKindName(t.kind) + "): " + why);
    };
    if (it == where.end()) {
      missing(have_index ? "missing from the index" : "missing from model.safetensors");
      continue;
    }
    const auto& h = shards.at(it->second);
    if (!h.ok()) {
      missing("its shard " + it->second + " is unreadable");
      continue;
    }
    auto e = h->tensors.find(t.name);
    if (e == h->tensors.end()) {
      missing("not in the header of its shard " + it->second);
      continue;
    }
    if (e->second.shape != t.shape) {
      fatal(t.name + ": shape " + ShapeString(e->second.shape) + " in " + it->second + ", config implies " +
            ShapeString(t.shape));
      continue;
    }
    if (!want_dtype.empty() && TensorDTypeName(e->second.dtype) != want_dtype) {
      fatal(t.name + ": dtype " + TensorDTypeName(e->second.dtype) + " in " + it->second +
            ", config torch_dtype implies " + want_dtype);
      continue;
    }
    total += e->second.end - e->second.begin;
  }
  for (const auto& [name, shard] : where)
    if (!wanted.count(name)) fatal(name + ": unexpected tensor (in " + shard + ")");
  for (const auto& [shard, h] : shards)
    if (h.ok())
      for (const auto& [name, e] : h->tensors)
        if (!where.count(name)) fatal(name + ": in shard " + shard + " but not in the index");
  if (have_index) {
    if (!index.has_total_size) {
      fatal("index: metadata.total_size is missing");
    } else if (r.fatal == 0 && r.missing == 0 && index.total_size != total) {
      fatal("index: metadata.total_size " + std::to_string(index.total_size) + " disagrees with the tensors' " +
            std::to_string(total) + " bytes");
    }
  }
  r.pass = r.fatal == 0;
  return r;
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
