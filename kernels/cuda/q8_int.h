// q8_0 decode products on int16 x (issue 42; VERITY_CUDA_Q8_INT16=1): the
// CPU fast kernel's arithmetic (kernels/cpu/simd_q8.cc) on the device, so a
// decode step's q8_0 product is bit for bit simd::MatVecQ8_0's.
//
// Why: on the H200 the f32-x q8_0 kernel was bound by the work a weight
// costs (a byte permute, an add, an FMA and 4 bytes of x a weight: 1.7-2.4
// TB/s of products where bf16 reached 3.0-3.7). Here x is quantized once a
// block to int16 per 32 columns (QuantizeX16Impl's rounding), and dp2a
// multiplies two int16 of x by two int8 quants into an exact int32: half an
// instruction a weight, 2 bytes of x from shared memory a weight.
//
// The order is the CPU's: block sums are exact integers (any order), then
// the CPU's 8 f32 lanes, lane l folding block l of every group of 8 in
// column order (fma(float(sum), ws * xs, lane)), then Lanes8Sum, then the
// blocks past the last whole group in column order. On the device a warp
// takes a row's 16-byte chunks c = 32 i + lane; lanes 2k and 2k+1 hold the
// halves of block 16 i + k, so after their exact add, lanes 0, 2, ... 14
// hold group 2i's blocks 0-7 and lanes 16, 18, ... 30 group 2i+1's: chain l
// lives in lane 2l and takes its second block from lane 2l + 16.
//
// Every function here is what the kernel (rows.cu) runs; tests/cuda_q8_int_test.cc
// runs them on the CPU, warp by warp, against simd::MatVecQ8_0.
// Plain C++17 without CUDA headers when compiled by the host compiler.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/elementwise.h"

namespace verity::kernels::cuda::q8i {

inline constexpr int kBlock = 32;            // columns a scale of x (and of the weights) covers
inline constexpr int kGroup = 8;             // blocks a CPU group: its 8 f32 lanes
inline constexpr int kChunk = 16;            // quants a lane loads at once (16 bytes)
inline constexpr int kBlocksAWarpStep = 16;  // blocks a warp's 32 chunks cover

// x's block of 32 as QuantizeX16Impl rounds it: scale = amax / 32767 and
// q = x * (32767 / amax) to nearest even (0 for an all-zero block). Where
// 32767 / amax overflows (0 < amax < ~9.6e-35) the CPU's NearestInt and
// DemoteTo saturate an infinite product to 32767 or -32768 and turn the NaN
// of 0 x inf into -32768 (x86's integer indefinite); so does XQuant.
VERITY_HD float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
VERITY_HD float XScale(float amax) { return Div(amax, 32767.0f); }
VERITY_HD float XInverse(float amax) { return amax == 0.0f ? 0.0f : Div(32767.0f, amax); }
VERITY_HD int16_t XQuant(float v, float inverse) {
#if defined(__CUDA_ARCH__)
  const float p = __fmul_rn(v, inverse);
  if (p != p) return -32768;
  return static_cast<int16_t>(max(-32768, min(32767, __float2int_rn(p))));  // int32 saturated, then int16
#else
  const float p = v * inverse;
  if (p != p) return -32768;
  if (p >= 32767.0f) return 32767;
  if (p <= -32768.0f) return -32768;
  return static_cast<int16_t>(std::nearbyint(p));  // the default rounding: to nearest even
#endif
}

// Where x's quant j lies among the int16 of shared memory: chunk c = j / 16's
// first 8 in the low half (cols / 2 of them), its last 8 in the high half,
// so the 8 lanes of a 16-byte shared load read 128 consecutive bytes.
VERITY_HD int XSlot(int j, int cols) { return ((j >> 3) & 1) * (cols >> 1) + (j >> 4) * 8 + (j & 7); }
// Chunk c's two halves as a lane loads them: the int16 offsets of its
// quants 0-7 and 8-15 (XSlot of 16c and 16c + 8).
VERITY_HD int ChunkLo(int c) { return 8 * c; }
VERITY_HD int ChunkHi(int c, int cols) { return (cols >> 1) + 8 * c; }
// Shared memory of a block: the int16 quants, then one f32 scale a block of 32.
VERITY_HD int XScalesOffset(int cols) { return cols * 2; }
VERITY_HD int SharedBytes(int cols) { return cols * 2 + cols / kBlock * 4; }
// Where they start in a normed launch's shared memory: after the normed row
// and the norm's warp sums (RowsKernel's NORM prologue), 16-byte aligned.
VERITY_HD int AfterNorm(int cols, int norm_threads) { return ((cols + norm_threads / 32) * 4 + 15) / 16 * 16; }

// Two int16 of x (a: low, high) times int8 quants 0-1 (Lo) or 2-3 (Hi) of
// b, added to c: PTX's dp2a, exact.
VERITY_HD int Dp2Lo(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp2a_lo(static_cast<int>(a), static_cast<int>(b), c);
#else
  return c + static_cast<int16_t>(a & 0xffffu) * static_cast<int8_t>(b & 0xffu) +
         static_cast<int16_t>(a >> 16) * static_cast<int8_t>((b >> 8) & 0xffu);
#endif
}
VERITY_HD int Dp2Hi(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp2a_hi(static_cast<int>(a), static_cast<int>(b), c);
#else
  return c + static_cast<int16_t>(a & 0xffffu) * static_cast<int8_t>((b >> 16) & 0xffu) +
         static_cast<int16_t>(a >> 16) * static_cast<int8_t>(b >> 24);
#endif
}

// The 16 products of a chunk: w's 4 words hold quants 4k..4k+3; lo's 4
// words x's quants 0-7 two a word, hi's 8-15. Exact (|sum| < 2^31).
VERITY_HD int ChunkDot(const uint32_t (&w)[4], const uint32_t (&lo)[4], const uint32_t (&hi)[4]) {
  int s = 0;
  s = Dp2Hi(lo[1], w[0], Dp2Lo(lo[0], w[0], s));
  s = Dp2Hi(lo[3], w[1], Dp2Lo(lo[2], w[1], s));
  s = Dp2Hi(hi[1], w[2], Dp2Lo(hi[0], w[2], s));
  s = Dp2Hi(hi[3], w[3], Dp2Lo(hi[2], w[3], s));
  return s;
}

// A block's sum into a lane of the row, as the CPU's
// _mm256_fmadd_ps(cvtepi32_ps(sum), ws * xs, lane).
VERITY_HD float IntToFloat(int v) {
#if defined(__CUDA_ARCH__)
  return __int2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}
VERITY_HD float BlockScale(float ws, float xs) { return ew::Mul(ws, xs); }
VERITY_HD float Fold(float acc, float sum, float scale) { return fmaf(sum, scale, acc); }

// The block lane `lane` holds half of in a warp's step i, and the lane that
// holds chain l (and, for a tail block b, its values after step b / 16).
VERITY_HD int LaneBlock(int step, int lane) { return kBlocksAWarpStep * step + (lane >> 1); }
VERITY_HD int ChainLane(int l) { return 2 * l; }
VERITY_HD int TailLane(int block) { return 2 * (block % kBlocksAWarpStep); }
inline constexpr int kSecondGroupLanes = 16;  // chain l's block of group 2i+1 sits 16 lanes up

// Chain l's step i: its block of group 2i (a0, s0: its own lane's) and of
// group 2i+1 (a1, s1: lane 2l + 16's), each only if it lies in a whole
// group (before block `grouped`, 8 x the row's whole groups), in order.
VERITY_HD float FoldStep(float chain, int step, int l, int grouped, float a0, float s0, float a1, float s1) {
  const int b0 = kBlocksAWarpStep * step + l;
  if (b0 < grouped) chain = Fold(chain, a0, s0);
  if (b0 + kGroup < grouped) chain = Fold(chain, a1, s1);
  return chain;
}

// The CPU's ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
VERITY_HD float Lanes8Sum(const float (&l)[kGroup]) {
  return ew::Add(ew::Add(ew::Add(l[0], l[4]), ew::Add(l[2], l[6])), ew::Add(ew::Add(l[1], l[5]), ew::Add(l[3], l[7])));
}

}  // namespace verity::kernels::cuda::q8i
