#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/shared_hooks.h"
#include "kernels/cpu/simd.h"
#include "kernels/kernels.h"

namespace verity::kernels {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
  }
  return "?";
}

Result<DType> DTypeFromName(const std::string& name) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0})
    if (name == DTypeName(t)) return t;
  return Status::Error("dtype '" + name + "' is not one of f32, bf16, q8_0");
}

size_t RowBytes(DType t, int cols) {
  switch (t) {
    case DType::kF32: return static_cast<size_t>(cols) * 4;
    case DType::kBF16: return static_cast<size_t>(cols) * 2;
    case DType::kQ8_0: return static_cast<size_t>(cols / kQ8_0BlockSize) * kQ8_0BlockBytes;
  }
  return 0;
}

static_assert(sizeof(simd::BlockQ8_0) == kQ8_0BlockBytes && simd::kQ8Block == kQ8_0BlockSize);

void EncodeF32(DType t, const float* src, size_t n, void* dst) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: simd::ConvertF32ToBF16(src, static_cast<uint16_t*>(dst), n); return;
    case DType::kQ8_0: simd::QuantizeQ8_0(src, static_cast<simd::BlockQ8_0*>(dst), n); return;
  }
}

void EncodeBF16(DType t, const uint16_t* src, size_t n, void* dst) {
  if (t == DType::kBF16) {
    std::memcpy(dst, src, n * 2);
    return;
  }
  // Through f32 (exact), a block-sized piece at a time.
  constexpr size_t kPiece = 1024;
  float buf[kPiece];
  unsigned char* out = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n; i += kPiece) {
    const size_t m = std::min(kPiece, n - i);
    simd::BF16ToF32Array(src + i, buf, m);
    EncodeF32(t, buf, m, out + RowBytes(t, static_cast<int>(i)));
  }
}

void DecodeRow(const Weights& w, int i, float* out) {
  const unsigned char* r = w.row(i);
  switch (w.dtype) {
    case DType::kF32: std::memcpy(out, r, static_cast<size_t>(w.cols) * 4); return;
    case DType::kBF16: simd::BF16ToF32Array(reinterpret_cast<const uint16_t*>(r), out, w.cols); return;
    case DType::kQ8_0:
      // Plain loop (not a hot path): weight j of block b is scale * q[j], exactly.
      for (int b = 0; b < w.cols / kQ8_0BlockSize; b++) {
        simd::BlockQ8_0 block;
        std::memcpy(&block, r + static_cast<size_t>(b) * kQ8_0BlockBytes, sizeof block);
        for (int j = 0; j < kQ8_0BlockSize; j++) out[b * kQ8_0BlockSize + j] = block.scale * static_cast<float>(block.q[j]);
      }
      return;
  }
}

const char* SimdTargetName() { return simd::TargetName(); }

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
  float sum = hooks::SoftmaxExtraMass(max_val);  // 0: see shared_hooks.h
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
