#include <cmath>

#include "kernels/kernels.h"

namespace verity::kernels {

// Same arithmetic as llama2.c's run.c, so greedy text matches it byte for byte.
void Rmsnorm(float* out, const float* x, const float* weight, int size, float eps) {
  float ss = 0.0f;
  for (int j = 0; j < size; j++) ss += x[j] * x[j];
  ss /= size;
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  for (int j = 0; j < size; j++) out[j] = weight[j] * (ss * x[j]);
}

void Softmax(float* x, int size) {
  float max_val = x[0];
  for (int i = 1; i < size; i++) max_val = x[i] > max_val ? x[i] : max_val;
  float sum = 0.0f;
  for (int i = 0; i < size; i++) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < size; i++) x[i] /= sum;
}

void RopeReference(float* vec, int size, int head_size, int pos, float theta, bool interleaved) {
  const int half = head_size / 2;
  for (int base = 0; base < size; base += head_size) {
    for (int i = 0; i < half; i++) {
      // As run.c: head_dim = 2i, freq = 1 / theta^(head_dim / head_size).
      float freq = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
      float val = static_cast<float>(pos) * freq;
      float fcr = cosf(val), fci = sinf(val);
      const int a = interleaved ? base + 2 * i : base + i;
      const int b = interleaved ? a + 1 : a + half;
      float v0 = vec[a], v1 = vec[b];
      vec[a] = v0 * fcr - v1 * fci;
      vec[b] = v0 * fci + v1 * fcr;
    }
  }
}

void SwiGLUReference(float* hb, const float* hb2, int n) {
  for (int i = 0; i < n; i++) {
    float val = hb[i];
    val *= (1.0f / (1.0f + expf(-val)));
    hb[i] = val * hb2[i];
  }
}

}  // namespace verity::kernels
