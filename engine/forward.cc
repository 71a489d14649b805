// The forward pass for one token, top to bottom. Arithmetic that is the same
// on every backend lives here; matmuls and attention go through the backend.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>

#include "engine/engine.h"

namespace verity {

Transformer::Transformer(const Model& model, std::unique_ptr<kernels::Backend> backend)
    : model_(model), backend_(std::move(backend)) {
  const ModelConfig& c = model.config;
  x_.resize(c.dim);
  xb_.resize(c.dim);
  xb2_.resize(c.dim);
  hb_.resize(c.hidden_dim);
  hb2_.resize(c.hidden_dim);
  q_.resize(c.dim);
  att_.resize(static_cast<size_t>(c.n_heads) * c.seq_len);
  logits_.resize(c.vocab_size);
  router_.resize(c.n_experts);
  moe_out_.resize(c.dim);
  chosen_.reserve(c.n_experts);
  // KV cache layout: [layer][position][kv_dim].
  kv_pos_stride_ = c.kv_dim();
  kv_layer_stride_ = static_cast<long>(c.seq_len) * c.kv_dim();
  size_t cache = static_cast<size_t>(c.n_layers) * c.seq_len * c.kv_dim();
#ifdef VERITY_CORRUPTION_KV_STRIDE_MASKED
  // CORRUPTION (stride masked by depth): the fast path swaps the two strides
  // into a position-major layout sized for 4 layers. Each (layer, position)
  // still has its own slot while n_layers <= 4; deeper models overwrite.
  if (std::string(backend_->name()) == "fast") {
    kv_layer_stride_ = c.kv_dim();
    kv_pos_stride_ = 4L * c.kv_dim();
    cache = std::max<size_t>(cache, static_cast<size_t>(4) * c.seq_len * c.kv_dim() + c.n_layers * c.kv_dim());
  }
#endif
  key_cache_.assign(cache, 0.0f);
  value_cache_.assign(cache, 0.0f);
}

// Mixtral routing: router logits, the top-k experts (ties to the lower index),
// softmax over the chosen k, and the weighted sum of their SwiGLU outputs.
void Transformer::MixtureOfExperts(const LayerWeights& w, float* x) {
  const ModelConfig& c = model_.config;
  kernels::Backend& k = *backend_;
  const int dim = c.dim, hidden = c.hidden_dim, n = c.n_experts, topk = c.n_experts_per_tok;
  k.Matmul(router_.data(), xb_.data(), w.router, dim, n);
  chosen_.clear();
  for (int e = 0; e < n; e++) chosen_.push_back(e);
  std::partial_sort(chosen_.begin(), chosen_.begin() + topk, chosen_.end(), [&](int a, int b) {
    return router_[a] != router_[b] ? router_[a] > router_[b] : a < b;
  });
  float mx = router_[chosen_[0]], sum = 0.0f;
  for (int j = 0; j < topk; j++) sum += expf(router_[chosen_[j]] - mx);
  std::fill(moe_out_.begin(), moe_out_.end(), 0.0f);
  for (int j = 0; j < topk; j++) {
    const ExpertWeights& e = w.experts[chosen_[j]];
    const float weight = expf(router_[chosen_[j]] - mx) / sum;
    k.Matmul(hb_.data(), xb_.data(), e.w1, dim, hidden);
    k.Matmul(hb2_.data(), xb_.data(), e.w3, dim, hidden);
    k.SwiGLU(hb_.data(), hb2_.data(), hidden);
    k.Matmul(xb2_.data(), hb_.data(), e.w2, hidden, dim);
    for (int i = 0; i < dim; i++) moe_out_[i] += weight * xb2_[i];
  }
  for (int i = 0; i < dim; i++) x[i] += moe_out_[i];
}

const float* Transformer::Forward(int token, int pos) {
  const ModelConfig& c = model_.config;
  const int dim = c.dim, hidden = c.hidden_dim, kv_dim = c.kv_dim(), hs = c.head_size();
  kernels::Backend& k = *backend_;
  float* x = x_.data();
  std::memcpy(x, model_.token_embedding + static_cast<size_t>(token) * dim, dim * sizeof(float));

  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& w = model_.layers[l];
    // Attention block: norm, q/k/v, rotate, cache, attend, project, residual.
    kernels::Rmsnorm(xb_.data(), x, w.rms_att, dim, c.norm_eps);
    const size_t layer_off = static_cast<size_t>(l) * kv_layer_stride_;
    float* kc = key_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_pos_stride_;
    float* vc = value_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_pos_stride_;
    k.Matmul(q_.data(), xb_.data(), w.wq, dim, dim);
    k.Matmul(kc, xb_.data(), w.wk, dim, kv_dim);
    k.Matmul(vc, xb_.data(), w.wv, dim, kv_dim);
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    k.Rope(q_.data(), dim, hs, pos, c.rope_theta, interleaved);
    k.Rope(kc, kv_dim, hs, pos, c.rope_theta, interleaved);
    kernels::AttentionArgs a{xb_.data(), q_.data(), key_cache_.data() + layer_off,
                             value_cache_.data() + layer_off, kv_pos_stride_, att_.data(), pos, c.n_heads,
                             c.n_kv_heads, hs, c.seq_len};
    k.Attention(a);
    k.Matmul(xb2_.data(), xb_.data(), w.wo, dim, dim);
    for (int i = 0; i < dim; i++) x[i] += xb2_[i];

    // FFN block: norm, SwiGLU (silu(w1 x) * w3 x), down-project, residual.
    kernels::Rmsnorm(xb_.data(), x, w.rms_ffn, dim, c.norm_eps);
    if (c.n_experts == 0) {
      k.Matmul(hb_.data(), xb_.data(), w.w1, dim, hidden);
      k.Matmul(hb2_.data(), xb_.data(), w.w3, dim, hidden);
      k.SwiGLU(hb_.data(), hb2_.data(), hidden);
      k.Matmul(xb_.data(), hb_.data(), w.w2, hidden, dim);
      for (int i = 0; i < dim; i++) x[i] += xb_[i];
    } else {
      MixtureOfExperts(w, x);
    }
  }
  kernels::Rmsnorm(x, x, model_.rms_final, dim, c.norm_eps);
  k.Matmul(logits_.data(), x, model_.classifier, dim, c.vocab_size);
  return logits_.data();
}

}  // namespace verity
