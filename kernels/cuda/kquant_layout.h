// llama.cpp's Q4_K and Q6_K blocks (the Q4_K_M pair) as the CUDA kernels
// read them (issue 43): on the device in the file's own 256-weight blocks,
// uploaded as they lie (model_copies.cc), each lane reading 8 consecutive
// weights of a block. Every weight is computed in formats/quants.cc's order
// of operations (products exact in f32, one rounding at a min's subtraction),
// so it has the bits of the CPU's dequantization; tests/cuda_elementwise_test.cc
// checks that on the CPU for every weight of random and quantized blocks.
// Plain C++17 without CUDA headers when compiled by the host compiler.
#pragma once

#include <cstdint>

#include "kernels/cuda/elementwise.h"

namespace verity::kernels::cuda::kq {

inline constexpr uint32_t kQ4_K = 12;  // ggml type ids (formats/quants.h)
inline constexpr uint32_t kQ6_K = 14;
inline constexpr int kBlockWeights = 256;  // QK_K
inline constexpr int kQ4_KBytes = 144;
inline constexpr int kQ6_KBytes = 210;
inline constexpr int kLaneWeights = 8;  // weights a lane computes at once (Weights8)

// Whether the CUDA kernels read blocks of ggml type `type`.
VERITY_HD bool Supported(uint32_t type) { return type == kQ4_K || type == kQ6_K; }
VERITY_HD int BlockBytes(uint32_t type) { return type == kQ4_K ? kQ4_KBytes : kQ6_KBytes; }

// An IEEE half to f32, exactly (subnormals as mant x 2^-24, a power-of-two product).
VERITY_HD float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return ew::BitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float m = ew::Mul(static_cast<float>(mant), 5.9604644775390625e-8f);
    return sign ? -m : m;
  }
  return ew::BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}
VERITY_HD uint16_t U16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Sub-block j's (0..7) 6-bit scale and min of a Q4_K block's 12 packed bytes
// (get_scale_min_k4's packing; formats/quants.cc KScaleMin).
VERITY_HD void Q4KScaleMin(const unsigned char* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Weights j0 .. j0+7 (j0 % 8 == 0) of a 144-byte Q4_K block: f16 d, f16 dmin,
// 12 scale bytes, 128 bytes of nibbles. The 8 share one 32-weight sub-block,
// and their nibbles lie in 8 consecutive bytes (low or high halves).
VERITY_HD void Q4KWeights8(const unsigned char* b, int j0, float out[8]) {
  const float d = HalfToFloat(U16(b)), dmin = HalfToFloat(U16(b + 2));
  int scale = 0, min = 0;
  Q4KScaleMin(b + 4, j0 / 32, &scale, &min);
  const float dl = ew::Mul(d, static_cast<float>(scale)), ml = ew::Mul(dmin, static_cast<float>(min));
  const unsigned char* qs = b + 16 + 32 * (j0 / 64) + j0 % 32;
  const int shift = (j0 % 64) < 32 ? 0 : 4;
  for (int i = 0; i < 8; i++) out[i] = ew::Sub(ew::Mul(dl, static_cast<float>((qs[i] >> shift) & 0xF)), ml);
}

// Weights j0 .. j0+7 (j0 % 8 == 0) of a 210-byte Q6_K block: ql[128] (low 4
// bits), qh[64] (high 2 bits), int8 scales[16] of 16-weight sub-blocks, f16
// d; weight (d * scale) * (q - 32). The 8 share one scale.
VERITY_HD void Q6KWeights8(const unsigned char* b, int j0, float out[8]) {
  const float d = HalfToFloat(U16(b + 208));
  const float dl = ew::Mul(d, static_cast<float>(static_cast<int8_t>(b[192 + j0 / 16])));
  const int h = j0 / 128, r = j0 % 128;
  const unsigned char* ql = b + 64 * h + r % 64;
  const unsigned char* qh = b + 128 + 32 * h + r % 32;
  const int lshift = r < 64 ? 0 : 4, hshift = 2 * (r / 32);
  for (int i = 0; i < 8; i++) {
    const int q = ((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4);
    out[i] = ew::Mul(dl, static_cast<float>(q - 32));
  }
}

// Weights j0 .. j0+7 of a block of `type` (Supported).
VERITY_HD void Weights8(uint32_t type, const unsigned char* block, int j0, float out[8]) {
  if (type == kQ4_K) {
    Q4KWeights8(block, j0, out);
  } else {
    Q6KWeights8(block, j0, out);
  }
}

}  // namespace verity::kernels::cuda::kq
