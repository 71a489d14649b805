// The reference backend: plain loops, one thread, the order of operations of
// llama2.c's run.c. Every faster path is judged against this one.
#include <cmath>

#include "kernels/cpu/backends.h"

namespace verity::kernels {
namespace {

class Reference final : public Backend {
 public:
  const char* name() const override { return "reference"; }

  void Matmul(float* out, const float* x, const float* w, int n, int d) override {
    for (int i = 0; i < d; i++) {
      float val = 0.0f;
      for (int j = 0; j < n; j++) val += w[i * n + j] * x[j];
      out[i] = val;
    }
  }

  void Attention(const AttentionArgs& a) override {
    for (int h = 0; h < a.n_heads; h++) AttendOneHead(a, h);
  }

  void Rope(float* vec, int size, int head_size, int pos, float theta, bool interleaved) override {
    RopeReference(vec, size, head_size, pos, theta, interleaved);
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
    att[t] = score / sqrtf(static_cast<float>(a.head_size));
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
