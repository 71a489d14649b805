// llama-, qwen2-, qwen3- and phi3-architecture GGUF files as verity models,
// and the converter that writes them. The format itself (parsing, checks) is
// formats/gguf. qwen2 is llama's layout with attn_{q,k,v}.bias per block,
// qwen3 llama's with attn_{q,k}_norm per block, phi3 llama's with q, k and v
// fused in attn_qkv and gate and up in ffn_up (ExpectedTensor::fused), each
// with its keys under its own name ("qwen2.", ...; GgufArchitecture).
//
// RoPE layout. llama.cpp runs the "llama" architecture with its NORM rope,
// which rotates adjacent pairs (2i, 2i+1) of each head: the original Meta /
// llama2.c layout (RopeStyle::kInterleaved). Hugging Face checkpoints instead
// rotate halves (i, i + hs/2), and their q_proj/k_proj rows were permuted
// into that layout when Meta's weights were converted. llama.cpp's
// convert_hf_to_gguf.py undoes it: for q (heads = n_head) and k (heads =
// n_head_kv) it reshapes the rows as [heads, 2, hs/2] and swaps the last two
// axes, so row h*hs + j*hs/2 + i (j in {0, 1}) becomes row h*hs + 2i + j.
// Hence: a GGUF llama file holds q/k rows in the interleaved layout and loads
// with RopeStyle::kInterleaved and no permutation; a llama2.c model is written
// unchanged; a Hugging Face model is written with that permutation. llama.cpp
// runs "qwen2", "qwen3" and "phi3" with its NEOX rope, which rotates halves:
// their files keep the Hugging Face rows and load with RopeStyle::kHalves,
// unpermuted.
#include <cmath>
#include <cstdlib>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <set>

#include "engine/engine.h"
#include "formats/safetensors.h"
#include "engine/weights.h"
#include "formats/gguf.h"
#include "formats/quants.h"
#include "formats/quantize.h"

namespace verity {
namespace {

// Where an expected (Hugging Face named) tensor lives in a GGUF llama file:
// its GGUF name, and for a Mixtral expert the slice of the stacked tensor.
struct GgufPlace {
  std::string name;
  int expert = -1;
};

GgufPlace PlaceOf(const std::string& hf, bool gemma) {
  if (hf == "model.embed_tokens.weight") return {"token_embd.weight"};
  if (hf == "model.norm.weight") return {"output_norm.weight"};
  if (hf == "lm_head.weight") return {"output.weight"};
  // model.layers.N.<rest>
  const size_t a = std::strlen("model.layers."), b = hf.find('.', a);
  const std::string layer = hf.substr(a, b - a), rest = hf.substr(b + 1);
  const std::string blk = "blk." + layer + ".";
  static const std::pair<const char*, const char*> dense[] = {
      {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},       {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},       {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},          {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},          {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"}};
  // Gemma's post_attention_layernorm norms the attention's output (llama.cpp's
  // post_attention_norm); its FFN's input norm is pre_feedforward_layernorm.
  static const std::pair<const char*, const char*> gemma_norms[] = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  if (gemma)
    for (const auto& [from, to] : gemma_norms)
      if (rest == from) return {blk + to};
  for (const auto& [from, to] : dense)
    if (rest == from) return {blk + to};
  // block_sparse_moe.experts.E.wK.weight -> one slice of ffn_{gate,down,up}_exps.weight
  const std::string ex = "block_sparse_moe.experts.";
  const size_t e0 = ex.size(), e1 = rest.find('.', e0);
  const int expert = std::stoi(rest.substr(e0, e1 - e0));
  const std::string w = rest.substr(e1 + 1);
  return {blk + (w == "w1.weight"   ? "ffn_gate_exps.weight"
                 : w == "w2.weight" ? "ffn_down_exps.weight"
                                    : "ffn_up_exps.weight"),
          expert};
}

// The GGUF dims (innermost first) of a stored tensor's shape; stacked for experts.
std::vector<uint64_t> GgufDims(const std::vector<int64_t>& shape, int n_experts, bool stacked) {
  std::vector<uint64_t> d(shape.rbegin(), shape.rend());
  if (stacked) d.push_back(static_cast<uint64_t>(n_experts));
  return d;
}

std::string DimsString(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); i++) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// How a tensor is stored: a plain type, or a block quantization kept as its
// blocks (StoredTensor::block), after the checks a load makes.
struct StoredType {
  TensorDType type = TensorDType::kF32;
  const kernels::BlockFormat* block = nullptr;
  size_t RowBytes(int64_t cols) const {
    return block ? block->RowBytes(static_cast<int>(cols)) : StoredRowBytes(type, cols);
  }
};

Result<StoredType> StoredTypeOf(const gguf::TensorInfo& t, const unsigned char* data, bool check_scales,
                                const std::string& path) {
  switch (t.type) {
    case gguf::kF32: return StoredType{TensorDType::kF32};
    case gguf::kF16: return StoredType{TensorDType::kF16};
    case gguf::kBF16: return StoredType{TensorDType::kBF16};
    case gguf::kQ8_0: return StoredType{TensorDType::kQ8_0};
    default: break;
  }
  const std::string where = path + ": tensor " + t.name;
  // A block type formats/quants reads: its row length and size, then every
  // block's scales (cheap next to a load; a NaN or infinite scale would
  // poison its block's weights), then kept as blocks.
  if (const quants::Layout* l = quants::FindLayout(t.type)) {
    const uint64_t row = t.dims.empty() ? 1 : t.dims[0], rows = row ? t.elements() / row : 0;
    VERITY_RETURN_IF_ERROR(quants::CheckTensor(t.type, row, rows, t.bytes, where));
    if (check_scales)
      VERITY_RETURN_IF_ERROR(
          quants::CheckScales(t.type, data, static_cast<int64_t>(t.elements()) / l->block_elems, where));
    return StoredType{TensorDType::kF32, BlockFormatOf(t.type)};
  }
  return Status::Error(where + " has type " + gguf::TensorTypeName(t.type) + ", which verity does not load (" +
                       (quants::RefusalReason(t.type)) +
                       "; it runs F32, F16, BF16, Q8_0 and the block types Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K)");
}

// "Q4_K x25, Q6_K x5": the file's block-quantized tensors by type; empty when none.
std::string BlockMix(const gguf::File& f) {
  std::map<std::string, int> n;
  for (const gguf::TensorInfo& t : f.tensors)
    if (quants::FindLayout(t.type) && t.type != gguf::kQ8_0) n[gguf::TensorTypeName(t.type)]++;
  std::string s;
  for (const auto& [type, count] : n) s += (s.empty() ? "" : ", ") + type + " x" + std::to_string(count);
  return s;
}

// The architecture a model is written as, and read from: "qwen2" for a model
// with q/k/v biases, "qwen3" for one with q/k norms, else "llama". llama.cpp
// names every hyperparameter key after it ("qwen2.embedding_length"), the
// same keys otherwise.
const char* GgufArchitecture(const ModelConfig& c) {
  if (c.gemma) return c.qk_norm ? "gemma3" : "gemma2";
  return c.qkv_bias ? "qwen2" : c.qk_norm ? "qwen3" : c.fused_projections ? "phi3" : "llama";
}
// llama.cpp rotates llama's rows in pairs (NORM) and the others' in halves
// (NEOX); see the top of this file.
bool NeoxArchitecture(const ModelConfig& c) { return std::string(GgufArchitecture(c)) != "llama"; }
struct ArchKeys {
  std::string arch;
  std::string operator()(const char* key) const { return arch + "." + key; }
};

// Required key `key`, a positive int, into *dst.
Status ReadPositiveInt(const gguf::File& f, const std::string& key, const std::string& path, int* dst) {
  VERITY_ASSIGN_OR_RETURN(int64_t v, gguf::GetInt(f, key, 1, INT32_MAX, path));
  *dst = static_cast<int>(v);
  return OkStatus();
}

// The transformer's sizes, the context and the norm epsilon.
Status ReadDimensions(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c) {
  VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("embedding_length"), path, &c->dim));
  VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("feed_forward_length"), path, &c->hidden_dim));
  VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("block_count"), path, &c->n_layers));
  VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("attention.head_count"), path, &c->n_heads));
  VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("context_length"), path, &c->max_positions));
  c->seq_len = std::min(c->max_positions, kDefaultContext);  // --ctx changes it (SetContext)
  // The spec: absent head_count_kv means no grouped-query attention.
  c->n_kv_heads = c->n_heads;
  if (f.Find(k("attention.head_count_kv")))
    VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("attention.head_count_kv"), path, &c->n_kv_heads));
  VERITY_ASSIGN_OR_RETURN(double eps, gguf::GetFloat(f, k("attention.layer_norm_rms_epsilon"), path));
  c->norm_eps = static_cast<float>(eps);
  return OkStatus();
}

Status ReadRopeBase(const gguf::File& f, const ArchKeys& k, const std::string& path, std::vector<std::string>* notes,
                    ModelConfig* c) {
  if (f.Find(k("rope.freq_base"))) {
    VERITY_ASSIGN_OR_RETURN(double theta, gguf::GetFloat(f, k("rope.freq_base"), path));
    c->rope_theta = static_cast<float>(theta);
  } else {
    c->rope_theta = 10000.0f;  // llama.cpp's value when the key is absent (older Llama 2 files)
    notes->push_back(path + ": " + k("rope.freq_base") + " absent: RoPE base 10000 (llama.cpp's default)");
  }
  return OkStatus();
}

Status ReadVocabSize(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c) {
  if (f.Find(k("vocab_size"))) {
    VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("vocab_size"), path, &c->vocab_size));
  } else if (const gguf::Value* tok = f.Find("tokenizer.ggml.tokens"); tok && tok->type == gguf::ValueType::kArray) {
    c->vocab_size = static_cast<int>(std::min<size_t>(tok->items.size(), INT32_MAX));
  } else {
    return Status::Error(path + ": neither " + k("vocab_size") +
                         " nor tokenizer.ggml.tokens gives the vocabulary size");
  }
  return OkStatus();
}

Status ReadExperts(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c) {
  if (f.Find(k("expert_count"))) {
    VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("expert_count"), path, &c->n_experts));
    VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("expert_used_count"), path, &c->n_experts_per_tok));
    if (c->n_experts_per_tok > c->n_experts)
      return Status::Error(path + ": " + k("expert_used_count") + " exceeds " + k("expert_count"));
  }
  return OkStatus();
}

// Head size: attention.key_length (llama.cpp's n_embd_head_k), else
// embedding_length / head_count. Values and the rotated part must match it.
Status ReadHeadSize(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c) {
  if (f.Find(k("attention.key_length"))) {
    VERITY_RETURN_IF_ERROR(ReadPositiveInt(f, k("attention.key_length"), path, &c->head_dim));
  } else if (c->dim % c->n_heads == 0) {
    c->head_dim = c->dim / c->n_heads;
  } else {
    return Status::Error(path + ": " + k("embedding_length") + " is not divisible by " + k("attention.head_count") +
                         " and " + k("attention.key_length") + " is absent");
  }
  for (const std::string& key : {k("attention.value_length"), k("rope.dimension_count")}) {
    if (!f.Find(key)) continue;
    VERITY_ASSIGN_OR_RETURN(int64_t v, gguf::GetInt(f, key, 1, INT32_MAX, path));
    if (v != c->head_dim)
      return Status::Error(path + ": key " + std::string(key) + " is " + std::to_string(v) +
                           ", but verity needs the head size " + std::to_string(c->head_dim) +
                           " (values and RoPE over whole heads)");
  }
  return OkStatus();
}

// RoPE scaling as llama.cpp stores it: type none or linear (with factor)
// here; Llama 3's scaling as the rope_freqs.weight tensor (LoadGgufModel).
// Every other key that changes the math is refused.
Status ReadRopeScaling(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c) {
  if (f.Find(k("rope.scaling.type"))) {
    VERITY_ASSIGN_OR_RETURN(std::string type, gguf::GetString(f, k("rope.scaling.type"), path));
    if (type == "linear") {
      c->rope_scaling.type = RopeScalingType::kLinear;
      VERITY_ASSIGN_OR_RETURN(c->rope_scaling.factor, gguf::GetFloat(f, k("rope.scaling.factor"), path));
    } else if (type != "none") {
      return Status::Error(path + ": key " + k("rope.scaling.type") + " is \"" + type +
                           "\", which verity does not compute (none, linear)");
    }
  }
  for (const std::string& key :
       {k("rope.scaling.attn_factor"), k("rope.scaling.yarn_log_multiplier"), k("rope.scaling.yarn_ext_factor"),
        k("rope.scaling.yarn_attn_factor"), k("rope.scaling.yarn_beta_fast"), k("rope.scaling.yarn_beta_slow"),
        k("attention.logit_softcapping"), k("embedding_scale"), k("residual_scale"), k("attention.scale"),
        k("logit_scale")})
    if (f.Find(key)) return Status::Error(path + ": key " + key + " changes the math and verity does not compute it");
  if (c->rope_scaling.type == RopeScalingType::kNone && f.Find(k("rope.scaling.factor"))) {
    VERITY_ASSIGN_OR_RETURN(double factor, gguf::GetFloat(f, k("rope.scaling.factor"), path));
    if (factor != 1.0 && factor != 0.0)
      return Status::Error(path + ": key " + k("rope.scaling.factor") + " is " + std::to_string(factor) + " without " +
                           k("rope.scaling.type") + " linear");
  }
  return OkStatus();
}

// gemma2's and gemma3's window: attention.sliding_window (gemma2: 4096, as
// llama.cpp reads a file without it) and which layers it applies to:
// attention.sliding_window_pattern, a count (a global layer every Nth) or a
// flag per layer, else llama.cpp's 2 (gemma2) or 6 (gemma3). A gemma3 file
// without a window is run by llama.cpp with every layer global, which verity
// does not (refused).
Status ReadGemmaWindow(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c,
                       std::vector<std::string>* notes) {
  const bool gemma3 = k.arch == "gemma3";
  if (!f.Find(k("attention.sliding_window"))) {
    if (gemma3)
      return Status::Error(path + ": " + k("attention.sliding_window") + " is absent; verity runs gemma3 " +
                           "files with their sliding window");
    c->sliding_window = 4096;
    notes->push_back(path + ": " + k("attention.sliding_window") + " absent: 4096 (llama.cpp's gemma2 default)");
  } else {
    VERITY_ASSIGN_OR_RETURN(int64_t w, gguf::GetInt(f, k("attention.sliding_window"), 1, INT32_MAX, path));
    c->sliding_window = static_cast<int>(w);
  }
  c->window_pattern = gemma3 ? 6 : 2;
  const gguf::Value* pattern = f.Find(k("attention.sliding_window_pattern"));
  if (!pattern)
    notes->push_back(path + ": " + k("attention.sliding_window_pattern") + " absent: one global layer in " +
                     std::to_string(c->window_pattern) + " (llama.cpp's " + k.arch + " default)");
  if (pattern && pattern->type != gguf::ValueType::kArray) {
    VERITY_ASSIGN_OR_RETURN(int64_t p, gguf::GetInt(f, k("attention.sliding_window_pattern"), 1, INT32_MAX, path));
    c->window_pattern = static_cast<int>(p);
  } else if (pattern) {  // a flag per layer: the periodic pattern verity computes, or refused
    const auto& flags = pattern->items;
    if (pattern->array_type != gguf::ValueType::kBool)
      return Status::Error(path + ": key " + k("attention.sliding_window_pattern") + " must be a count or bools");
    if (flags.size() != static_cast<size_t>(c->n_layers))
      return Status::Error(path + ": key " + k("attention.sliding_window_pattern") + " holds " +
                           std::to_string(flags.size()) + " flags for " + std::to_string(c->n_layers) + " layers");
    std::vector<bool> windowed;
    for (const gguf::Value& flag : flags) windowed.push_back(flag.u != 0);  // a bool is held in u
    const WindowPattern w = WindowPatternOf(windowed);
    c->window_pattern = w.pattern;
    if (w.mismatch >= 0)
      return Status::Error(path + ": key " + k("attention.sliding_window_pattern") + " is not a global layer " +
                           "every Nth with windowed layers between, which is what verity computes");
  }
  return OkStatus();
}

// Gemma's query_pre_attn_scalar as llama.cpp infers it (no GGUF key holds
// it): dim / heads for the 27B models (46 gemma2 layers, 62 gemma3 layers),
// else head_dim.
float LlamaCppQueryScale(const ModelConfig& c) {
  const bool big = c.n_layers == (c.qk_norm ? 62 : 46);
  return static_cast<float>(big ? c.dim / c.n_heads : c.head_dim);
}

// The rest of Gemma's numbers. Soft-caps: gemma2's attention and final
// ones (llama.cpp's 50 and 30 where absent), gemma3's final one (none where
// absent; llama.cpp applies no attention soft-cap to gemma3, so a file that
// states one is refused). query_pre_attn_scalar is in no GGUF file:
// llama.cpp takes head_dim, or dim / heads for the 27B models (46 gemma2
// layers, 62 gemma3 layers), and so does verity (a note says which).
// rope.freq_base_swa: gemma3's windowed layers' base (10000 where absent).
Status ReadGemmaKeys(const gguf::File& f, const ArchKeys& k, const std::string& path, ModelConfig* c,
                     std::vector<std::string>* notes) {
  const bool gemma3 = k.arch == "gemma3";
  auto number = [&](const char* key, float absent, float* dst) -> Status {
    *dst = absent;
    if (!f.Find(k(key))) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%g", absent);
      if (absent != 0.0f)
        notes->push_back(path + ": " + k(key) + " absent: " + shown + " (llama.cpp's " + k.arch + " default)");
      return OkStatus();
    }
    VERITY_ASSIGN_OR_RETURN(double v, gguf::GetFloat(f, k(key), path));
    if (!(v >= 0.0) || !std::isfinite(v)) return Status::Error(path + ": key " + k(key) + " must be >= 0");
    *dst = static_cast<float>(v);
    return OkStatus();
  };
  if (gemma3 && f.Find(k("attn_logit_softcapping")))
    return Status::Error(path + ": key " + k("attn_logit_softcapping") +
                         ": llama.cpp applies no attention soft-cap to gemma3 and verity will not guess");
  if (!gemma3) VERITY_RETURN_IF_ERROR(number("attn_logit_softcapping", 50.0f, &c->attn_softcap));
  VERITY_RETURN_IF_ERROR(number("final_logit_softcapping", gemma3 ? 0.0f : 30.0f, &c->final_softcap));
  VERITY_RETURN_IF_ERROR(ReadGemmaWindow(f, k, path, c, notes));
  c->query_pre_attn_scalar = LlamaCppQueryScale(*c);
  notes->push_back(path + ": query_pre_attn_scalar " + std::to_string(static_cast<int>(c->query_pre_attn_scalar)) +
                   ", as llama.cpp takes it for " + k.arch + " with " + std::to_string(c->n_layers) +
                   " layers (GGUF does not state it)");
  if (!gemma3 && (c->attn_softcap == 0.0f || c->final_softcap == 0.0f))
    return Status::Error(path + ": " + k.arch + " soft-caps of 0: llama.cpp divides by them; verity will not guess");
  if (!gemma3 && c->rope_scaling.type != RopeScalingType::kNone)
    return Status::Error(path + ": key " + k("rope.scaling.type") + " is not part of gemma2 as verity computes it");
  if (gemma3) return number("rope.freq_base_swa", 10000.0f, &c->rope_local_theta);
  if (!f.Find(k("rope.freq_base_swa"))) return OkStatus();  // gemma2's windowed layers take freq_base
  float swa = c->rope_theta;
  VERITY_RETURN_IF_ERROR(number("rope.freq_base_swa", c->rope_theta, &swa));
  if (swa != c->rope_theta)
    return Status::Error(path + ": key " + k("rope.freq_base_swa") + " differs from " + k("rope.freq_base") +
                         "; verity's gemma2 has one RoPE base");
  return OkStatus();
}

// attention.sliding_window: phi3's (0 is none, as Phi-4's files say),
// attended within as a Hugging Face Phi-3's (ModelConfig::sliding_window);
// refused for the other architectures.
Status ReadSlidingWindow(const gguf::File& f, const ArchKeys& k, const std::string& path,
                         std::vector<std::string>* notes, ModelConfig* c) {
  if (c->gemma) return ReadGemmaKeys(f, k, path, c, notes);
  for (const char* key :
       {"attn_logit_softcapping", "final_logit_softcapping", "attention.sliding_window_pattern", "rope.freq_base_swa"})
    if (f.Find(k(key)))
      return Status::Error(path + ": key " + k(key) + " changes the math and verity does not compute it");
  if (!f.Find(k("attention.sliding_window"))) return OkStatus();
  if (k.arch != "phi3")
    return Status::Error(path + ": key " + k("attention.sliding_window") +
                         " changes the math and verity does not compute it");
  VERITY_ASSIGN_OR_RETURN(int64_t w, gguf::GetInt(f, k("attention.sliding_window"), 0, INT32_MAX, path));
  c->sliding_window = static_cast<int>(w);
  return OkStatus();
}

// Special tokens (tokenizer.ggml.*; ReadVocab checks them against the vocabulary).
Status ReadSpecialTokens(const gguf::File& f, const std::string& path, ModelConfig* c) {
  const int64_t last_id = c->vocab_size - 1;
  if (f.Find("tokenizer.ggml.bos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(int64_t v, gguf::GetInt(f, "tokenizer.ggml.bos_token_id", 0, last_id, path));
    c->bos_id = static_cast<int>(v);
  }
  if (f.Find("tokenizer.ggml.eos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(int64_t v, gguf::GetInt(f, "tokenizer.ggml.eos_token_id", 0, last_id, path));
    c->eos_ids = {static_cast<int>(v)};
  }
  if (f.Find("tokenizer.ggml.eot_token_id")) {  // llama.cpp also ends generation at end-of-turn
    VERITY_ASSIGN_OR_RETURN(int64_t v, gguf::GetInt(f, "tokenizer.ggml.eot_token_id", 0, last_id, path));
    if (std::find(c->eos_ids.begin(), c->eos_ids.end(), v) == c->eos_ids.end())
      c->eos_ids.push_back(static_cast<int>(v));
  }
  return OkStatus();
}

// metadata -> config. Keys the GGUF spec makes optional get the value the
// spec (or llama.cpp) defines, said in a note; the rest are required.
Result<ModelConfig> ConfigOf(const gguf::File& f, const std::string& path, std::vector<std::string>* notes) {
  VERITY_ASSIGN_OR_RETURN(std::string arch, gguf::GetString(f, "general.architecture", path));
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "phi3" && arch != "gemma2" && arch != "gemma3")
    return Status::Error(path + ": general.architecture is \"" + arch +
                         "\"; verity loads only \"llama\", \"qwen2\", \"qwen3\", \"phi3\", \"gemma2\" and " +
                         "\"gemma3\" GGUF files");
  ModelConfig c;
  c.qkv_bias = arch == "qwen2";                     // its attn_{q,k,v}.bias tensors are then required
  c.qk_norm = arch == "qwen3" || arch == "gemma3";  // its attn_{q,k}_norm tensors are then required
  c.gemma = arch == "gemma2" || arch == "gemma3";   // four norms a layer (as 1 + w), GeGLU, ...: ReadGemmaKeys
  c.fused_projections = arch == "phi3";             // attn_qkv and a double-height ffn_up, no ffn_gate
  const ArchKeys k{arch};
  VERITY_RETURN_IF_ERROR(ReadDimensions(f, k, path, &c));
  VERITY_RETURN_IF_ERROR(ReadRopeBase(f, k, path, notes, &c));
  VERITY_RETURN_IF_ERROR(ReadVocabSize(f, k, path, &c));
  VERITY_RETURN_IF_ERROR(ReadExperts(f, k, path, &c));
  VERITY_RETURN_IF_ERROR(ReadHeadSize(f, k, path, &c));
  VERITY_RETURN_IF_ERROR(ReadRopeScaling(f, k, path, &c));
  VERITY_RETURN_IF_ERROR(ReadSlidingWindow(f, k, path, notes, &c));
  VERITY_RETURN_IF_ERROR(ReadSpecialTokens(f, path, &c));
  c.shared_classifier = f.FindTensor("output.weight") == nullptr;  // absent: tied to token_embd
  if (arch == "gemma2" && !c.shared_classifier)                    // llama.cpp's gemma2 classifies with token_embd
    return Status::Error(path + ": tensor output.weight: llama.cpp's gemma2 classifies with token_embd.weight and " +
                         "reads no output.weight; verity will not guess which the file means");
  // llama: NORM rope on interleaved rows (see the top of this file); qwen2
  // and qwen3: llama.cpp's NEOX rope, the Hugging Face halves, rows as converted.
  c.rope_style = NeoxArchitecture(c) ? RopeStyle::kHalves : RopeStyle::kInterleaved;
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));
  return c;
}

// tokenizer.ggml.tokens against <arch>.vocab_size, when the file has a vocabulary.
Status CheckVocabulary(const gguf::File& f, const ArchKeys& k, const ModelConfig& c, const std::string& path) {
  if (f.Find("tokenizer.ggml.model")) {  // checked here so a bad vocabulary is a load error
    VERITY_ASSIGN_OR_RETURN(auto vocab, gguf::ReadVocab(f, path));
    if (vocab && !vocab->tokens.empty() && static_cast<int>(vocab->tokens.size()) != c.vocab_size)
      return Status::Error(path + ": tokenizer.ggml.tokens has " + std::to_string(vocab->tokens.size()) +
                           " tokens but " + k("vocab_size") + " is " + std::to_string(c.vocab_size));
  }
  return OkStatus();
}

// Before anything is sized by the metadata: the counts must fit the tensors
// the file holds (a lying block_count or expert_count is an error, not an
// allocation of its size).
Status CheckCountsFitTensors(const gguf::File& f, const ArchKeys& k, const ModelConfig& c, const std::string& path) {
  if (static_cast<uint64_t>(c.n_layers) > f.tensors.size())
    return Status::Error(path + ": " + k("block_count") + " is " + std::to_string(c.n_layers) +
                         " but the file holds only " + std::to_string(f.tensors.size()) + " tensors");
  if (c.n_experts > 0) {
    const gguf::TensorInfo* g = f.FindTensor("blk.0.ffn_gate_exps.weight");
    if (!g) return Status::Error(path + ": required tensor blk.0.ffn_gate_exps.weight (expert) is missing");
    if (g->dims.size() != 3 || g->dims[2] != static_cast<uint64_t>(c.n_experts))
      return Status::Error(path + ": " + k("expert_count") + " is " + std::to_string(c.n_experts) +
                           " but tensor blk.0.ffn_gate_exps.weight has dims " + DimsString(g->dims));
  }
  return OkStatus();
}

// Where each expected tensor's bytes lie in the mapped file (`data_start`:
// its data section), each checked for its dims and type; `used` collects the
// GGUF names they come from.
Result<std::vector<StoredTensor>> PlaceTensors(const gguf::File& f, const unsigned char* data_start,
                                               const std::vector<ExpectedTensor>& expected, const ModelConfig& c,
                                               const std::string& path, std::set<std::string>* used) {
  std::vector<StoredTensor> stored;
  for (const ExpectedTensor& e : expected) {
    const GgufPlace at = PlaceOf(e.stored_name(), c.gemma);
    const gguf::TensorInfo* t = f.FindTensor(at.name);
    if (!t)
      return Status::Error(path + ": required tensor " + at.name + " (" + TensorKindName(e.kind) + ") is missing");
    const std::vector<uint64_t> want = GgufDims(e.stored_shape(), c.n_experts, at.expert >= 0);
    if (t->dims != want)
      return Status::Error(path + ": tensor " + at.name + " has dims " + DimsString(t->dims) +
                           ", the metadata implies " + DimsString(want));
    const unsigned char* data = data_start + t->offset;
    // A stacked experts tensor's scales are checked once, at its first expert.
    VERITY_ASSIGN_OR_RETURN(StoredType type, StoredTypeOf(*t, data, at.expert <= 0, path));
    used->insert(at.name);
    const int64_t cols = e.shape.back(), rows = e.shape.size() == 2 ? e.shape[0] : 1;
    // An expert's slice of its stacked tensor, or a part's rows of its fused one.
    const size_t slice = at.expert >= 0 ? static_cast<size_t>(at.expert) * rows * type.RowBytes(cols)
                                        : static_cast<size_t>(e.first_row) * type.RowBytes(cols);
    const std::string shown = at.expert >= 0    ? at.name + "[expert " + std::to_string(at.expert) + "]"
                              : e.fused.empty() ? at.name
                                                : at.name + " (" + e.name + "'s rows)";
    stored.push_back(StoredTensor{shown, type.type, data + slice, /*mapped=*/true, type.block});
  }
  return stored;
}

// Llama 3 RoPE scaling as llama.cpp's converter writes it: per-pair divisors
// of the inverse frequencies, an F32 tensor of head_dim/2 values. llama.cpp's
// qwen2 and qwen3 read none: there it is an unexpected tensor.
Status ReadRopeFreqs(const gguf::File& f, const unsigned char* data_start, const std::string& path, ModelConfig* config,
                     std::set<std::string>* used) {
  if (NeoxArchitecture(*config)) return OkStatus();
  if (const gguf::TensorInfo* t = f.FindTensor("rope_freqs.weight")) {
    const uint64_t half = static_cast<uint64_t>(config->head_dim / 2);
    if (t->type != gguf::kF32 || t->dims != std::vector<uint64_t>{half})
      return Status::Error(path + ": tensor rope_freqs.weight is " + gguf::TensorTypeName(t->type) + " " +
                           DimsString(t->dims) + "; verity needs F32 [" + std::to_string(half) + "] (head_dim / 2)");
    config->rope_freq_factors.resize(half);
    std::memcpy(config->rope_freq_factors.data(), data_start + t->offset, half * 4);
    VERITY_RETURN_IF_ERROR(ValidateConfig(*config, path + ": rope_freqs.weight"));
    used->insert(t->name);
  }
  return OkStatus();
}

Status CheckNoUnexpectedTensors(const gguf::File& f, const std::set<std::string>& used, const std::string& path) {
  for (const gguf::TensorInfo& t : f.tensors) {
    if (used.count(t.name)) continue;
    if (t.name.rfind("rope_factors_", 0) == 0)  // llama.cpp's form of Phi-3's longrope
      return Status::Error(path + ": tensor " + t.name +
                           " holds Phi-3's long-context RoPE factors (longrope), which verity does not compute");
    return Status::Error(path + ": unexpected tensor " + t.name + " (" + gguf::TensorTypeName(t.type) + " " +
                         DimsString(t.dims) + "); verity does not know what it is for");
  }
  return OkStatus();
}

// The load's notes (the config's and the block types kept), in the model and
// on stderr.
void ReportNotes(const gguf::File& f, const std::string& path, std::vector<std::string> notes, Model* model) {
  if (std::string mix = BlockMix(f); !mix.empty())
    notes.push_back(path + ": block-quantized tensors kept in their blocks (" + mix +
                    "): the fast backend multiplies them in place against x rounded to int16, the reference "
                    "backend dequantizes rows exactly (docs/dtypes.md); --dtype applies to the other matrices");
  for (const std::string& n : notes) {
    model->notes.push_back(n);
    std::fprintf(stderr, "verity: note: %s\n", n.c_str());
  }
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGgufModel(const std::string& path, kernels::DType dtype) {
  VERITY_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  VERITY_ASSIGN_OR_RETURN(gguf::File f, gguf::Parse(file->data(), file->size(), path));
  auto model = std::make_unique<Model>();
  std::vector<std::string> notes;
  VERITY_ASSIGN_OR_RETURN(model->config, ConfigOf(f, path, &notes));
  const ModelConfig& c = model->config;
  model->source = path;
  const ArchKeys k{GgufArchitecture(c)};
  VERITY_RETURN_IF_ERROR(CheckVocabulary(f, k, c, path));
  VERITY_RETURN_IF_ERROR(CheckCountsFitTensors(f, k, c, path));
  const unsigned char* data_start = file->data() + f.data_start;
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  std::set<std::string> used;
  VERITY_ASSIGN_OR_RETURN(std::vector<StoredTensor> stored, PlaceTensors(f, data_start, expected, c, path, &used));
  VERITY_RETURN_IF_ERROR(ReadRopeFreqs(f, data_start, path, &model->config, &used));
  VERITY_RETURN_IF_ERROR(CheckNoUnexpectedTensors(f, used, path));
  ReportNotes(f, path, std::move(notes), model.get());
  VERITY_RETURN_IF_ERROR(Bind(*model, dtype, expected, [&](size_t i) { return stored[i]; }));
  model->mappings.push_back(std::move(file));
  return model;
}

namespace {

// llama2.c tokenizer.bin (int32 max_token_length; per token: f32 score,
// int32 length, bytes) as GGUF's SentencePiece-style "llama" vocabulary.
Result<std::vector<std::pair<std::string, gguf::Value>>> Llama2cVocabKeys(const std::string& path, int vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open --tokenizer");
  int32_t max_len = 0;
  in.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<gguf::Value> tokens, scores, types;
  for (int i = 0; i < vocab_size; i++) {
    float score = 0;
    int32_t len = 0;
    in.read(reinterpret_cast<char*>(&score), 4);
    in.read(reinterpret_cast<char*>(&len), 4);
    if (!in || len < 0 || len > (1 << 20))
      return Status::Error(path + ": --tokenizer entry " + std::to_string(i) + " is truncated or malformed");
    std::string piece(static_cast<size_t>(len), '\0');
    in.read(piece.data(), len);
    if (!in) return Status::Error(path + ": --tokenizer entry " + std::to_string(i) + " is truncated");
    // llama2.c's export wrote BOS/EOS as "\n<s>\n"/"\n</s>\n" and the
    // SentencePiece word marker U+2581 as a space; GGUF keeps SentencePiece's.
    if (piece == "\n<s>\n" || piece == "\n</s>\n") piece = piece.substr(1, piece.size() - 2);
    std::string sp;
    for (char ch : piece) sp += ch == ' ' ? std::string("\xe2\x96\x81") : std::string(1, ch);
    int type = 1;  // normal
    if (sp == "<unk>") type = 2;
    else if (sp == "<s>" || sp == "</s>") type = 3;                                // control
    else if (sp.size() == 6 && sp.rfind("<0x", 0) == 0 && sp[5] == '>') type = 6;  // byte
    tokens.push_back(gguf::Value::String(sp));
    scores.push_back(gguf::Value::Float32(score));
    types.push_back(gguf::Value::Int32(type));
  }
  in.peek();
  if (!in.eof())
    return Status::Error(path + ": --tokenizer holds more than the model's " + std::to_string(vocab_size) + " tokens");
  std::vector<std::pair<std::string, gguf::Value>> kv;
  kv.emplace_back("tokenizer.ggml.model", gguf::Value::String("llama"));
  kv.emplace_back("tokenizer.ggml.tokens", gguf::Value::Array(gguf::ValueType::kString, std::move(tokens)));
  kv.emplace_back("tokenizer.ggml.scores", gguf::Value::Array(gguf::ValueType::kFloat32, std::move(scores)));
  kv.emplace_back("tokenizer.ggml.token_type", gguf::Value::Array(gguf::ValueType::kInt32, std::move(types)));
  kv.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::Uint32(Llama2cFormat::kBos));
  kv.emplace_back("tokenizer.ggml.eos_token_id", gguf::Value::Uint32(Llama2cFormat::kEos));
  kv.emplace_back("tokenizer.ggml.unknown_token_id", gguf::Value::Uint32(0));
  return kv;
}

// The rope_freqs.weight a model needs in GGUF: its own factors, or Llama 3
// scaling as llama.cpp's converter expresses it (per pair: 1 for short
// wavelengths, `factor` for long ones, 1 / ((1 - s) / factor + s) between);
// empty when neither.
std::vector<float> RopeFreqFactors(const ModelConfig& c) {
  if (!c.rope_freq_factors.empty()) return c.rope_freq_factors;
  const RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScalingType::kLlama3) return {};
  std::vector<float> base(static_cast<size_t>(c.head_dim / 2)), out;
  kernels::RopeBaseInverseFrequencies(c.rope_theta, c.head_dim, base.data());
  for (float f : base) {
    const double wavelen = 2.0 * M_PI / f;
    if (wavelen < s.original_max_positions / s.high_freq_factor) {
      out.push_back(1.0f);
    } else if (wavelen > s.original_max_positions / s.low_freq_factor) {
      out.push_back(static_cast<float>(s.factor));
    } else {
      const double smooth =
          (s.original_max_positions / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

// A tensor's f32 values as `type`: the plain floats here, the block types
// through formats/quantize.
Status Encode(uint32_t type, const std::vector<float>& v, std::string* out, const std::string& where) {
  switch (type) {
    case gguf::kF32: out->append(reinterpret_cast<const char*>(v.data()), v.size() * 4); return OkStatus();
    case gguf::kBF16:
      for (float x : v) {
        const uint16_t h = F32ToBF16(x);
        out->append(reinterpret_cast<const char*>(&h), 2);
      }
      return OkStatus();
    case gguf::kF16:
      for (float x : v) {
        const uint16_t h = F32ToF16(x);
        out->append(reinterpret_cast<const char*>(&h), 2);
      }
      return OkStatus();
    default: return quants::Quantize(type, v.data(), static_cast<int64_t>(v.size()), out, where);
  }
}

// The tensor's blk index in its GGUF name ("blk.3.ffn_down.weight": 3); -1
// outside the blocks.
int LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

// One GGUF tensor to write: the expected tensors (slots) it holds, one, or
// one per expert when stacked.
struct Planned {
  gguf::TensorSpec spec;
  std::vector<size_t> parts;  // indices into ExpectedTensors / Slots
  bool permute = false;       // q/k rows: Hugging Face halves -> interleaved pairs
  int heads = 0;
};

// The types --dtype asks for: one for every matrix, or a llama.cpp file type.
struct GgufTypes {
  uint32_t matrix_type = 0, file_type = 0;  // file_type: llama.cpp's llama_ftype
  std::optional<quants::FileType> blocks;   // a llama.cpp file type: a type per matrix (quants::PlannedType)
};

Result<GgufTypes> TypesOf(const std::string& dtype) {
  GgufTypes t;
  if (dtype == "f32") t.matrix_type = gguf::kF32, t.file_type = 0;
  else if (dtype == "f16") t.matrix_type = gguf::kF16, t.file_type = 1;
  else if (dtype == "bf16") t.matrix_type = gguf::kBF16, t.file_type = 32;
  if (t.matrix_type == 0 && dtype != "f32") {
    auto ft = quants::FindFileType(dtype);
    if (!ft.ok()) return Status::Error(ft.status().message() + "; GGUF output also takes f32, f16 and bf16");
    t.blocks = *ft;
    t.file_type = ft->ftype;
  }
  return t;
}

using KeyValues = std::vector<std::pair<std::string, gguf::Value>>;

// The architecture's metadata for the model's config (llama, qwen2, qwen3 or
// phi3: the same keys under its name; phi3's window, 0 for none).
KeyValues ModelKeys(const Model& model, uint32_t file_type) {
  const ModelConfig& c = model.config;
  const ArchKeys k{GgufArchitecture(c)};
  using gguf::Value;
  KeyValues kv = {{"general.architecture", Value::String(k.arch)},
                  {"general.name", Value::String(std::filesystem::path(model.source).filename().string())},
                  {"general.alignment", Value::Uint32(gguf::kDefaultAlignment)},
                  {"general.file_type", Value::Uint32(file_type)},
                  {k("context_length"), Value::Uint32(c.max_positions)},
                  {k("embedding_length"), Value::Uint32(c.dim)},
                  {k("block_count"), Value::Uint32(c.n_layers)},
                  {k("feed_forward_length"), Value::Uint32(c.hidden_dim)},
                  {k("rope.dimension_count"), Value::Uint32(c.head_size())},
                  {k("attention.key_length"), Value::Uint32(c.head_dim)},
                  {k("attention.value_length"), Value::Uint32(c.head_dim)},
                  {k("attention.head_count"), Value::Uint32(c.n_heads)},
                  {k("attention.head_count_kv"), Value::Uint32(c.n_kv_heads)},
                  {k("attention.layer_norm_rms_epsilon"), Value::Float32(c.norm_eps)},
                  {k("rope.freq_base"), Value::Float32(c.rope_theta)},
                  {k("vocab_size"), Value::Uint32(c.vocab_size)}};
  if (c.fused_projections || c.gemma) kv.emplace_back(k("attention.sliding_window"), Value::Uint32(c.sliding_window));
  if (c.gemma) {
    kv.emplace_back(k("attention.sliding_window_pattern"), Value::Uint32(c.window_pattern));
    if (c.attn_softcap > 0.0f) kv.emplace_back(k("attn_logit_softcapping"), Value::Float32(c.attn_softcap));
    if (c.final_softcap > 0.0f) kv.emplace_back(k("final_logit_softcapping"), Value::Float32(c.final_softcap));
    if (c.qk_norm) kv.emplace_back(k("rope.freq_base_swa"), Value::Float32(c.rope_local_theta));
  }
  if (c.n_experts > 0) {
    kv.emplace_back(k("expert_count"), Value::Uint32(c.n_experts));
    kv.emplace_back(k("expert_used_count"), Value::Uint32(c.n_experts_per_tok));
  }
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    kv.emplace_back(k("rope.scaling.type"), Value::String("linear"));
    kv.emplace_back(k("rope.scaling.factor"), Value::Float32(static_cast<float>(c.rope_scaling.factor)));
  }
  return kv;
}

// The vocabulary's keys: llama2.c's tokenizer.bin when given, else none and
// the model's own special tokens.
Status AddVocabKeys(const ModelConfig& c, const std::string& tokenizer, const std::string& path, KeyValues* kv) {
  using gguf::Value;
  if (!tokenizer.empty()) {
    VERITY_ASSIGN_OR_RETURN(auto tok, Llama2cVocabKeys(tokenizer, c.vocab_size));
    for (auto& e : tok) kv->push_back(std::move(e));
  } else {
    // No vocabulary, said the way llama.cpp's loader accepts (without the key
    // it refuses the file: "key not found in model: tokenizer.ggml.model").
    kv->emplace_back("tokenizer.ggml.model", Value::String(gguf::kNoVocab));
    // The model's own special tokens; GGUF holds one EOS and one end-of-turn.
    if (c.bos_id >= 0) kv->emplace_back("tokenizer.ggml.bos_token_id", Value::Uint32(c.bos_id));
    if (!c.eos_ids.empty()) kv->emplace_back("tokenizer.ggml.eos_token_id", Value::Uint32(c.eos_ids[0]));
    if (c.eos_ids.size() > 1) kv->emplace_back("tokenizer.ggml.eot_token_id", Value::Uint32(c.eos_ids[1]));
    if (c.eos_ids.size() > 2)
      return Status::Error(path + ": GGUF holds at most two end tokens (eos, eot); the model has " +
                           std::to_string(c.eos_ids.size()));
  }
  return OkStatus();
}

// The GGUF tensors in writing order, each with its name, dims, type and the
// expected tensors it holds.
std::vector<Planned> PlanTensors(const ModelConfig& c, const std::vector<ExpectedTensor>& expected,
                                 const GgufTypes& types) {
  std::vector<Planned> plan;
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < expected.size(); i++) {
    const GgufPlace at = PlaceOf(expected[i].stored_name(), c.gemma);
    auto it = by_name.find(at.name);
    if (it != by_name.end()) {  // another expert of a stacked tensor, or part of a fused one
      plan[it->second].parts.push_back(i);
      continue;
    }
    Planned p;
    p.spec.name = at.name;
    p.spec.dims = GgufDims(expected[i].stored_shape(), c.n_experts, at.expert >= 0);
    // Vectors stay F32 (as llama.cpp keeps them); in a block file (q8_0
    // too) each matrix takes the type llama.cpp's quantizer gives it, F16
    // where its rows are not whole blocks of any.
    const bool matrix = expected[i].shape.size() == 2;
    p.spec.type = matrix ? types.matrix_type : gguf::kF32;
    if (matrix && types.blocks) {
      quants::TensorSite site{at.name,     LayerOf(at.name),    c.n_layers,
                              c.n_experts, c.shared_classifier, expected[i].shape[1]};
      p.spec.type = quants::PlannedType(*types.blocks, site);
    }
    p.parts.push_back(i);
    const bool q = at.name.find(".attn_q.") != std::string::npos, k = at.name.find(".attn_k.") != std::string::npos;
    // llama's NORM rope wants interleaved rows; qwen2's and qwen3's NEOX rope the halves.
    p.permute = (q || k) && c.rope_style == RopeStyle::kHalves && !NeoxArchitecture(c);
    p.heads = q ? c.n_heads : c.n_kv_heads;
    by_name[at.name] = plan.size();
    plan.push_back(std::move(p));
  }
  return plan;
}

// An expected tensor's values as f32, [rows x cols], from its slot.
std::vector<float> ReadSlotValues(const Model& model, const Slot& slot, const ExpectedTensor& t) {
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1, cols = t.shape.back();
  std::vector<float> v(static_cast<size_t>(rows * cols)), row;
  if (slot.vec) {
    ReadVector(model, slot.vec, static_cast<int64_t>(v.size()), v.data());
  } else {
    const kernels::Weights& w = *slot.mat;  // its stored rows/cols; a padded FFN width is dropped
    row.resize(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < rows; r++) {
      kernels::DecodeRow(w, static_cast<int>(r), row.data());
      std::memcpy(&v[r * cols], row.data(), static_cast<size_t>(cols) * 4);
    }
  }
  return v;
}

// Row h*hs + j*hs/2 + i -> h*hs + 2i + j (see the top of this file).
void PermuteHalvesToPairs(int heads, int hs, int64_t cols, std::vector<float>* v) {
  const std::vector<float> src = *v;
  for (int h = 0; h < heads; h++)
    for (int r = 0; r < hs; r++) {
      const int64_t from = h * hs + r, to = h * hs + 2 * (r % (hs / 2)) + r / (hs / 2);
      std::memcpy(&(*v)[to * cols], &src[from * cols], static_cast<size_t>(cols) * 4);
    }
}

// One planned tensor's bytes: its parts read, q/k rows permuted, encoded.
Status EncodePlanned(const Model& model, const std::vector<Slot>& slots, const std::vector<ExpectedTensor>& expected,
                     const Planned& p, const std::string& path, std::string* out) {
  const int hs = model.config.head_size();
  std::vector<float> all;
  for (size_t i : p.parts) {
    std::vector<float> v = ReadSlotValues(model, slots[i], expected[i]);
    if (p.permute) PermuteHalvesToPairs(p.heads, hs, expected[i].shape.back(), &v);
    all.insert(all.end(), v.begin(), v.end());
  }
  return Encode(p.spec.type, all, out, path + ": tensor " + p.spec.name);
}

// What llama.cpp's gemma2 and gemma3 graphs can express: gemma2 always
// soft-caps (by the file's values) and classifies with token_embd, gemma3
// never caps attention, and the attention scale is inferred from the shape
// (ReadGemmaKeys).
Status CheckGemmaWritable(const Model& model, const std::string& path) {
  const ModelConfig& c = model.config;
  if (!c.gemma) return OkStatus();
  const std::string where = path + ": " + model.source + ": ";
  if (!c.qk_norm && (c.attn_softcap == 0.0f || c.final_softcap == 0.0f))
    return Status::Error(where + "a gemma2 without both soft-caps has no GGUF form llama.cpp reads");
  if (!c.qk_norm && !c.shared_classifier)  // llama.cpp's gemma2 reads no output.weight
    return Status::Error(where + "an untied gemma2 has no GGUF form llama.cpp reads (its gemma2 classifier is " +
                         "token_embd)");
  if (c.qk_norm && c.attn_softcap > 0.0f)
    return Status::Error(where + "a gemma3 with an attention soft-cap has no GGUF form llama.cpp reads");
  if (c.query_pre_attn_scalar != LlamaCppQueryScale(c))
    return Status::Error(where + "query_pre_attn_scalar " + std::to_string(c.query_pre_attn_scalar) + " is not the " +
                         std::to_string(LlamaCppQueryScale(c)) + " llama.cpp infers for this " +
                         "shape; GGUF cannot state it");
  return OkStatus();
}

}  // namespace

Status WriteGgufCheckpoint(const Model& model, const std::string& path, const std::string& dtype,
                           const std::string& tokenizer) {
  const ModelConfig& c = model.config;
  // qwen2, qwen3 and phi3 files rotate halves and hold no rope_freqs.weight
  // (llama.cpp's graphs for them read none).
  if (NeoxArchitecture(c) && (c.rope_style != RopeStyle::kHalves || !RopeFreqFactors(c).empty()))
    return Status::Error(path + ": " + model.source + ": a " + GgufArchitecture(c) +
                         " model with interleaved RoPE or Llama 3 RoPE scaling has no GGUF form llama.cpp reads");
  VERITY_RETURN_IF_ERROR(CheckGemmaWritable(model, path));
  if (c.sliding_window > 0 && !c.fused_projections && !c.gemma)  // phi3 and gemma state theirs (ModelKeys)
    return Status::Error(path + ": " + model.source + " has a sliding window (mistral, " +
                         std::to_string(c.sliding_window) + "), which verity does not write to GGUF");
  VERITY_ASSIGN_OR_RETURN(const GgufTypes types, TypesOf(dtype));
  KeyValues kv = ModelKeys(model, types.file_type);
  VERITY_RETURN_IF_ERROR(AddVocabKeys(c, tokenizer, path, &kv));
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  const std::vector<Planned> plan = PlanTensors(c, expected, types);
  std::vector<gguf::TensorSpec> specs;
  for (const Planned& p : plan) specs.push_back(p.spec);
  // Llama 3 scaling (or GGUF factors read in) as llama.cpp stores it: rope_freqs.weight.
  std::vector<float> rope_freqs = RopeFreqFactors(c);
  if (!rope_freqs.empty()) {
    gguf::TensorSpec spec;
    spec.name = "rope_freqs.weight";
    spec.dims = {rope_freqs.size()};
    spec.type = gguf::kF32;
    specs.push_back(spec);
  }
  Model& mut = const_cast<Model&>(model);  // Slots() takes addresses; nothing is written through them
  const std::vector<Slot> slots = Slots(mut);
  return gguf::Write(path, kv, specs, [&](size_t k, std::string* out) -> Status {
    if (k == plan.size()) {
      out->append(reinterpret_cast<const char*>(rope_freqs.data()), rope_freqs.size() * 4);
      return OkStatus();
    }
    return EncodePlanned(model, slots, expected, plan[k], path, out);
  });
}

}  // namespace verity
