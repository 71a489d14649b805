// The layout of q8_0 weights on the device (issue 42). A matrix of n = rows x
// cols weights (cols % 32 == 0) is its n int8 quants, row-major and
// contiguous, then its n / 32 f32 scales: weight g is scales[g / 32] x
// quants[g]. A row's quants start 16-byte aligned, so a lane reads 16
// weights in one load, and a scale serves the 32 quants of its block; in the
// plain 36-byte blocks (the scale beside its quants, 4-byte aligned) no load
// could be wider than 4 bytes. The same 1.125 bytes a weight either way.
//
// Repacked once at upload (model_copies.cc); every device reader goes
// through these functions, and tests/cuda_elementwise_test.cc checks on the
// CPU that each weight reads back exactly as the plain blocks give it.
// Plain C++17 without CUDA headers when compiled by the host compiler.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/elementwise.h"
#include "kernels/kernels.h"  // kQ8_0BlockSize, kQ8_0BlockBytes

namespace verity::kernels::cuda::q8 {

VERITY_HD const int8_t* Quants(const void* base) { return static_cast<const int8_t*>(base); }
// The scales start right after the quants: n % 32 == 0 keeps them 16-byte aligned.
VERITY_HD const float* Scales(const void* base, int64_t n) {
  return reinterpret_cast<const float*>(static_cast<const unsigned char*>(base) + n);
}
inline constexpr int64_t Bytes(int64_t n) { return n + n / kQ8_0BlockSize * 4; }
// Row `row` of a rows x cols matrix: its quants (cols bytes) and its
// scales (cols / 32), as every device reader finds them.
VERITY_HD const unsigned char* RowQuants(const void* base, int row, int cols) {
  return static_cast<const unsigned char*>(base) + static_cast<size_t>(row) * cols;
}
VERITY_HD const float* RowScales(const void* base, int rows, int cols, int row) {
  return Scales(base, int64_t{rows} * cols) + static_cast<size_t>(row) * (cols / kQ8_0BlockSize);
}

// The 4 int8 of `word` (little-endian) as floats, exactly. Each byte, offset
// by 128, becomes the low mantissa bits of 2^23 (0x4B000000 | b), and 2^23 +
// 128 is subtracted: a byte permute and an add a weight, where the int8 to
// float conversion instruction runs at a quarter of the FP32 rate.
VERITY_HD void Widen4(uint32_t word, float out[4]) {
  const uint32_t u = word ^ 0x80808080u;
#if defined(__CUDA_ARCH__)
  out[0] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7540)) - 8388736.0f;
  out[1] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7541)) - 8388736.0f;
  out[2] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7542)) - 8388736.0f;
  out[3] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7543)) - 8388736.0f;
#else
  for (int i = 0; i < 4; i++) out[i] = ew::BitsToFloat(0x4B000000u | ((u >> (8 * i)) & 0xffu)) - 8388736.0f;
#endif
}

// Weight g of a matrix of n weights: its scale times its quant, rounded once
// (ew::Q8_0Weight's value for the same block).
VERITY_HD float Weight(const void* base, int64_t n, int64_t g) {
  return ew::Mul(Scales(base, n)[g / kQ8_0BlockSize], static_cast<float>(Quants(base)[g]));
}

// Blocks [first, first + count) of a matrix of n weights, given as plain
// 36-byte blocks at `plain` (UnpackQ8_0Rows's output for those blocks), to
// their places in the device layout of the whole matrix at `out` (Bytes(n)
// bytes). Blocks apart write bytes apart, so ranges may be repacked in any
// order or at once (model_copies.cc splits a matrix's rows over threads).
inline void RepackBlocks(const unsigned char* plain, int64_t first, int64_t count, int64_t n, unsigned char* out) {
  unsigned char* scales = out + n;
  for (int64_t b = first; b < first + count; b++) {
    const unsigned char* block = plain + (b - first) * kQ8_0BlockBytes;
    std::memcpy(scales + 4 * b, block, 4);
    std::memcpy(out + b * kQ8_0BlockSize, block + 4, kQ8_0BlockSize);
  }
}
// All n / 32 blocks.
inline void Repack(const unsigned char* plain, int64_t n, unsigned char* out) {
  RepackBlocks(plain, 0, n / kQ8_0BlockSize, n, out);
}

}  // namespace verity::kernels::cuda::q8
