// libFuzzer target: config.json parsing. Any text must be rejected with a
// Status naming the file, or accepted; an accepted config must pass
// ValidateConfig with every size in range (head_dim, the context, BOS/EOS
// included), and survive a round trip through the converter's writer
// (HfConfigText) unchanged, rope_scaling and the special tokens included.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/checkpoint_config.h"

namespace {
const std::string kPath = "fuzz/config.json";
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
bool Same(const verity::ModelConfig& a, const verity::ModelConfig& b) {
  return a.dim == b.dim && a.hidden_dim == b.hidden_dim && a.n_layers == b.n_layers && a.n_heads == b.n_heads &&
         a.n_kv_heads == b.n_kv_heads && a.vocab_size == b.vocab_size && a.seq_len == b.seq_len &&
         a.shared_classifier == b.shared_classifier && a.rope_theta == b.rope_theta && a.norm_eps == b.norm_eps &&
         a.rope_style == b.rope_style && a.n_experts == b.n_experts && a.n_experts_per_tok == b.n_experts_per_tok &&
         a.head_dim == b.head_dim && a.max_positions == b.max_positions && a.bos_id == b.bos_id &&
         a.eos_ids == b.eos_ids && a.rope_scaling.type == b.rope_scaling.type &&
         a.rope_scaling.factor == b.rope_scaling.factor &&
         a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
         a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor &&
         a.rope_scaling.original_max_positions == b.rope_scaling.original_max_positions;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace verity;
  auto c = ParseHfConfig(std::string(reinterpret_cast<const char*>(data), size), kPath);
  if (!c.ok()) {
    Check(c.status().message().rfind(kPath + ": ", 0) == 0);  // errors name the file
    return 0;
  }
  Check(ValidateConfig(*c, "accepted").ok());
  for (int v : {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size, c->seq_len})
    Check(v > 0);
  // head_dim may differ from dim / n_heads (config.json head_dim); q and kv widths follow it.
  Check(c->head_size() % 2 == 0 && c->n_heads % c->n_kv_heads == 0 && c->kv_dim() <= c->q_dim());
  Check(c->seq_len <= c->max_positions && c->seq_len <= kDefaultContext);
  Check(c->bos_id < c->vocab_size);
  for (int e : c->eos_ids) Check(e >= 0 && e < c->vocab_size);
  Check(std::isfinite(c->rope_theta) && c->rope_theta > 0 && std::isfinite(c->norm_eps) && c->norm_eps > 0);
  Check(c->rope_style == RopeStyle::kHalves);
  Check(c->n_experts >= 0 && c->n_experts_per_tok >= 0 && c->n_experts_per_tok <= c->n_experts &&
        (c->n_experts > 0) == (c->n_experts_per_tok > 0));
  // What the converter writes for this config reads back as the same config.
  auto again = ParseHfConfig(HfConfigText(*c, "float32"), kPath);
  Check(again.ok() && Same(*c, *again));
  return 0;
}
