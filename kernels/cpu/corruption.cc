// Compiled only into corruption builds (cmake -DVERITY_CORRUPTION=<name>,
// see CORRUPTIONS.md); a normal build compiles no_corruption.cc instead. Each
// deliberate bug is a wrapper around the fast backend that changes one step
// and forwards everything else, so the kernels a reader studies carry none.
#include <cmath>
#include <string>

#include "kernels/cpu/backends.h"

#ifndef VERITY_CORRUPTION_NAME
#error "corruption.cc belongs to corruption builds only (VERITY_CORRUPTION_NAME is unset)"
#endif

namespace verity::kernels {
namespace {

class CorruptedFast final : public Backend {
 public:
  CorruptedFast(std::unique_ptr<Backend> inner, std::string bug) : inner_(std::move(inner)), bug_(std::move(bug)) {}
  // Reports the wrapped backend's name: the corruption must pass as "fast".
  const char* name() const override { return inner_->name(); }

  // work-twice is a speed bug, not a wrong number: every matmul and attention
  // step runs a second time and writes the same bits again (none of them reads
  // its own output), so parity passes it and only a speed measurement sees it.
  void Matmul(float* out, const float* x, const Weights& w) override {
    for (int i = 0; i < passes_; i++) inner_->Matmul(out, x, w);
  }
  void MatmulBatch(float* out, const float* x, const Weights& w, int T) override {
    for (int i = 0; i < passes_; i++) inner_->MatmulBatch(out, x, w, T);
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    for (int i = 0; i < passes_; i++) inner_->MatmulShared(x, T, targets, count);
  }
  std::optional<PoolCounters> pool_counters() const override { return inner_->pool_counters(); }
  bool batch_rows_independent() const override { return inner_->batch_rows_independent(); }

  void Attention(const AttentionArgs& a) override {
    // Work that silently does not happen: past 128 positions the attention
    // step returns early, leaving whatever was in `out`, unreported.
    if (bug_ == "attention-stale-past-128" && a.pos >= 128) return;
    for (int i = 0; i < passes_; i++) inner_->Attention(a);
  }

  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    // Numerics correct but not the ones specified: rotate halves on an
    // interleaved-pair model.
    if (bug_ == "rope-halves") interleaved = false;
    // Configuration read wrong: the frequency exponent uses the vector width
    // where head_size belongs.
    if (bug_ == "rope-freq-dim") return RopeWithExponentBase(vec, size, head_size, pos, inv_freq, interleaved, size);
    inner_->Rope(vec, size, head_size, pos, inv_freq, interleaved);
  }

  void SwiGLU(float* hb, const float* hb2, int n) override {
    if (bug_ != "gelu-for-silu") return inner_->SwiGLU(hb, hb2, n);
    // Numerics correct but not the ones specified: the tanh-GELU gate where
    // the model was trained with SiLU.
    for (int i = 0; i < n; i++) {
      const float v = hb[i];
      const float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
      hb[i] = g * hb2[i];
    }
  }

 private:
  // The reference rotation with frequencies theta^(-2i / exponent_base): the
  // model's table inv_freq[i] = theta^(-2i / head_size), raised to
  // head_size / exponent_base (exact for an unscaled table).
  static void RopeWithExponentBase(float* vec, int size, int head_size, int pos, const float* inv_freq,
                                   bool interleaved, int exponent_base) {
    const int half = head_size / 2;
    const float power = static_cast<float>(head_size) / static_cast<float>(exponent_base);
    for (int i = 0; i < half; i++) {
      const float val = static_cast<float>(pos) * powf(inv_freq[i], power);
      const float fcr = cosf(val), fci = sinf(val);
      for (int base = 0; base < size; base += head_size) {
        const int x = interleaved ? base + 2 * i : base + i;
        const int y = interleaved ? x + 1 : x + half;
        const float v0 = vec[x], v1 = vec[y];
        vec[x] = v0 * fcr - v1 * fci;
        vec[y] = v0 * fci + v1 * fcr;
      }
    }
  }

  std::unique_ptr<Backend> inner_;
  std::string bug_;
  int passes_ = bug_ == "work-twice" ? 2 : 1;
};

}  // namespace

std::unique_ptr<Backend> WrapForCorruptionBuild(std::unique_ptr<Backend> fast) {
  return std::make_unique<CorruptedFast>(std::move(fast), VERITY_CORRUPTION_NAME);
}

}  // namespace verity::kernels
