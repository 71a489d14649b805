// Hugging Face checkpoints: config.json, safetensors shards and their index.
// Loading maps every tensor the config implies, by name, and refuses anything
// missing or unexpected; writing is the converter and the synthetic generator.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "base/host_parallel.h"
#include "base/strings.h"
#include "corruptions/engine_hooks.h"
#include "formats/checkpoint_config.h"
#include "engine/engine.h"
#include "formats/safetensors.h"
#include "engine/weights.h"

namespace verity {
namespace fs = std::filesystem;

const char* TensorKindName(TensorKind k) {
  switch (k) {
    case TensorKind::kEmbedding: return "embedding";
    case TensorKind::kNorm: return "norm";
    case TensorKind::kAttention: return "attention";
    case TensorKind::kBias: return "bias";
    case TensorKind::kRouter: return "router";
    case TensorKind::kExpert: return "expert";
    case TensorKind::kFfn: return "ffn";
    case TensorKind::kHead: return "output-head";
  }
  return "?";
}

namespace {
// Marks [begin, end) as the rows, in order, of one stored tensor `name`
// (Phi-3: q, k and v in self_attn.qkv_proj; gate then up in mlp.gate_up_proj).
void Fuse(std::vector<ExpectedTensor>::iterator begin, std::vector<ExpectedTensor>::iterator end,
          const std::string& name) {
  std::vector<int64_t> rows;
  for (auto it = begin; it != end; ++it) rows.push_back(it->shape[0]);
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  for (auto it = begin; it != end; ++it) {
    it->fused = name, it->fused_shape = {total, begin->shape[1]};
    it->first_row = corruptions::ActiveEngineHooks().FusedPartFirstRow(rows, static_cast<size_t>(it - begin));
  }
}
}  // namespace

std::vector<CheckpointTensor> CheckpointTensors(const std::vector<ExpectedTensor>& expected) {
  std::vector<CheckpointTensor> out;
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < expected.size(); i++) {
    const ExpectedTensor& e = expected[i];
    auto [it, fresh] = at.emplace(e.stored_name(), out.size());
    if (fresh) out.push_back({e.stored_name(), e.stored_shape(), e.kind, {}});
    out[it->second].parts.push_back(i);
  }
  return out;
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  const int64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), V = c.vocab_size;
  std::vector<ExpectedTensor> t;
  const int64_t q = c.q_dim();
  t.push_back({"model.embed_tokens.weight", {V, d}, TensorKind::kEmbedding});
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {d}, TensorKind::kNorm});
    t.push_back({p + "self_attn.q_proj.weight", {q, d}, TensorKind::kAttention});
    t.push_back({p + "self_attn.k_proj.weight", {kv, d}, TensorKind::kAttention});
    t.push_back({p + "self_attn.v_proj.weight", {kv, d}, TensorKind::kAttention});
    if (c.fused_projections) Fuse(t.end() - 3, t.end(), p + "self_attn.qkv_proj.weight");
    t.push_back({p + "self_attn.o_proj.weight", {d, q}, TensorKind::kAttention});
    if (c.qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, TensorKind::kBias});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, TensorKind::kBias});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, TensorKind::kBias});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, TensorKind::kNorm});
      t.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, TensorKind::kNorm});
    }
    t.push_back({p + "post_attention_layernorm.weight", {d}, TensorKind::kNorm});  // Gemma: the attention output's
    if (c.gemma) t.push_back({p + "pre_feedforward_layernorm.weight", {d}, TensorKind::kNorm});
    if (c.n_experts > 0) {
      t.push_back({p + "block_sparse_moe.gate.weight", {c.n_experts, d}, TensorKind::kRouter});
      for (int e = 0; e < c.n_experts; e++) {
        const std::string q = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        t.push_back({q + "w1.weight", {h, d}, TensorKind::kExpert});
        t.push_back({q + "w2.weight", {d, h}, TensorKind::kExpert});
        t.push_back({q + "w3.weight", {h, d}, TensorKind::kExpert});
      }
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {h, d}, TensorKind::kFfn});
      t.push_back({p + "mlp.up_proj.weight", {h, d}, TensorKind::kFfn});
      if (c.fused_projections) Fuse(t.end() - 2, t.end(), p + "mlp.gate_up_proj.weight");
      t.push_back({p + "mlp.down_proj.weight", {d, h}, TensorKind::kFfn});
    }
    if (c.gemma) t.push_back({p + "post_feedforward_layernorm.weight", {d}, TensorKind::kNorm});
  }
  t.push_back({"model.norm.weight", {d}, TensorKind::kNorm});
  if (!c.shared_classifier) t.push_back({"lm_head.weight", {V, d}, TensorKind::kHead});
  return t;
}

std::vector<Slot> Slots(Model& m) {
  std::vector<Slot> s;
  auto vec = [&s](const float** p) { s.push_back({p, nullptr}); };
  auto mat = [&s](kernels::Weights* w, bool ffn_rows = false, bool ffn_cols = false) {
    s.push_back({nullptr, w, ffn_rows, ffn_cols});
  };
  vec(&m.token_embedding);
  for (auto& L : m.layers) {
    vec(&L.rms_att);
    for (kernels::Weights* w : {&L.wq, &L.wk, &L.wv, &L.wo}) mat(w);
    if (m.config.qkv_bias)
      for (const float** b : {&L.bq, &L.bk, &L.bv}) vec(b);
    if (m.config.qk_norm)
      for (const float** n : {&L.q_norm, &L.k_norm}) vec(n);
    if (m.config.gemma) vec(&L.post_att_norm);  // post_attention_layernorm: Gemma's, then its FFN's input norm
    vec(&L.rms_ffn);
    if (m.config.n_experts > 0) {
      mat(&L.router);
      for (auto& e : L.experts) {
        mat(&e.w1, true);
        mat(&e.w2, false, true);
        mat(&e.w3, true);
      }
    } else {
      mat(&L.w1, true);  // gate, up, down
      mat(&L.w3, true);
      mat(&L.w2, false, true);
    }
    if (m.config.gemma) vec(&L.post_ffn_norm);
  }
  vec(&m.rms_final);
  if (!m.config.shared_classifier) mat(&m.classifier);
  return s;
}

namespace {

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Status Bind(Model& m, kernels::DType dtype, const std::vector<ExpectedTensor>& expected,
            const std::function<StoredTensor(size_t)>& stored) {
  m.dtype = dtype;
  m.ffn_dim = FfnDim(m.config, dtype);
  m.layers.assign(m.config.n_layers, LayerWeights{});
  for (auto& L : m.layers) L.experts.assign(m.config.n_experts, ExpertWeights{});
  const auto slots = Slots(m);
  WeightPlacer place(m, m.source);
  for (size_t i = 0; i < expected.size(); i++) {
    const Slot& slot = slots[i];
    const auto& shape = expected[i].shape;
    if (slot.vec == &m.token_embedding && stored(i).block) {
      // Kept in its blocks; rows are dequantized as they are looked up.
      VERITY_ASSIGN_OR_RETURN(m.embedding_blocks,
                              place.Matrix(stored(i), static_cast<int>(shape[0]), static_cast<int>(shape[1])));
    } else if (slot.vec) {
      VERITY_ASSIGN_OR_RETURN(*slot.vec, place.Vector(stored(i), Count(shape)));
    } else {
      const int rows = static_cast<int>(shape[0]), cols = static_cast<int>(shape[1]);
      VERITY_ASSIGN_OR_RETURN(*slot.mat, place.Matrix(stored(i), rows, cols, slot.ffn_rows ? m.ffn_dim : rows,
                                                      slot.ffn_cols ? m.ffn_dim : cols));
    }
  }
  if (m.config.shared_classifier && !m.token_embedding) {
    m.classifier = m.embedding_blocks;  // the blocks themselves, read once
  } else if (m.config.shared_classifier) {
    // The embedding table itself for f32; a converted copy (the table stays f32 for lookups).
    StoredTensor shared{expected[0].name + " (shared classifier)", TensorDType::kF32,
                        reinterpret_cast<const unsigned char*>(m.token_embedding), /*mapped=*/false};
    VERITY_ASSIGN_OR_RETURN(m.classifier, place.Matrix(shared, m.config.vocab_size, m.config.dim));
    // A copy (the table was not aligned for the kernels) holds the same f32
    // bytes: look rows up in it too, so the table is resident once.
    if (m.classifier.dtype == kernels::DType::kF32 && m.classifier.data != m.token_embedding)
      m.token_embedding = static_cast<const float*>(m.classifier.data);
  }
  if (m.ffn_dim != m.config.hidden_dim)
    place.Note(m.source + ": q8_0: FFN width " + std::to_string(m.config.hidden_dim) + " padded with zero weights to " +
               std::to_string(m.ffn_dim) + " (exact)");
  place.Finish();
  return OkStatus();
}

namespace {

Result<std::string> ReadText(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::Error(path + ": missing");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) return Status::Error(path + ": unreadable");
  return ss.str();
}

}  // namespace

Result<ModelConfig> ReadHfConfig(const std::string& dir, std::vector<std::string>* notes) {
  const std::string path = dir + "/config.json";
  VERITY_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  VERITY_ASSIGN_OR_RETURN(ModelConfig c, ParseHfConfig(text, path, notes));
  // generation_config.json beside it wins for the ids it holds (transformers'
  // generate() reads the generation config).
  const std::string gen_path = dir + "/generation_config.json";
  std::error_code ec;
  if (!fs::exists(gen_path, ec)) return c;
  VERITY_ASSIGN_OR_RETURN(std::string gen_text, ReadText(gen_path));
  VERITY_ASSIGN_OR_RETURN(nlohmann::json gen, ParseJsonObject(gen_text, gen_path));
  if (gen.contains("bos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(std::vector<int> ids, ParseTokenIds(gen["bos_token_id"], gen_path, "bos_token_id"));
    if (ids.size() > 1) return Status::Error(gen_path + ": key 'bos_token_id' must be one token id");
    c.bos_id = ids.empty() ? -1 : ids[0];
  }
  if (gen.contains("eos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(c.eos_ids, ParseTokenIds(gen["eos_token_id"], gen_path, "eos_token_id"));
  }
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, gen_path));
  return c;
}

Status CheckConfigAgainstCheckpoint(const ModelConfig& c, const std::map<std::string, std::string>& where,
                                    const std::string& dir) {
  const std::string cfg = dir + "/config.json";
  std::map<std::string, Result<SafetensorsHeader>> headers;
  // The shape a header declares for `name`; nullptr when no readable header
  // names it (the loader and the audit name what is missing or unreadable).
  auto shape_of = [&](const std::string& name) -> const std::vector<int64_t>* {
    auto it = where.find(name);
    if (it == where.end()) return nullptr;
    if (!headers.count(it->second)) headers.emplace(it->second, ReadSafetensorsHeader(dir + "/" + it->second));
    const auto& h = headers.at(it->second);
    if (!h.ok()) return nullptr;
    auto e = h->tensors.find(name);
    return e == h->tensors.end() ? nullptr : &e->second.shape;
  };
  // Layers: the last one the config implies must be named, and no later one.
  const std::string last = "model.layers." + std::to_string(c.n_layers - 1) + ".input_layernorm.weight";
  const std::string after = "model.layers." + std::to_string(c.n_layers) + ".input_layernorm.weight";
  if (!where.count(last) || where.count(after))
    return Status::Error(cfg + ": num_hidden_layers is " + std::to_string(c.n_layers) + " but the checkpoint " +
                         (where.count(after) ? "also holds " + after : "does not hold " + last));
  struct Want {
    std::string tensor;
    int dim;
    int64_t value;
    std::string key;
  };
  const std::string l0 = "model.layers.0.";
  std::vector<Want> wants = {
      {"model.embed_tokens.weight", 0, c.vocab_size, "vocab_size"},
      {"model.embed_tokens.weight", 1, c.dim, "hidden_size"},
      {l0 + "self_attn.q_proj.weight", 0, static_cast<int64_t>(c.n_heads) * c.head_dim,
       "num_attention_heads x head_dim (" + std::to_string(c.n_heads) + " x " + std::to_string(c.head_dim) + ")"},
      {l0 + "self_attn.k_proj.weight", 0, static_cast<int64_t>(c.n_kv_heads) * c.head_dim,
       "num_key_value_heads x head_dim (" + std::to_string(c.n_kv_heads) + " x " + std::to_string(c.head_dim) + ")"}};
  if (c.n_experts > 0) {
    wants.push_back({l0 + "block_sparse_moe.gate.weight", 0, c.n_experts, "num_local_experts"});
    wants.push_back({l0 + "block_sparse_moe.experts.0.w1.weight", 0, c.hidden_dim, "intermediate_size"});
  } else {
    wants.push_back({l0 + "mlp.gate_proj.weight", 0, c.hidden_dim, "intermediate_size"});
  }
  if (c.fused_projections) {  // Phi-3: the same sizes, as rows of the fused tensors
    const int64_t qkv = c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
    wants.push_back({l0 + "self_attn.qkv_proj.weight", 0, qkv,
                     "(num_attention_heads + 2 x num_key_value_heads) x head_dim (" + std::to_string(qkv) + ")"});
    wants.push_back(
        {l0 + "mlp.gate_up_proj.weight", 0, 2 * static_cast<int64_t>(c.hidden_dim), "2 x intermediate_size"});
  }
  for (const Want& w : wants) {
    const std::vector<int64_t>* shape = shape_of(w.tensor);
    if (!shape) continue;  // absent: the loader or the audit names it
    if (static_cast<int>(shape->size()) != 2 || (*shape)[w.dim] != w.value)
      return Status::Error(cfg + ": " + w.key + " is " + std::to_string(w.value) + " but tensor " + w.tensor +
                           " has shape " + ShapeString(*shape));
  }
  return OkStatus();
}

namespace {

// Where each tensor lives: the index, or the single model.safetensors.
Result<std::map<std::string, std::string>> MapHfTensors(const std::string& dir) {
  std::map<std::string, std::string> where;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (fs::exists(index_path)) {
    VERITY_ASSIGN_OR_RETURN(std::string text, ReadText(index_path));
    VERITY_ASSIGN_OR_RETURN(SafetensorsIndex idx, ParseSafetensorsIndex(text, index_path));
    where = idx.weight_map;
  } else if (fs::exists(dir + "/model.safetensors")) {
    VERITY_ASSIGN_OR_RETURN(SafetensorsHeader h, ReadSafetensorsHeader(dir + "/model.safetensors"));
    for (const auto& [name, e] : h.tensors) where[name] = "model.safetensors";
  } else {
    return Status::Error(dir + ": neither model.safetensors.index.json nor model.safetensors");
  }
  return where;
}

// Every expected tensor mapped to a shard file that exists, and nothing else
// mapped; `wanted` gets the expected names.
Status CheckMappedNames(const std::string& dir, const std::vector<CheckpointTensor>& stored,
                        const std::map<std::string, std::string>& where, std::set<std::string>* wanted) {
  for (const auto& t : stored) {
    wanted->insert(t.name);
    if (!where.count(t.name))
      return Status::Error(dir + ": required tensor " + t.name + " (" + TensorKindName(t.kind) + ") is missing");
  }
  for (const auto& [name, shard] : where)
    if (!wanted->count(name)) return Status::Error(dir + ": unexpected tensor " + name + " (in " + shard + ")");
  for (const auto& t : stored) {
    std::error_code fec;
    if (!fs::is_regular_file(dir + "/" + where.at(t.name), fec))
      return Status::Error(dir + ": required tensor " + t.name + " (" + TensorKindName(t.kind) + ") is in " +
                           where.at(t.name) + ", which is missing");
  }
  return OkStatus();
}

// Every shard's header, read once, holding only wanted tensors.
Result<std::map<std::string, SafetensorsHeader>> ReadShardHeaders(const std::string& dir,
                                                                  const std::map<std::string, std::string>& where,
                                                                  const std::set<std::string>& wanted) {
  std::map<std::string, SafetensorsHeader> headers;
  for (const auto& [name, shard] : where) {
    if (headers.count(shard)) continue;
    VERITY_ASSIGN_OR_RETURN(headers[shard], ReadSafetensorsHeader(dir + "/" + shard));
    for (const auto& [n, e] : headers[shard].tensors)
      if (!wanted.count(n)) return Status::Error(dir + "/" + shard + ": unexpected tensor " + n);
  }
  return headers;
}

// Every shard mapped once, kept by the model; tensors stored in the model's
// dtype are used in place.
Result<std::map<std::string, const MappedFile*>> MapShards(const std::string& dir,
                                                           const std::map<std::string, SafetensorsHeader>& headers,
                                                           Model* model) {
  std::map<std::string, const MappedFile*> maps;
  for (const auto& [shard, hdr] : headers) {
    VERITY_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(dir + "/" + shard));
    if (static_cast<int64_t>(f->size()) != hdr.data_start + hdr.data_size)
      return Status::Error(dir + "/" + shard + ": changed size while being loaded");
    maps[shard] = f.get();
    model->mappings.push_back(std::move(f));
  }
  return maps;
}

// Each stored tensor in the header of the shard the index names, with the
// shape the config implies.
Status CheckShardShapes(const std::string& dir, const std::vector<CheckpointTensor>& stored,
                        const std::map<std::string, std::string>& where,
                        const std::map<std::string, SafetensorsHeader>& headers) {
  for (const auto& t : stored) {
    const std::string& shard = where.at(t.name);
    const auto& hdr = headers.at(shard);
    auto it = hdr.tensors.find(t.name);
    if (it == hdr.tensors.end())
      return Status::Error(dir + "/" + shard + ": the index places " + t.name + " here but the shard does not hold it");
    if (it->second.shape != t.shape) {
      return Status::Error(dir + "/" + shard + ": tensor " + t.name + " has shape " + ShapeString(it->second.shape) +
                           ", config implies " + ShapeString(t.shape));
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir, kernels::DType dtype) {
  std::vector<std::string> config_notes;
  VERITY_ASSIGN_OR_RETURN(ModelConfig c, ReadHfConfig(dir, &config_notes));
  VERITY_ASSIGN_OR_RETURN(auto where, MapHfTensors(dir));
  VERITY_RETURN_IF_ERROR(CheckConfigAgainstCheckpoint(c, where, dir));
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  const std::vector<CheckpointTensor> stored = CheckpointTensors(expected);
  std::set<std::string> wanted;
  VERITY_RETURN_IF_ERROR(CheckMappedNames(dir, stored, where, &wanted));
  VERITY_ASSIGN_OR_RETURN(auto headers, ReadShardHeaders(dir, where, wanted));
  auto model = std::make_unique<Model>();
  model->config = c;
  model->source = dir;
  for (const std::string& n : config_notes) {
    model->notes.push_back(n);
    std::fprintf(stderr, "verity: note: %s\n", n.c_str());
  }
  VERITY_ASSIGN_OR_RETURN(auto maps, MapShards(dir, headers, model.get()));
  VERITY_RETURN_IF_ERROR(CheckShardShapes(dir, stored, where, headers));
  VERITY_RETURN_IF_ERROR(Bind(*model, dtype, expected, [&](size_t i) {
    const ExpectedTensor& t = expected[i];
    const std::string& shard = where[t.stored_name()];
    const SafetensorsHeader& hdr = headers[shard];
    const TensorEntry& e = hdr.tensors.at(t.stored_name());
    // A fused tensor's part: its rows, from its first.
    const size_t skip = static_cast<size_t>(t.first_row) * StoredRowBytes(e.dtype, t.stored_shape().back());
    const std::string shown = t.fused.empty() ? t.name : t.fused + " (" + t.name + "'s rows)";
    return StoredTensor{shown, e.dtype, maps[shard]->data() + hdr.data_start + e.begin + skip, /*mapped=*/true};
  }));
  if (c.gemma) AddGemmaNormOffset(*model, expected, corruptions::ActiveEngineHooks().GemmaNormOffset());
  return model;
}

void AddGemmaNormOffset(Model& m, const std::vector<ExpectedTensor>& expected, float offset) {
  const std::vector<Slot> slots = Slots(m);
  for (size_t i = 0; i < expected.size(); i++) {
    if (expected[i].kind != TensorKind::kNorm) continue;
    const size_t n = static_cast<size_t>(Count(expected[i].shape));
    float* folded = static_cast<float*>(m.Allocate(n * sizeof(float)));
    for (size_t j = 0; j < n; j++) folded[j] = (*slots[i].vec)[j] + offset;
    *slots[i].vec = folded;
  }
}

Result<std::unique_ptr<Model>> SyntheticModel(const ModelConfig& config, uint64_t seed) {
  VERITY_RETURN_IF_ERROR(ValidateConfig(config, "synthetic config"));
  auto m = std::make_unique<Model>();
  m->config = config;
  m->source = "synthetic";
  const auto expected = ExpectedTensors(config);
  int64_t total = 0;
  for (const auto& t : expected) total += Count(t.shape);
  float* storage = static_cast<float*>(m->Allocate(static_cast<size_t>(total) * 4));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> offsets;
  int64_t off = 0;
  for (const auto& t : expected) {
    offsets.push_back(off);
    const bool norm = t.kind == TensorKind::kNorm;
    double a = t.shape.size() == 2 && t.kind != TensorKind::kEmbedding ? std::sqrt(3.0 / t.shape[1]) : 1.0;
    // Where q/k norms follow (Qwen3), q and k come out 8x the unit scale, as
    // a trained model's do: the norms remove it, a forward without them
    // attends far too sharply (so skipping them shows).
    const bool qk = EndsWith(t.name, "q_proj.weight") || EndsWith(t.name, "k_proj.weight");
    if (config.qk_norm && qk) a *= 8.0;
    // Gemma 2's scores, likewise 16x: large enough that its soft-cap (50)
    // bends them, as it does a trained model's, so skipping it shows.
    if (config.gemma && !config.qk_norm && qk) a *= 4.0;
    // Gemma scales its embedding by sqrt(dim): trained tables are that much
    // smaller, so the scaled rows are of unit size and the layers' outputs
    // count beside them (as they must for a layer's bug to show).
    if (config.gemma && t.kind == TensorKind::kEmbedding) a /= std::sqrt(static_cast<double>(config.dim));
    const int64_t n = Count(t.shape);  // hoisted: the loop runs ~7e9 times for a 7B
    float* to = storage + off;
    for (int64_t i = 0; i < n; i++) {
      double u = (static_cast<double>(rng() >> 11) / 9007199254740992.0) * 2.0 - 1.0;
      to[i] = static_cast<float>(norm ? 1.0 + 0.1 * u : a * u);
    }
    off += Count(t.shape);
  }
  VERITY_RETURN_IF_ERROR(Bind(*m, kernels::DType::kF32, expected, [&](size_t i) {
    return StoredTensor{expected[i].name, TensorDType::kF32,
                        reinterpret_cast<const unsigned char*>(storage + offsets[i]), /*mapped=*/false};
  }));
  return m;
}

namespace {

// A grow-only buffer left uninitialized: its pages are faulted in (and
// zeroed by the kernel) once, at its largest size.
template <class T>
class Scratch {
 public:
  T* Get(size_t n) {
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// One checkpoint being written: what every shard needs, and how far the
// shards have got through the tensors.
struct HfWrite {
  HfWrite(const Model& model, const std::string& dir) : model(model), dir(dir) {}

  const Model& model;
  const std::string& dir;
  int shards = 1;
  int esize = 4;  // bytes per stored element: 4 (f32) or 2 (bf16)
  std::vector<ExpectedTensor> expected;
  std::vector<CheckpointTensor> stored;  // what the files hold: fused parts written as one
  std::vector<Slot> slots;
  bool permute = false;  // llama2.c pairs -> HF halves
  int hs = 0;
  int64_t total_bytes = 0;
  Scratch<float> values, moved;  // a tensor's f32 values; the q/k permutation's copy
  Scratch<uint16_t> half;        // its bf16 values
  nlohmann::json weight_map = nlohmann::json::object();
  size_t next = 0;  // the first stored tensor no shard holds yet
  int64_t written = 0;
};

std::string ShardName(int s, int shards) {
  char name[64];
  if (shards == 1) std::snprintf(name, sizeof name, "model.safetensors");
  else std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
  return name;
}

// Contiguous tensors until this shard's share of the bytes; every shard gets at least one.
std::vector<size_t> ShardTensors(HfWrite& w, int s) {
  const int64_t target = w.total_bytes * (s + 1) / w.shards;
  std::vector<size_t> mine;
  while (w.next < w.stored.size() && (mine.empty() || w.written < target) &&
         w.stored.size() - w.next > static_cast<size_t>(w.shards - s - 1)) {
    mine.push_back(w.next);
    w.written += Count(w.stored[w.next].shape) * w.esize;
    w.next++;
  }
  if (s == w.shards - 1)
    while (w.next < w.stored.size()) mine.push_back(w.next++);
  return mine;
}

// The shard's JSON header, padded; its tensors enter the weight map.
std::string ShardHeader(HfWrite& w, const std::vector<size_t>& mine, const std::string& name) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  int64_t at = 0;
  for (size_t i : mine) {
    const int64_t bytes = Count(w.stored[i].shape) * w.esize;
    header[w.stored[i].name] = {
        {"dtype", w.esize == 4 ? "F32" : "BF16"}, {"shape", w.stored[i].shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
    w.weight_map[w.stored[i].name] = name;
  }
  std::string h = header.dump();
  // Spaces pad the header (the format allows it) so the data starts on a
  // 64-byte boundary: tensors whose sizes are multiples of 32 bytes are then
  // 32-byte aligned and used in place (see WeightPlacer::Matrix).
  while ((h.size() + 8) % 64) h += ' ';
  return h;
}

// Tensor i's values in f32, in the Hugging Face row layout, at out
// (Count(shape) floats); `moved` is scratch of as many for the q/k rows'
// permutation. Rows on up to `threads` threads: each row's values are its own.
void HfTensorValues(const HfWrite& w, size_t i, float* out, float* moved, int threads) {
  const auto& t = w.expected[i];
  const int64_t n = Count(t.shape);
  if (w.slots[i].vec) {
    ReadVector(w.model, w.slots[i].vec, n, out);
  } else {
    // The stored shape's rows and columns, in f32 (a padded FFN width dropped).
    const kernels::Weights& m = *w.slots[i].mat;
    const int64_t cols = t.shape[1];
    ParallelRanges(t.shape[0], std::max<int64_t>(1, (int64_t{1} << 18) / cols), threads, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(m.cols);
      for (int64_t r = r0; r < r1; r++) {
        kernels::DecodeRow(m, static_cast<int>(r), row.data());
        std::memcpy(out + r * cols, row.data(), static_cast<size_t>(cols) * 4);
      }
    });
  }
  // Gemma's norms are stored as w for 1 + w (the model holds 1 + w).
  if (w.model.config.gemma && t.kind == TensorKind::kNorm)
    for (int64_t k = 0; k < n; k++) out[k] -= 1.0f;
  // q and k rows, their biases and Qwen3's per-head norms (one head's worth).
  const bool is_q = t.name.find("q_proj") != std::string::npos || t.name.find("q_norm") != std::string::npos,
             is_k = t.name.find("k_proj") != std::string::npos || t.name.find("k_norm") != std::string::npos;
  if (w.permute && (is_q || is_k)) {
    std::memcpy(moved, out, static_cast<size_t>(n) * sizeof(float));
    const int hs = w.hs;
    // Row 2i+j of each head moves to row j*hs/2+i: the same rotation, in halves.
    const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;  // a bias moves with its rows
    for (int64_t head = 0; head < t.shape[0] / hs; head++)
      for (int r = 0; r < hs; r++) {
        const int64_t to = head * hs + (r % 2) * (hs / 2) + r / 2;
        std::memcpy(out + to * cols, moved + (head * hs + r) * cols, cols * sizeof(float));
      }
  }
}

// Shard s: the length, the header, then each of its tensors' data. Every
// tensor passes through the same scratch (w.values, w.moved, w.half), so
// only the largest tensor's pages are ever faulted in: with a fresh vector
// for each step of each tensor, 40% of the 1B synth's samples on the 2-core
// CPU box were the kernel zeroing pages (the 7B took 99 s on the H200 box,
// 2026-12-04). Same bytes.
Status WriteShard(HfWrite& w, int s) {
  const std::string name = ShardName(s, w.shards);
  const std::vector<size_t> mine = ShardTensors(w, s);
  const std::string h = ShardHeader(w, mine, name);
  std::ofstream f(w.dir + "/" + name, std::ios::binary | std::ios::trunc);
  uint64_t len = h.size();
  unsigned char lb[8];
  for (int i = 0; i < 8; i++) lb[i] = static_cast<unsigned char>(len >> (8 * i));
  f.write(reinterpret_cast<const char*>(lb), 8);
  f.write(h.data(), static_cast<long>(h.size()));
  const int threads = LoadThreads();
  for (size_t i : mine) {
    const int64_t n = Count(w.stored[i].shape);
    float* values = w.values.Get(static_cast<size_t>(n));  // the parts' rows, in order
    int64_t at = 0;
    for (size_t part : w.stored[i].parts) {
      const int64_t part_n = Count(w.expected[part].shape);
      HfTensorValues(w, part, values + at, w.moved.Get(static_cast<size_t>(part_n)), threads);
      at += part_n;
    }
    if (w.esize == 4) {
      f.write(reinterpret_cast<const char*>(values), n * 4);
    } else {
      uint16_t* half = w.half.Get(static_cast<size_t>(n));
      ParallelRanges(n, int64_t{1} << 18, threads, [&](int64_t a, int64_t b) {
        for (int64_t k = a; k < b; k++) half[k] = F32ToBF16(values[k]);
      });
      f.write(reinterpret_cast<const char*>(half), n * 2);
    }
  }
  if (!f) return Status::Error(w.dir + "/" + name + ": write failed");
  return OkStatus();
}

Status WriteIndex(const HfWrite& w) {
  nlohmann::json idx = {{"metadata", {{"total_size", w.total_bytes}}}, {"weight_map", w.weight_map}};
  std::ofstream f(w.dir + "/model.safetensors.index.json", std::ios::trunc);
  f << idx.dump(2) << "\n";
  if (!f) return Status::Error(w.dir + "/model.safetensors.index.json: write failed");
  return OkStatus();
}

// config.json and generation_config.json; special tokens in both files, as
// Hugging Face checkpoints carry them.
Status WriteHfConfigs(const ModelConfig& c, const std::string& dir, const std::string& dtype) {
  nlohmann::json gen = {{"_from_model_config", true}};
  if (c.bos_id >= 0) gen["bos_token_id"] = c.bos_id;
  if (c.eos_ids.size() == 1) gen["eos_token_id"] = c.eos_ids[0];
  if (c.eos_ids.size() > 1) gen["eos_token_id"] = c.eos_ids;
  const std::pair<const char*, std::string> files[] = {
      {"config.json", HfConfigText(c, dtype == "f32" ? "float32" : "bfloat16")},
      {"generation_config.json", gen.dump(2) + "\n"}};
  for (const auto& [name, text] : files) {
    std::ofstream f(dir + "/" + name, std::ios::trunc);
    f << text;
    if (!f) return Status::Error(dir + "/" + name + ": write failed");
  }
  return OkStatus();
}

}  // namespace

Status WriteHfCheckpoint(const Model& model, const std::string& dir, int shards, const std::string& dtype) {
  const ModelConfig& c = model.config;
  if (shards < 1) return Status::Error("--shards must be at least 1");
  if (dtype != "f32" && dtype != "bf16") return Status::Error("--dtype must be f32 or bf16");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Error(dir + ": cannot create directory");
  HfWrite w(model, dir);
  w.shards = shards;
  w.expected = ExpectedTensors(c);
  w.stored = CheckpointTensors(w.expected);
  if (static_cast<int>(w.stored.size()) < shards)
    return Status::Error("--shards " + std::to_string(shards) + " exceeds the " + std::to_string(w.stored.size()) +
                         " tensors");
  Model& mut = const_cast<Model&>(model);  // Slots() takes addresses; nothing is written through them here
  w.slots = Slots(mut);
  w.permute = c.rope_style == RopeStyle::kInterleaved;  // llama2.c pairs -> HF halves
  w.hs = c.head_size();
  w.esize = dtype == "f32" ? 4 : 2;
  for (const auto& t : w.stored) w.total_bytes += Count(t.shape) * w.esize;
  for (int s = 0; s < shards; s++) VERITY_RETURN_IF_ERROR(WriteShard(w, s));
  if (shards > 1) VERITY_RETURN_IF_ERROR(WriteIndex(w));
  if (!c.rope_freq_factors.empty())
    return Status::Error(model.source + ": GGUF rope_freqs factors have no Hugging Face config form; not written");
  return WriteHfConfigs(c, dir, dtype);
}

}  // namespace verity
