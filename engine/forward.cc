// The forward pass for one token, top to bottom (Forward), and the same steps
// for a block of prompt positions at once (Prefill). Arithmetic that is the
// same on every backend lives here; matmuls and attention go through the backend.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/corruption_hooks.h"
#include "engine/engine.h"

namespace verity {

KvCacheLayout StandardKvCacheLayout(const ModelConfig& c) {
  KvCacheLayout kv;
  kv.pos_stride = c.kv_dim();
  kv.layer_stride = static_cast<long>(c.seq_len) * c.kv_dim();
  kv.floats = static_cast<size_t>(c.n_layers) * c.seq_len * c.kv_dim();
  return kv;
}

Transformer::Transformer(const Model& model, std::unique_ptr<kernels::Backend> backend)
    : model_(model), backend_(std::move(backend)) {
  const ModelConfig& c = model.config;
  x_.resize(c.dim);
  xb_.resize(std::max(c.dim, c.q_dim()));  // the normed row, then the attention output
  xb2_.resize(c.dim);
  hb_.resize(model.ffn_dim);
  hb2_.resize(model.ffn_dim);
  q_.resize(c.q_dim());
  rope_inv_freq_ = RopeInverseFrequencies(c);
  att_.resize(static_cast<size_t>(c.n_heads) * c.seq_len);
  logits_.resize(c.vocab_size);
  router_.resize(c.n_experts);
  moe_out_.resize(c.dim);
  chosen_.reserve(c.n_experts);
  const KvCacheLayout kv = hooks::KvLayout(StandardKvCacheLayout(c), c, backend_->name());
  kv_pos_stride_ = kv.pos_stride;
  kv_layer_stride_ = kv.layer_stride;
  key_cache_.assign(kv.floats, 0.0f);
  value_cache_.assign(kv.floats, 0.0f);
}

// Mixtral routing: router logits, the top-k experts (ties to the lower index),
// softmax over the chosen k, and the weighted sum of their SwiGLU outputs.
// Reads the normed row xb, adds into the residual row x.
void Transformer::MixtureOfExperts(const LayerWeights& w, const float* xb, float* x) {
  const ModelConfig& c = model_.config;
  kernels::Backend& k = *backend_;
  const int dim = c.dim, ffn = model_.ffn_dim, n = c.n_experts, topk = c.n_experts_per_tok;
  k.Matmul(router_.data(), xb, w.router);
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
    k.Matmul(hb_.data(), xb, e.w1);
    k.Matmul(hb2_.data(), xb, e.w3);
    k.SwiGLU(hb_.data(), hb2_.data(), ffn);
    k.Matmul(xb2_.data(), hb_.data(), e.w2);
    for (int i = 0; i < dim; i++) moe_out_[i] += weight * xb2_[i];
  }
  for (int i = 0; i < dim; i++) x[i] += moe_out_[i];
}

const float* Transformer::Forward(int token, int pos) {
  const ModelConfig& c = model_.config;
  const int dim = c.dim, ffn = model_.ffn_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hs = c.head_size();
  kernels::Backend& k = *backend_;
  float* x = x_.data();
  std::memcpy(x, model_.token_embedding + static_cast<size_t>(token) * dim, dim * sizeof(float));

  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& w = model_.layers[l];
    k.BeginLayer(l);
    // Attention block: norm, q/k/v, rotate, cache, attend, project, residual.
    kernels::Rmsnorm(xb_.data(), x, w.rms_att, dim, c.norm_eps);
    const size_t layer_off = static_cast<size_t>(l) * kv_layer_stride_;
    float* kc = key_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_pos_stride_;
    float* vc = value_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_pos_stride_;
    k.Matmul(q_.data(), xb_.data(), w.wq);
    k.Matmul(kc, xb_.data(), w.wk);
    k.Matmul(vc, xb_.data(), w.wv);
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    k.Rope(q_.data(), q_dim, hs, pos, rope_inv_freq_.data(), interleaved);
    k.Rope(kc, kv_dim, hs, pos, rope_inv_freq_.data(), interleaved);
    kernels::AttentionArgs a{xb_.data(), q_.data(), key_cache_.data() + layer_off,
                             value_cache_.data() + layer_off, kv_pos_stride_, att_.data(), pos, c.n_heads,
                             c.n_kv_heads, hs, c.seq_len};
    k.Attention(a);
    k.Matmul(xb2_.data(), xb_.data(), w.wo);
    for (int i = 0; i < dim; i++) x[i] += xb2_[i];

    // FFN block: norm, SwiGLU (silu(w1 x) * w3 x), down-project, residual.
    kernels::Rmsnorm(xb_.data(), x, w.rms_ffn, dim, c.norm_eps);
    if (c.n_experts == 0) {
      k.Matmul(hb_.data(), xb_.data(), w.w1);
      k.Matmul(hb2_.data(), xb_.data(), w.w3);
      k.SwiGLU(hb_.data(), hb2_.data(), ffn);
      k.Matmul(xb_.data(), hb_.data(), w.w2);
      for (int i = 0; i < dim; i++) x[i] += xb_[i];
    } else {
      MixtureOfExperts(w, xb_.data(), x);
    }
  }
  k.BeginLayer(-1);
  kernels::Rmsnorm(x, x, model_.rms_final, dim, c.norm_eps);
  k.Matmul(logits_.data(), x, model_.classifier);
  return Checked();
}

const float* Transformer::Checked() {
  // A failed backend already wrote NaN where it failed; the logits are made NaN
  // too, so a caller that ignores status() still cannot use a stale row.
  if (!backend_->status().ok()) std::fill(logits_.begin(), logits_.end(), std::numeric_limits<float>::quiet_NaN());
  return logits_.data();
}

// The prompt: the same steps as Forward, for a block of positions at a time,
// so each weight matrix is read once per block instead of once per position.
const float* Transformer::Prefill(const int* tokens, int T, int pos0) {
  for (int b = 0; b < T; b += kPrefillBlock) {
    const int n = std::min(kPrefillBlock, T - b);
    PrefillBlock(tokens + b, n, pos0 + b, /*last=*/b + n == T);
  }
  return Checked();
}

void Transformer::PrefillBlock(const int* tokens, int n, int pos0, bool last) {
  const ModelConfig& c = model_.config;
  const int dim = c.dim, ffn = model_.ffn_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hs = c.head_size();
  kernels::Backend& k = *backend_;
  if (bx_.empty()) {
    const size_t B = kPrefillBlock;
    for (auto* v : {&bx_, &bxb2_}) v->resize(B * dim);
    bxb_.resize(B * std::max(dim, q_dim));  // normed rows [n x dim], then attention rows [n x q_dim]
    bq_.resize(B * q_dim);
    for (auto* v : {&bk_, &bv_}) v->resize(B * kv_dim);
    for (auto* v : {&bhb_, &bhb2_}) v->resize(B * ffn);
  }
  // Row t of each [n x width] block belongs to position pos0 + t.
  auto row = [](std::vector<float>& v, int t, int width) { return v.data() + static_cast<size_t>(t) * width; };
  for (int t = 0; t < n; t++)
    std::memcpy(row(bx_, t, dim), model_.token_embedding + static_cast<size_t>(tokens[t]) * dim, dim * sizeof(float));

  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& w = model_.layers[l];
    k.BeginLayer(l);
    // Attention block: norm each row, q/k/v for the whole block, then per
    // position: rotate, cache, attend (causally: the cache holds every
    // earlier position, this block's included); project, residual.
    for (int t = 0; t < n; t++) kernels::Rmsnorm(row(bxb_, t, dim), row(bx_, t, dim), w.rms_att, dim, c.norm_eps);
    k.MatmulBatch(bq_.data(), bxb_.data(), w.wq, n);
    k.MatmulBatch(bk_.data(), bxb_.data(), w.wk, n);
    k.MatmulBatch(bv_.data(), bxb_.data(), w.wv, n);
    const size_t layer_off = static_cast<size_t>(l) * kv_layer_stride_;
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    for (int t = 0; t < n; t++) {
      const int pos = pos0 + t;
      k.Rope(row(bq_, t, q_dim), q_dim, hs, pos, rope_inv_freq_.data(), interleaved);
      k.Rope(row(bk_, t, kv_dim), kv_dim, hs, pos, rope_inv_freq_.data(), interleaved);
      const size_t at = layer_off + static_cast<size_t>(pos) * kv_pos_stride_;
      std::memcpy(key_cache_.data() + at, row(bk_, t, kv_dim), kv_dim * sizeof(float));
      std::memcpy(value_cache_.data() + at, row(bv_, t, kv_dim), kv_dim * sizeof(float));
    }
    for (int t = 0; t < n; t++) {
      kernels::AttentionArgs a{row(bxb_, t, q_dim), row(bq_, t, q_dim), key_cache_.data() + layer_off,
                               value_cache_.data() + layer_off, kv_pos_stride_, att_.data(), pos0 + t, c.n_heads,
                               c.n_kv_heads, hs, c.seq_len};
      k.Attention(a);
    }
    k.MatmulBatch(bxb2_.data(), bxb_.data(), w.wo, n);
    for (size_t i = 0; i < static_cast<size_t>(n) * dim; i++) bx_[i] += bxb2_[i];

    // FFN block: norm each row, SwiGLU over the block, down-project, residual.
    for (int t = 0; t < n; t++) kernels::Rmsnorm(row(bxb_, t, dim), row(bx_, t, dim), w.rms_ffn, dim, c.norm_eps);
    if (c.n_experts == 0) {
      k.MatmulBatch(bhb_.data(), bxb_.data(), w.w1, n);
      k.MatmulBatch(bhb2_.data(), bxb_.data(), w.w3, n);
      k.SwiGLU(bhb_.data(), bhb2_.data(), n * ffn);
      k.MatmulBatch(bxb_.data(), bhb_.data(), w.w2, n);
      for (size_t i = 0; i < static_cast<size_t>(n) * dim; i++) bx_[i] += bxb_[i];
    } else {
      for (int t = 0; t < n; t++) MixtureOfExperts(w, row(bxb_, t, dim), row(bx_, t, dim));  // routed per position
    }
  }
  // Logits for the block's last position only, and only for the prompt's last block.
  if (last) {
    k.BeginLayer(-1);
    float* x = row(bx_, n - 1, dim);
    kernels::Rmsnorm(x, x, model_.rms_final, dim, c.norm_eps);
    k.Matmul(logits_.data(), x, model_.classifier);
  }
}

}  // namespace verity
