#include "kernels/cpu/scalar_fallback.h"

#include <cmath>
#include <cstring>

namespace verity::kernels::fallback {
namespace {

// Eight independent lanes, so the compiler can vectorize the sum.
template <class Load>
float Dot(Load w, const float* x, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) acc[l] += w(j + l) * x[j + l];
  float tail = 0.0f;
  for (; j < n; j++) tail += w(j) * x[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

float DotQ8(const BlockQ8_0* row, const float* x, int cols) {
  float sum = 0.0f;
  for (int b = 0; b < cols / kQ8Block; b++) {
    float s = 0.0f;
    for (int j = 0; j < kQ8Block; j++) s += static_cast<float>(row[b].q[j]) * x[b * kQ8Block + j];
    sum += row[b].scale * s;
  }
  return sum;
}

}  // namespace

uint16_t F32ToBF16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float BF16ToF32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  for (int i = row_begin; i < row_end; i++) {
    const float* r = w + static_cast<size_t>(i) * cols;
    out[i] = Dot([r](int j) { return r[j]; }, x, cols);
  }
}

void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  for (int i = row_begin; i < row_end; i++) {
    const uint16_t* r = w + static_cast<size_t>(i) * cols;
    out[i] = Dot([r](int j) { return BF16ToF32(r[j]); }, x, cols);
  }
}

void MatVecQ8_0(const BlockQ8_0* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  for (int i = row_begin; i < row_end; i++) out[i] = DotQ8(w + static_cast<size_t>(i) * (cols / kQ8Block), x, cols);
}

void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
               int row_end) {
  for (int t = 0; t < T; t++) MatVecF32(w, x + static_cast<size_t>(t) * cols, out + static_cast<size_t>(t) * ld_out, cols, row_begin, row_end);
}

void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  for (int t = 0; t < T; t++) MatVecBF16(w, x + static_cast<size_t>(t) * cols, out + static_cast<size_t>(t) * ld_out, cols, row_begin, row_end);
}

void MatMulQ8_0(const BlockQ8_0* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  for (int t = 0; t < T; t++) MatVecQ8_0(w, x + static_cast<size_t>(t) * cols, out + static_cast<size_t>(t) * ld_out, cols, row_begin, row_end);
}

void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = F32ToBF16(src[i]);
}

void BF16ToF32Array(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = BF16ToF32(src[i]);
}

void QuantizeQ8_0(const float* src, BlockQ8_0* dst, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const float* v = src + b * kQ8Block;
    float amax = 0.0f;
    for (int j = 0; j < kQ8Block; j++) amax = std::fmax(amax, std::fabs(v[j]));
    const float scale = amax / 127.0f;
    dst[b].scale = scale;
    for (int j = 0; j < kQ8Block; j++)
      dst[b].q[j] = static_cast<int8_t>(scale == 0.0f ? 0 : std::nearbyint(v[j] / scale));
  }
}

void DequantizeQ8_0(const BlockQ8_0* src, float* dst, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; b++)
    for (int j = 0; j < kQ8Block; j++) dst[b * kQ8Block + j] = src[b].scale * static_cast<float>(src[b].q[j]);
}

const char* TargetName() { return "scalar-fallback"; }

}  // namespace verity::kernels::fallback
