// The checks and names of a ModelConfig; see model_config.h.
#include "formats/model_config.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <utility>

namespace verity {

const char* RopeScalingName(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
  }
  return "?";
}

namespace {

// Gemma's numbers: finite and not negative, and only where Gemma's layers
// are (no other family's config states them, so none could be written).
Status ValidateGemmaKeys(const ModelConfig& c, const std::string& where) {
  const std::pair<const char*, float> values[] = {{"query_pre_attn_scalar", c.query_pre_attn_scalar},
                                                  {"attn_logit_softcapping", c.attn_softcap},
                                                  {"final_logit_softcapping", c.final_softcap},
                                                  {"rope_local_base_freq", c.rope_local_theta}};
  for (const auto& [name, v] : values) {
    if (!(v >= 0.0f) || !std::isfinite(v))
      return Status::Error(where + ": " + name + " must be a number >= 0, got " + std::to_string(v));
    if (v != 0.0f && !c.gemma) return Status::Error(where + ": " + name + " is Gemma's; this model is not a Gemma");
  }
  if (c.window_pattern < 0 || (c.window_pattern > 0 && c.sliding_window == 0))
    return Status::Error(where + ": a sliding window pattern (" + std::to_string(c.window_pattern) +
                         ") needs a positive sliding_window");
  if (c.window_pattern > 0 && !c.gemma) return Status::Error(where + ": a sliding window pattern is Gemma's");
  if (c.gemma && !c.qk_norm && c.rope_local_theta != 0.0f)
    return Status::Error(where + ": rope_local_base_freq is Gemma 3's; a Gemma 2 has one RoPE base");
  if (c.gemma && c.qk_norm && c.rope_local_theta <= 0.0f)
    return Status::Error(where + ": a Gemma 3 model needs its windowed layers' RoPE base (rope_local_base_freq)");
  if (c.gemma && (c.query_pre_attn_scalar <= 0.0f || c.sliding_window <= 0 || c.window_pattern <= 0))
    return Status::Error(where + ": a Gemma model needs query_pre_attn_scalar, a sliding_window and its " +
                         "pattern (a global layer every window_pattern-th)");
  return OkStatus();
}

}  // namespace

WindowPattern WindowPatternOf(const std::vector<bool>& windowed) {
  WindowPattern w;
  const int n = static_cast<int>(windowed.size());
  int first_global = 0;
  while (first_global < n && windowed[first_global]) first_global++;
  w.pattern = first_global + 1;
  for (int l = 0; l < n && w.mismatch < 0; l++)
    if (windowed[l] != ((l + 1) % w.pattern != 0)) w.mismatch = l;
  return w;
}

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  const std::pair<const char*, int> fields[] = {{"dim", c.dim},
                                                {"hidden_dim", c.hidden_dim},
                                                {"n_layers", c.n_layers},
                                                {"n_heads", c.n_heads},
                                                {"n_kv_heads", c.n_kv_heads},
                                                {"head_dim", c.head_dim},
                                                {"vocab_size", c.vocab_size},
                                                {"seq_len", c.seq_len},
                                                {"max_positions", c.max_positions}};
  for (const auto& [name, v] : fields)
    if (v <= 0) return Status::Error(where + ": " + name + " must be positive, got " + std::to_string(v));
  if (c.n_heads % c.n_kv_heads != 0)
    return Status::Error(where + ": n_heads (" + std::to_string(c.n_heads) + ") is not divisible by n_kv_heads (" +
                         std::to_string(c.n_kv_heads) + ")");
  // One family's traits at most (a window is Mistral's alone, or Phi-3's
  // with its fused projections, or Gemma's with its q/k norms in Gemma 3).
  const int traits = (c.qkv_bias ? 1 : 0) + (c.qk_norm && !c.gemma ? 1 : 0) + (c.n_experts > 0 ? 1 : 0) +
                     (c.fused_projections ? 1 : 0) + (c.gemma ? 1 : 0) +
                     (c.sliding_window != 0 && !c.fused_projections && !c.gemma ? 1 : 0);
  if (traits > 1)
    return Status::Error(where + ": q/k/v biases (qwen2), q/k norms (qwen3), a sliding window (mistral), " +
                         "experts (mixtral), fused projections (phi3) and Gemma's layers are traits of different " +
                         "families; verity reads no model with two of them");
  VERITY_RETURN_IF_ERROR(ValidateGemmaKeys(c, where));
  if (c.sliding_window < 0)
    return Status::Error(where + ": sliding_window must be positive, got " + std::to_string(c.sliding_window));
  if (c.head_dim % 2 != 0)
    return Status::Error(where + ": head_dim " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  if (static_cast<int64_t>(c.n_heads) * c.head_dim > INT32_MAX)
    return Status::Error(where + ": n_heads x head_dim overflows");
  if (c.seq_len > c.max_positions)
    return Status::Error(where + ": context " + std::to_string(c.seq_len) + " exceeds max_positions " +
                         std::to_string(c.max_positions));
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta))
    return Status::Error(where + ": rope_theta must be positive");
  if (!(c.norm_eps > 0.0f) || !std::isfinite(c.norm_eps))
    return Status::Error(where + ": norm epsilon must be positive");
  const RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScalingType::kNone && !(s.factor > 0.0 && std::isfinite(s.factor)))
    return Status::Error(where + ": rope_scaling factor must be a positive number");
  if (s.type == RopeScalingType::kLlama3 &&
      !(s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor && std::isfinite(s.high_freq_factor) &&
        s.original_max_positions > 0.0 && std::isfinite(s.original_max_positions)))
    return Status::Error(where +
                         ": rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and a positive "
                         "original_max_position_embeddings");
  if (!c.rope_freq_factors.empty()) {
    if (static_cast<int>(c.rope_freq_factors.size()) != c.head_dim / 2)
      return Status::Error(where + ": " + std::to_string(c.rope_freq_factors.size()) +
                           " RoPE frequency factors for head_dim " + std::to_string(c.head_dim) +
                           " (needs head_dim/2)");
    for (float f : c.rope_freq_factors)
      if (!(f > 0.0f) || !std::isfinite(f)) return Status::Error(where + ": a RoPE frequency factor is not positive");
  }
  if (c.bos_id >= c.vocab_size)
    return Status::Error(where + ": bos_token_id " + std::to_string(c.bos_id) + " is outside the vocabulary [0, " +
                         std::to_string(c.vocab_size) + ")");
  for (int e : c.eos_ids)
    if (e < 0 || e >= c.vocab_size)
      return Status::Error(where + ": eos_token_id " + std::to_string(e) + " is outside the vocabulary [0, " +
                           std::to_string(c.vocab_size) + ")");
  return OkStatus();
}

Status SetContext(ModelConfig& c, int ctx, const std::string& flag) {
  if (ctx < 1 || ctx > c.max_positions)
    return Status::Error(flag + " " + std::to_string(ctx) + " is outside [1, " + std::to_string(c.max_positions) +
                         "] (the model's max_position_embeddings)");
  c.seq_len = ctx;
  return OkStatus();
}

}  // namespace verity
