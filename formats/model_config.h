// A model's shape: the configuration the checkpoint parsers produce
// (formats/checkpoint_config.h) and the engine runs (engine/engine.h), with
// the checks that make one usable.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace verity {

// How query/key dimensions are paired for rotation. llama2.c checkpoints rotate
// adjacent pairs (2i, 2i+1); Hugging Face checkpoints rotate halves (i, i+d/2).
enum class RopeStyle { kInterleaved, kHalves };

// RoPE frequency scaling, as Hugging Face's modeling_rope_utils defines it
// (`rope_scaling` in config.json): none; linear (every inverse frequency
// divided by `factor`); llama3 (`_compute_llama3_parameters`: wavelengths
// below original/high_freq_factor keep their frequency, those above
// original/low_freq_factor are divided by `factor`, the band between is
// interpolated).
enum class RopeScalingType { kNone, kLinear, kLlama3 };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                  // linear, llama3
  double low_freq_factor = 0.0;         // llama3
  double high_freq_factor = 0.0;        // llama3
  double original_max_positions = 0.0;  // llama3: original_max_position_embeddings
};
// "none", "linear" or "llama3".
const char* RopeScalingName(RopeScalingType t);

struct ModelConfig {
  int dim = 0;         // residual width
  int hidden_dim = 0;  // FFN width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // per head: q has n_heads * head_dim rows, k and v n_kv_heads * head_dim
  int vocab_size = 0;
  int seq_len = 0;                 // context: the positions the KV cache holds (see SetContext)
  int max_positions = 0;           // the positions the model was made for (max_position_embeddings; llama2.c seq_len)
  bool shared_classifier = false;  // classifier reuses the token embedding
  float rope_theta = 0.0f;
  RopeScaling rope_scaling;
  // GGUF's rope_freqs.weight (llama.cpp's form of Llama 3 scaling): pair i's
  // inverse frequency is divided by factor i. Empty: none.
  std::vector<float> rope_freq_factors;
  float norm_eps = 0.0f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  // Qwen2: the q, k and v projections add a bias (the o projection and the
  // FFN do not). Hugging Face names them self_attn.{q,k,v}_proj.bias.
  bool qkv_bias = false;
  // Qwen3: each head's q and k are RMS-normalised over head_dim (one weight
  // vector for q's heads, one for k's, eps norm_eps) before RoPE. Hugging
  // Face names them self_attn.{q,k}_norm.weight.
  bool qk_norm = false;
  // Phi-3: checkpoints store q, k and v as rows of one tensor
  // (self_attn.qkv_proj: q's rows, then k's, then v's) and the FFN's gate and
  // up as rows of another (mlp.gate_up_proj: gate, then up). The loaders
  // split them by rows (ExpectedTensor::fused); the math is Llama's.
  bool fused_projections = false;
  // Mistral's and Phi-3's sliding_window: each position attends to itself
  // and at most this many - 1 before it (kernels::AttentionArgs::window);
  // the KV cache still holds the whole context. 0: no window.
  int sliding_window = 0;
  // Gemma 2 and 3 (docs/families/gemma2.md): the embedding scaled by
  // sqrt(dim); every RMSNorm weight applied as 1 + w (Hugging Face stores w,
  // and its loader adds the 1; GGUF files hold 1 + w, as llama.cpp's
  // converter writes them, so a Model always holds 1 + w); a norm after
  // attention and after the FFN, each before its residual add; the FFN gated
  // by tanh-approximated GELU (GeGLU) instead of SiLU.
  bool gemma = false;
  // Attention scores are q.k / sqrt(this): Gemma's query_pre_attn_scalar.
  // 0: head_dim.
  float query_pre_attn_scalar = 0.0f;
  // Gemma 2's attn_logit_softcapping and final_logit_softcapping: each score
  // (each logit) s becomes cap * tanh(s / cap). 0: none.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // With a sliding window, the layers that attend globally: layer l does iff
  // (l + 1) % window_pattern == 0 (Gemma 2: 2, every other layer; Gemma 3:
  // 6). 0: every layer is windowed (Mistral, Phi-3).
  int window_pattern = 0;
  // Gemma 3: the windowed layers' RoPE base (rope_local_base_freq), never
  // scaled; rope_theta and rope_scaling are the global layers'. 0: every
  // layer uses rope_theta.
  float rope_local_theta = 0.0f;
  int n_experts = 0;          // Mixtral-style MoE when > 0
  int n_experts_per_tok = 0;  // top-k routed experts per token
  // Special tokens, from the model's files: BOS starts every prompt (none when
  // < 0) and, as in run.c, delimits sequences; sampling any of eos_ids ends
  // generation.
  int bos_id = -1;
  std::vector<int> eos_ids;

  int head_size() const { return head_dim; }
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // Whether layer l attends within sliding_window (see window_pattern).
  bool windowed(int l) const { return sliding_window > 0 && (window_pattern == 0 || (l + 1) % window_pattern != 0); }
  // Layer l's window for AttentionArgs::window: sliding_window or 0.
  int window_of(int l) const { return windowed(l) ? sliding_window : 0; }
};

// The context HF and GGUF models get without --ctx: min(max_positions, this).
inline constexpr int kDefaultContext = 4096;

// Sets the context (KV cache positions) to `ctx`; an error names `flag` when
// ctx is not in [1, max_positions].
[[nodiscard]] Status SetContext(ModelConfig& c, int ctx, const std::string& flag = "--ctx");

// Values the llama2.c format defines without storing them (stated once, here).
struct Llama2cFormat {
  static constexpr float kRopeTheta = 10000.0f;
  static constexpr float kNormEps = 1e-5f;
  static constexpr int kBos = 1;
  static constexpr int kEos = 2;
};

// A per-layer list of which layers attend within the window (Hugging Face
// layer_types, GGUF's flags) as ModelConfig::window_pattern: the pattern its
// first global layer implies, and the first layer the list breaks it at
// (-1: none, the list is that pattern).
struct WindowPattern {
  int pattern = 0;
  int mismatch = -1;
};
WindowPattern WindowPatternOf(const std::vector<bool>& windowed);

// Validates a config's internal consistency; `where` prefixes every message.
[[nodiscard]] Status ValidateConfig(const ModelConfig& c, const std::string& where);

}  // namespace verity
