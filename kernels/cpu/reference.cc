// The reference backend: plain loops, one thread, the order of operations of
// llama2.c's run.c. Every faster path is judged against this one.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/backends.h"

namespace verity::kernels {
namespace {

class Reference final : public Backend {
 public:
  const char* name() const override { return "reference"; }

  void Matmul(float* out, const float* x, const Weights& w) override {
    const int n = w.cols, d = w.rows;
    if (w.dtype == DType::kF32) {
      const float* wf = static_cast<const float*>(w.data);
      for (int i = 0; i < d; i++) {
        float val = 0.0f;
        for (int j = 0; j < n; j++) val += wf[i * n + j] * x[j];
        out[i] = val;
      }
      return;
    }
    // bf16, q8_0 and the block types: each row dequantized (exactly), then
    // the same f32 loop, so a block matrix gives what its f32 dequantization does.
    std::vector<float> row(static_cast<size_t>(n));
    for (int i = 0; i < d; i++) {
      DecodeRow(w, i, row.data());
      float val = 0.0f;
      for (int j = 0; j < n; j++) val += row[j] * x[j];
      out[i] = val;
    }
  }

  void MatmulBatch(float* out, const float* x, const Weights& w, int T) override {
    for (int t = 0; t < T; t++) Matmul(out + static_cast<size_t>(t) * w.rows, x + static_cast<size_t>(t) * w.cols, w);
  }

  bool batch_rows_independent() const override { return true; }   // MatmulBatch is Matmul per row
  bool runs_block_type(uint32_t) const override { return true; }  // through DecodeRow
  bool attends_windows() const override { return true; }          // Attention: Windowed()
  bool runs_gemma() const override { return true; }               // AttendOneHead; the host defaults

  void Attention(const AttentionArgs& args) override {
    const AttentionArgs a = Windowed(args);
    for (int h = 0; h < a.n_heads; h++) AttendOneHead(a, h);
  }

  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    RopeReference(vec, size, head_size, pos, inv_freq, interleaved);
  }

  void SwiGLU(float* hb, const float* hb2, int n) override { SwiGLUReference(hb, hb2, n); }
};

}  // namespace

void AttendOneHead(const AttentionArgs& a, int h) {
  const int kv_mul = a.n_heads / a.n_kv_heads;  // query heads sharing one kv head
  const float* q = a.q + h * a.head_size;
  float* att = a.scores + h * a.seq_len;
  const int kv_off = (h / kv_mul) * a.head_size;
  for (int t = 0; t <= a.pos; t++) {
    const float* k = a.key_cache + t * a.pos_stride + kv_off;
    float score = 0.0f;
    for (int i = 0; i < a.head_size; i++) score += q[i] * k[i];
    att[t] = score / a.score_divisor();
    if (a.softcap > 0.0f) att[t] = SoftCap(att[t], a.softcap);
  }
  Softmax(att, a.pos + 1);
  float* xb = a.out + h * a.head_size;
  for (int i = 0; i < a.head_size; i++) xb[i] = 0.0f;
  for (int t = 0; t <= a.pos; t++) {
    const float* v = a.value_cache + t * a.pos_stride + kv_off;
    for (int i = 0; i < a.head_size; i++) xb[i] += att[t] * v[i];
  }
}

std::unique_ptr<Backend> MakeReference() { return std::make_unique<Reference>(); }

}  // namespace verity::kernels
