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

}  // namespace verity::kernels
