// Where the tensor-core rows kernel (mma_rows.cu) puts each weight and each
// vector value in the registers of `mma.sync.m16n8k16` (bf16 in, f32
// accumulate; q8_0 quants enter as bf16, exactly), written once as __host__ __device__ functions: the kernel
// loads through them, and tests/cuda_elementwise_test.cc walks every lane on
// the CPU against the PTX ISA's fragment layout (Ptx* below) and multiplies
// the fragments as the instruction is specified to. Plain C++17 without CUDA
// headers when compiled by the host compiler.
//
// A warp's step covers 32 consecutive columns: lane (g, t) = (lane / 4,
// lane % 4) loads the 8 weights of columns 8t .. 8t+7 from one 16-byte chunk
// of each of its rows (g and g + 8 of a 16-row tile; q8_0: their 8 quants,
// 8 bytes, made the same 4 words by QuantChunkWords), and the same 8
// columns of vector g. Words 0 and 1 of the chunk (4 columns) go to the
// step's first mma, words 2 and 3 to its second. The instruction's k index
// is a lane's t and register half, never its g, so giving lane t the
// columns 8t .. in both A and B pairs each weight with its own column of x:
// the step's two products cover its 32 columns once (the test checks it).
#pragma once

#include <cstdint>

#include "kernels/cuda/elementwise.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

namespace verity::kernels::cuda::mma {

inline constexpr int kTileRows = 16;      // rows of an m16n8k16 tile
inline constexpr int kTileCols = 8;       // vectors of its n8
inline constexpr int kStepCols = 32;      // columns a warp's step covers: two k16 products
inline constexpr int kGroupVectors = 32;  // vectors a launch's block carries (4 n8 tiles)
inline constexpr int kVectorTiles = kGroupVectors / kTileCols;

VERITY_HD int LaneGroup(int lane) { return lane >> 2; }
VERITY_HD int LaneThread(int lane) { return lane & 3; }

// The first of the 8 columns lane `lane` loads in step `step`.
VERITY_HD int64_t StepColumn(int64_t step, int lane) { return step * kStepCols + 8 * LaneThread(lane); }

// Register r (0..3) of A in product q (0, 1) of a step: the row (0..15 of
// the tile) and the word (0..3, two columns each) of that row's chunk.
VERITY_HD int ARow(int lane, int r) { return LaneGroup(lane) + 8 * (r & 1); }
VERITY_HD int AWord(int q, int r) { return 2 * q + (r >> 1); }
// Register r (0, 1) of B in product q: the word of the vector's 8 columns.
VERITY_HD int BWord(int q, int r) { return 2 * q + r; }
// B's vector (0..7 of the n8 tile) is the lane's group.
VERITY_HD int BVector(int lane) { return LaneGroup(lane); }
// Accumulator i (0..3): its row of the tile and its vector of the n8 tile.
// CHalf: which of the lane's two rows (ARow's r & 1) it sums, g or g + 8.
VERITY_HD int CHalf(int i) { return i >> 1; }
VERITY_HD int CRow(int lane, int i) { return LaneGroup(lane) + 8 * CHalf(i); }
VERITY_HD int CVector(int lane, int i) { return 2 * LaneThread(lane) + (i & 1); }

// x as two bf16 values, hi + lo: hi = x rounded to bf16, lo the rest rounded
// to bf16 (x - hi is exact in f32). |x - (hi + lo)| <= 2^-17 |x| for normal
// x: the products W hi and W lo are exact in f32 (8-bit by 8-bit
// significands), so the tensor core sees x to 16 significant bits. Where hi
// is not finite (x infinite, NaN, or rounding past the largest bf16), lo is
// 0: hi alone carries it, as the CUDA-core kernel's product would.
VERITY_HD void SplitBF16(float x, uint16_t* hi, uint16_t* lo) {
  *hi = ew::F32ToBF16(x);
  *lo = (*hi & 0x7f80u) == 0x7f80u ? uint16_t{0} : ew::F32ToBF16(ew::Sub(x, ew::BF16ToF32(*hi)));
}
// Two bf16 values as the 32-bit word a register holds: `low` is the lower
// k index of the pair.
VERITY_HD uint32_t PackBF16(uint16_t low, uint16_t high) {
  return static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
}
// Two values as a bf16 pair word (a at the lower k), each rounded to
// nearest even: the hardware's pair conversion on the device.
VERITY_HD uint32_t PairWord(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
#else
  return PackBF16(ew::F32ToBF16(a), ew::F32ToBF16(b));
#endif
}
// The hi and lo words of two consecutive values (a at the lower k). On the
// device the roundings are the hardware's round-to-nearest-even pair
// conversion, the same bits as SplitBF16 for every value but a NaN's
// payload, in a fraction of the instructions (x is split by every block
// that reads it).
VERITY_HD void SplitPair(float a, float b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t hw = PairWord(a, b);
  const float ra = ew::Sub(a, __uint_as_float(hw << 16)), rb = ew::Sub(b, __uint_as_float(hw & 0xffff0000u));
  uint32_t lw = PairWord(ra, rb);
  if ((hw & 0x7f80u) == 0x7f80u) lw &= 0xffff0000u;  // hi not finite: lo 0 (SplitBF16)
  if ((hw & 0x7f800000u) == 0x7f800000u) lw &= 0x0000ffffu;
  *hi = hw, *lo = lw;
#else
  uint16_t ha, la, hb, lb;
  SplitBF16(a, &ha, &la);
  SplitBF16(b, &hb, &lb);
  *hi = PackBF16(ha, hb), *lo = PackBF16(la, lb);
#endif
}
// The 8 values of x a lane multiplies in a step (v[0] at its first column)
// as the hi and lo words of BWord's numbering: word w holds v[2w], v[2w+1].
VERITY_HD void VectorWords(const float (&v)[8], uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  for (int w = 0; w < 4; w++) SplitPair(v[2 * w], v[2 * w + 1], &hi[w], &lo[w]);
}
// q8_0: quants 2p and 2p+1 (p = 0, 1) of the 4 int8 quants a word holds
// (the lowest byte first), as the pair word of their values: exact, an int8
// has at most 8 significant bits.
VERITY_HD uint32_t QuantPairWord(uint32_t quants, int p) {
  return PairWord(static_cast<float>(static_cast<int8_t>(quants >> (16 * p))),
                  static_cast<float>(static_cast<int8_t>(quants >> (16 * p + 8))));
}
// A lane's 8 quants of a row in a step (one q8_0 block's columns 8t..8t+7,
// two words, the lower columns first) as the 4 words of a bf16 chunk.
VERITY_HD void QuantChunkWords(uint32_t lo_quants, uint32_t hi_quants, uint32_t (&w)[4]) {
  w[0] = QuantPairWord(lo_quants, 0), w[1] = QuantPairWord(lo_quants, 1);
  w[2] = QuantPairWord(hi_quants, 0), w[3] = QuantPairWord(hi_quants, 1);
}
// Word w (0..3) of a 16-byte chunk of weights held as 4 words, w the lower
// columns first; by constant index on the device.
VERITY_HD uint32_t ChunkWord(uint32_t x, uint32_t y, uint32_t z, uint32_t w_, int w) {
  return w == 0 ? x : w == 1 ? y : w == 2 ? z : w_;
}

// ---- The PTX ISA's fragment layout of mma.m16n8k16 with .bf16 inputs
// ("Matrix Fragments for mma.m16n8k16 with floating point type"), as the
// test's reference: element e (0..7) of A, (0..3) of B, (0..3) of C/D held
// by `lane`, with groupID = lane / 4 and threadID_in_group = lane % 4.
VERITY_HD int PtxARow(int lane, int e) { return LaneGroup(lane) + ((e >= 2 && e < 4) || e >= 6 ? 8 : 0); }
VERITY_HD int PtxACol(int lane, int e) { return 2 * LaneThread(lane) + (e & 1) + (e >= 4 ? 8 : 0); }
VERITY_HD int PtxBRow(int lane, int e) { return 2 * LaneThread(lane) + (e & 1) + (e >= 2 ? 8 : 0); }
VERITY_HD int PtxBCol(int lane) { return LaneGroup(lane); }
VERITY_HD int PtxCRow(int lane, int e) { return LaneGroup(lane) + (e >= 2 ? 8 : 0); }
VERITY_HD int PtxCCol(int lane, int e) { return 2 * LaneThread(lane) + (e & 1); }

// ---- The block's combine (mma_rows.cu): warp w's partial sums of the
// block's rows lie at Partial(w, row, vector) in shared memory; output o of
// the block (o < rows * kGroupVectors) is (o / kGroupVectors,
// o % kGroupVectors), the sum of the warps' partials in warp order.
VERITY_HD int Partial(int warp, int tile_rows, int row, int vector) {
  return (warp * tile_rows + row) * kGroupVectors + vector;
}

}  // namespace verity::kernels::cuda::mma
