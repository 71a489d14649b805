// The forward pass for one token, top to bottom. Arithmetic that is the same
// on every backend lives here; matmuls and attention go through the backend.
#include <cmath>
#include <cstring>

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
  const size_t cache = static_cast<size_t>(c.n_layers) * c.seq_len * c.kv_dim();
  key_cache_.assign(cache, 0.0f);
  value_cache_.assign(cache, 0.0f);
}

namespace {

// Rotates `vec` ([n_heads_in_vec * head_size]) by position `pos`.
void ApplyRope(float* vec, int size, int head_size, int pos, float theta, RopeStyle style) {
  const int half = head_size / 2;
  for (int base = 0; base < size; base += head_size) {
    for (int i = 0; i < half; i++) {
      // Frequency index i of head_size/2, as run.c computes it from head_dim = 2i.
      float freq = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
      float val = static_cast<float>(pos) * freq;
      float fcr = cosf(val), fci = sinf(val);
      int a, b;  // the pair rotated together
      if (style == RopeStyle::kInterleaved) {
        a = base + 2 * i;
        b = a + 1;
      } else {
        a = base + i;
        b = a + half;
      }
      float v0 = vec[a], v1 = vec[b];
      vec[a] = v0 * fcr - v1 * fci;
      vec[b] = v0 * fci + v1 * fcr;
    }
  }
}

}  // namespace

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
    const size_t layer_off = static_cast<size_t>(l) * c.seq_len * kv_dim;
    float* kc = key_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_dim;
    float* vc = value_cache_.data() + layer_off + static_cast<size_t>(pos) * kv_dim;
    k.Matmul(q_.data(), xb_.data(), w.wq, dim, dim);
    k.Matmul(kc, xb_.data(), w.wk, dim, kv_dim);
    k.Matmul(vc, xb_.data(), w.wv, dim, kv_dim);
    ApplyRope(q_.data(), dim, hs, pos, c.rope_theta, c.rope_style);
    ApplyRope(kc, kv_dim, hs, pos, c.rope_theta, c.rope_style);
    kernels::AttentionArgs a{xb_.data(), q_.data(), key_cache_.data() + layer_off,
                             value_cache_.data() + layer_off, att_.data(), pos, c.n_heads,
                             c.n_kv_heads, hs, c.seq_len};
    k.Attention(a);
    k.Matmul(xb2_.data(), xb_.data(), w.wo, dim, dim);
    for (int i = 0; i < dim; i++) x[i] += xb2_[i];

    // FFN block: norm, SwiGLU (silu(w1 x) * w3 x), down-project, residual.
    kernels::Rmsnorm(xb_.data(), x, w.rms_ffn, dim, c.norm_eps);
    k.Matmul(hb_.data(), xb_.data(), w.w1, dim, hidden);
    k.Matmul(hb2_.data(), xb_.data(), w.w3, dim, hidden);
    for (int i = 0; i < hidden; i++) {
      float val = hb_[i];
      val *= (1.0f / (1.0f + expf(-val)));
      hb_[i] = val * hb2_[i];
    }
    k.Matmul(xb_.data(), hb_.data(), w.w2, hidden, dim);
    for (int i = 0; i < dim; i++) x[i] += xb_[i];
  }
  kernels::Rmsnorm(x, x, model_.rms_final, dim, c.norm_eps);
  k.Matmul(logits_.data(), x, model_.classifier, dim, c.vocab_size);
  return logits_.data();
}

}  // namespace verity
