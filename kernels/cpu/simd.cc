// The SIMD kernels of kernels/cpu/simd.h, written once against Google Highway
// and compiled by foreach_target.h for every instruction set (this file is
// re-included once per target); HWY_DYNAMIC_DISPATCH picks the best one the CPU
// runs at the first call.
//
// Decode (MatVec*) is memory-bound: each kernel walks its rows one at a time,
// so a thread's range of rows is one contiguous stream for the hardware
// prefetchers, with 4 (f32, bf16) independent accumulators per row reduced
// once per row; x stays in L1. bf16 is widened to f32 in registers
// (zero-extend and shift), reading 2 bytes per weight. q8_0 multiplies int8 by
// int8 (x quantized once per product, QuantizedX) with one lane per block of
// 32, so a block costs a fraction of an instruction instead of ~12.
//
// Prefill (MatMul*) is compute-bound: a tile of 4 weight rows (converted to f32
// into a per-thread scratch once for bf16) is multiplied against tiles of
// up to 4 input vectors with 16 accumulators (3 on targets with 16 vector
// registers), so each weight row is read from memory once per 64 vectors and
// every vector load feeds 3-4 FMAs. q8_0 runs its decode dot per row and
// vector, the row held in L1 across a block of 64 vectors.
//
// Vectors live in arrays of fixed size, which the scalable targets (SVE, RVV)
// cannot hold; they are disabled, NEON covers Arm.

#ifndef VERITY_KERNELS_CPU_SIMD_SHARED_
#define VERITY_KERNELS_CPU_SIMD_SHARED_

#include "base/simd_targets.h"  // before any Highway header

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "base/env.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/simd.h"

namespace verity::kernels::simd::detail {
// Per-thread scratch that only grows (MatMul's f32 weight tile), 64-byte aligned.
inline float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n + 16) buf.resize(n + 16);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~static_cast<uintptr_t>(63));
}
}  // namespace verity::kernels::simd::detail

#endif  // VERITY_KERNELS_CPU_SIMD_SHARED_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The MatMul register tile: kRows weight rows x kTileT input vectors.
constexpr int kRows = 4;
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
constexpr int kTileT = 4;  // 32 vector registers: 16 accumulators + 4 rows + x
#else
constexpr int kTileT = 3;  // 16 registers: 12 accumulators + 4 rows
#endif
constexpr int kTokenBlock = 64;             // input vectors per pass over a weight tile
using DQ = hn::CappedTag<float, kQ8Block>;  // at most 32 lanes per block chunk

inline float Sum(DF d, VF v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

// ---------------------------------------------------------------- MatVec
// One row at a time, so each thread reads one contiguous stream (rows
// [row_begin, row_end) are adjacent in memory), which the hardware prefetchers
// follow best: on the Zen 5 box, 4 rows interleaved were as fast for f32 but
// 2x slower for q8_0 (36-byte blocks, 864-byte rows) and 1.4x slower for bf16.
// x is re-read per row from L1. kUnroll independent accumulators per row hide
// the FMA latency; they are summed once per row.
constexpr int kUnroll = 4;

// bf16 and q8_0 decode prefetch their weight stream ahead of their loads
// (kernels/cpu/prefetch.h says with which hint and distance, and why).

// s + w * x for the scalar tails of the dots, rounded as the target's vector
// MulAdd rounds (fused where the target has FMA): written out, `s += w * x`
// is fused or not as the compiler pleases, differently where it vectorizes
// one copy of a tail and not another, and a MatRows tail then differed from
// the MatVec one by an ulp.
HWY_INLINE float TailMulAdd(float w, float x, float s) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(hn::MulAdd(hn::Set(d1, w), hn::Set(d1, x), hn::Set(d1, s)));
}

// w . x with vectors of D's width (the full width for MatVec; attention's
// narrow heads use 8 or 4 lanes): kUnroll accumulators, then single vectors,
// then scalars.
template <class D = DF>
HWY_INLINE float DotF32(const float* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t cols, D d = D()) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N) {
    a0 = hn::MulAdd(hn::LoadU(d, w + j), hn::LoadU(d, x + j), a0);
    a1 = hn::MulAdd(hn::LoadU(d, w + j + N), hn::LoadU(d, x + j + N), a1);
    a2 = hn::MulAdd(hn::LoadU(d, w + j + 2 * N), hn::LoadU(d, x + j + 2 * N), a2);
    a3 = hn::MulAdd(hn::LoadU(d, w + j + 3 * N), hn::LoadU(d, x + j + 3 * N), a3);
  }
  for (; j + N <= cols; j += N) a0 = hn::MulAdd(hn::LoadU(d, w + j), hn::LoadU(d, x + j), a0);
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; j < cols; j++) s = TailMulAdd(w[j], x[j], s);
  return s;
}

void MatVecF32Impl(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  const size_t n = static_cast<size_t>(cols);
  for (int i = row_begin; i < row_end; i++) out[i] = DotF32(w + i * n, x, n);
}

// bf16 -> f32 is exact: the 16 bits become the high half of the f32. Widening
// N bf16 (a half-width load, zero-extended) then shifting measured faster than
// masking/shifting the raw 32-bit lanes against an even/odd-reordered x
// (35 vs 22 GB/s on one core, cold), though both are far from compute-bound.
HWY_INLINE VF LoadBF16(const hn::Rebind<uint16_t, DF> d16, const uint16_t* HWY_RESTRICT p) {
  const DF d;
  const hn::Rebind<uint32_t, DF> d32;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, p))));
}

template <StreamPrefetchHint kHint>
HWY_INLINE float DotBF16(const uint16_t* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t cols) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N) {
    if constexpr (kHint != StreamPrefetchHint::kOff)
      for (size_t k = 0; k < kUnroll * N; k += 32) PrefetchAhead<kHint>(w + j + k);  // a line: 32 bf16
    a0 = hn::MulAdd(LoadBF16(d16, w + j), hn::LoadU(d, x + j), a0);
    a1 = hn::MulAdd(LoadBF16(d16, w + j + N), hn::LoadU(d, x + j + N), a1);
    a2 = hn::MulAdd(LoadBF16(d16, w + j + 2 * N), hn::LoadU(d, x + j + 2 * N), a2);
    a3 = hn::MulAdd(LoadBF16(d16, w + j + 3 * N), hn::LoadU(d, x + j + 3 * N), a3);
  }
  for (; j + N <= cols; j += N) a0 = hn::MulAdd(LoadBF16(d16, w + j), hn::LoadU(d, x + j), a0);
  float s = Sum(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)));
  for (; j < cols; j++) s = TailMulAdd(BF16ToF32(w[j]), x[j], s);
  return s;
}

void MatVecBF16Impl(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  const size_t n = static_cast<size_t>(cols);
  switch (StreamPrefetch()) {
    case StreamPrefetchHint::kNonTemporal:
      for (int i = row_begin; i < row_end; i++) out[i] = DotBF16<StreamPrefetchHint::kNonTemporal>(w + i * n, x, n);
      return;
    case StreamPrefetchHint::kT0:
      for (int i = row_begin; i < row_end; i++) out[i] = DotBF16<StreamPrefetchHint::kT0>(w + i * n, x, n);
      return;
    case StreamPrefetchHint::kOff:
      for (int i = row_begin; i < row_end; i++) out[i] = DotBF16<StreamPrefetchHint::kOff>(w + i * n, x, n);
      return;
  }
}

// ---------------------------------------------------------------- MatRows
// Several independent vectors (a continuous-batching step: one position of
// each of several sequences) against each weight row while it is in L1, so a
// step reads the weights from memory once for all its vectors. Per (row,
// vector) the arithmetic is DotF32's / DotBF16's exactly: the same 4
// accumulators fed in the same order, the same reduction, the same scalar
// tail; only the loads of the row are shared. So every output is bit for bit
// the MatVec one (the tiled MatMul, which sums in one accumulator per vector,
// is not). Below kRowsTiledFrom vectors, one row against kRowsVectors vectors
// at a time (DotsRow); from it on, a tile of kRowsTile rows against one vector
// at a time (DotsRows): 4 accumulators per (row, vector) either way, plus the
// shared loads, in the registers (16 on AVX2/SSE4, 32 on AVX-512/NEON).
// Tiles, measured on the Zen 3 box (kernels_bench BM_MatRows, cold f32
// weights, 3 interleaved runs): 16 vectors 1.4-1.6x the row-at-a-time
// products/s on 768- and 2048-wide matrices, 8 vectors 1.1-1.5x; 4 vectors
// even for f32 and slower for bf16, hence the threshold. On the Zen 5
// (AVX3_DL) 8 vectors as 6 + 2 row-at-a-time reads 2 x-loads per FMA from L1
// and ran the ~110M synth's 8-stream decode steps at 250 rows/s; tiled from 8
// vectors, 433 (serve-targets.sh, 3 rounds each; 1 stream ~100).
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
constexpr int kRowsVectors = 6, kRowsTile = 6, kRowsTiledFrom = 8;  // NEON unmeasured
#else
constexpr int kRowsVectors = 3, kRowsTile = 3, kRowsTiledFrom = 8;
#endif

// f32 weights as they are; bf16 widened exactly (LoadBF16), as the MatVec kernels read them.
struct LoadF32 {
  HWY_INLINE VF operator()(const float* HWY_RESTRICT p) const { return hn::LoadU(DF(), p); }
  HWY_INLINE float Scalar(const float* p) const { return *p; }
};
struct LoadBF16Row {
  HWY_INLINE VF operator()(const uint16_t* HWY_RESTRICT p) const { return LoadBF16(hn::Rebind<uint16_t, DF>(), p); }
  HWY_INLINE float Scalar(const uint16_t* p) const { return BF16ToF32(*p); }
};

// out[t * ld] = w . xs[t] for t < TT, each as DotF32 (DotBF16) computes it.
template <int TT, class W, class Load>
HWY_INLINE void DotsRow(const W* HWY_RESTRICT w, const float* const* xs, size_t cols, float* out, size_t ld,
                        Load load) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF a[TT][kUnroll];
  for (int t = 0; t < TT; t++)
    for (int u = 0; u < kUnroll; u++) a[t][u] = hn::Zero(d);
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N)
    for (int u = 0; u < kUnroll; u++) {
      const VF wv = load(w + j + u * N);
      for (int t = 0; t < TT; t++) a[t][u] = hn::MulAdd(wv, hn::LoadU(d, xs[t] + j + u * N), a[t][u]);
    }
  for (; j + N <= cols; j += N) {
    const VF wv = load(w + j);
    for (int t = 0; t < TT; t++) a[t][0] = hn::MulAdd(wv, hn::LoadU(d, xs[t] + j), a[t][0]);
  }
  for (int t = 0; t < TT; t++) {
    float s = Sum(d, hn::Add(hn::Add(a[t][0], a[t][1]), hn::Add(a[t][2], a[t][3])));
    for (size_t k = j; k < cols; k++) s = TailMulAdd(load.Scalar(w + k), xs[t][k], s);
    out[t * ld] = s;
  }
}

// out[r] = rows[r] . x for r < R, each as DotF32 (DotBF16) computes it: the
// transpose of DotsRow, one x chunk loaded for R rows.
template <int R, class W, class Load>
HWY_INLINE void DotsRows(const W* const* rows, const float* HWY_RESTRICT x, size_t cols, float* out, Load load,
                         const char* pf = nullptr, size_t pf_lines = 0) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF a[R][kUnroll];
  for (int r = 0; r < R; r++)
    for (int u = 0; u < kUnroll; u++) a[r][u] = hn::Zero(d);
  // pf_lines lines at pf, spread over the main loop's iterations, into L2
  // (prefetcht1): a burst of them before the loop, into L1, stalled the
  // FMAs behind it (kernels_bench BM_MatRows, 16 vectors, cold f32 and bf16,
  // Intel Xeon, interleaved: 768 x 2048 15.4 -> 20.2k products/s, 768 x 768
  // 51 -> 58k, 2048 x 768 19.4 -> 23.5k; spread into L1 gained about half).
  const size_t iters = cols / (kUnroll * N), per = iters ? (pf_lines + iters - 1) / iters : 0;
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N) {
    for (size_t l = 0; l < per && pf_lines > 0; l++, pf_lines--, pf += 64) __builtin_prefetch(pf, 0, 2);
    for (int u = 0; u < kUnroll; u++) {
      const VF xv = hn::LoadU(d, x + j + u * N);
      for (int r = 0; r < R; r++) a[r][u] = hn::MulAdd(load(rows[r] + j + u * N), xv, a[r][u]);
    }
  }
  for (; pf_lines > 0; pf_lines--, pf += 64) __builtin_prefetch(pf, 0, 2);
  for (; j + N <= cols; j += N) {
    const VF xv = hn::LoadU(d, x + j);
    for (int r = 0; r < R; r++) a[r][0] = hn::MulAdd(load(rows[r] + j), xv, a[r][0]);
  }
  for (int r = 0; r < R; r++) {
    float s = Sum(d, hn::Add(hn::Add(a[r][0], a[r][1]), hn::Add(a[r][2], a[r][3])));
    for (size_t k = j; k < cols; k++) s = TailMulAdd(load.Scalar(rows[r] + k), x[k], s);
    out[r] = s;
  }
}

// A row as f32: f32 rows as they are, bf16 widened into dst.
HWY_INLINE const float* WidenedRow(const float* row, size_t, float*) { return row; }
HWY_INLINE const float* WidenedRow(const uint16_t* row, size_t cols, float* dst) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= cols; j += N) hn::StoreU(LoadBF16(d16, row + j), d, dst + j);
  for (; j < cols; j++) dst[j] = BF16ToF32(row[j]);
  return dst;
}

// DotsRow for the run-time vector count t <= TT.
template <int TT, class W, class Load>
HWY_INLINE void DotsRowOf(int t, const W* HWY_RESTRICT w, const float* const* xs, size_t cols, float* out, size_t ld,
                          Load load) {
  if constexpr (TT > 1) {
    if (t < TT) return DotsRowOf<TT - 1>(t, w, xs, cols, out, ld, load);
  }
  DotsRow<TT>(w, xs, cols, out, ld, load);
}

// DotsRows for the run-time row count r <= R.
template <int R, class W, class Load>
HWY_INLINE void DotsRowsOf(int r, const W* const* rows, const float* HWY_RESTRICT x, size_t cols, float* out, Load load,
                           const char* pf, size_t pf_lines) {
  if constexpr (R > 1) {
    if (r < R) return DotsRowsOf<R - 1>(r, rows, x, cols, out, load, pf, pf_lines);
  }
  DotsRows<R>(rows, x, cols, out, load, pf, pf_lines);
}

// Rows [row_begin, row_end) of out[t * ld + i] = W_i . x_t for t < n.
// Up to kRowsVectors vectors: each row streamed once (prefetched as the
// MatVec kernels do), then met by every vector from L1. More: a tile of
// kRowsTile rows at a time, met by each vector in turn, so x (which no longer
// fits in L1 with 16 vectors) is read from L2 once per tile instead of once
// per row.
template <class W, class Load>
HWY_INLINE void MatRowsImpl(const W* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                            int row_end, StreamPrefetchHint prefetch) {
  const size_t c = static_cast<size_t>(cols), ld = static_cast<size_t>(ld_out), row_bytes = c * sizeof(W);
  if (n >= kRowsTiledFrom) {
    // bf16 rows widened once per tile (exactly: the same f32 values LoadBF16
    // gives), not once per vector: a widening per FMA was slower than the
    // row-at-a-time loop.
    float* widened = std::is_same_v<W, float> ? nullptr : detail::Scratch(kRowsTile * c);
    for (int i = row_begin; i < row_end; i += kRowsTile) {
      const int r = std::min(kRowsTile, row_end - i);
      const float* rows[kRowsTile];
      for (int k = 0; k < r; k++) rows[k] = WidenedRow(w + (i + k) * c, c, widened ? widened + k * c : nullptr);
      // The next tile's lines, a share during each vector, so they arrive
      // while this tile is computed (the tile's first vector would otherwise
      // wait for them from memory with nothing else to do).
      const char* next = reinterpret_cast<const char*>(w + (i + r) * c);
      const size_t next_lines = i + r < row_end ? std::min(kRowsTile, row_end - i - r) * row_bytes / 64 : 0;
      for (int t = 0; t < n; t++) {
        const size_t l0 = next_lines * t / n, l1 = next_lines * (t + 1) / n;
        DotsRowsOf<kRowsTile>(r, rows, x + t * c, c, out + t * ld + i, LoadF32(), next + l0 * 64, l1 - l0);
      }
    }
    return;
  }
  for (int i = row_begin; i < row_end; i++) {
    const W* row = w + i * c;
    PrefetchRowAhead(prefetch, row, row_bytes);
    const float* xs[kRowsVectors];
    int t = 0;
    for (; t + kRowsVectors <= n; t += kRowsVectors) {
      for (int k = 0; k < kRowsVectors; k++) xs[k] = x + (t + k) * c;
      DotsRow<kRowsVectors>(row, xs, c, out + t * ld + i, ld, Load());
    }
    if (t < n) {  // the rest in one pass too: one at a time, a 4-vector step read each row 4 times
      for (int k = 0; k < n - t; k++) xs[k] = x + (t + k) * c;
      DotsRowOf<kRowsVectors - 1>(n - t, row, xs, c, out + t * ld + i, ld, Load());
    }
  }
}

void MatRowsF32Impl(const float* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                    int row_end) {
  // f32's MatVec does not prefetch (see kStreamAheadT0).
  MatRowsImpl<float, LoadF32>(w, x, n, out, cols, ld_out, row_begin, row_end, StreamPrefetchHint::kOff);
}
void MatRowsBF16Impl(const uint16_t* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                     int row_end) {
  MatRowsImpl<uint16_t, LoadBF16Row>(w, x, n, out, cols, ld_out, row_begin, row_end, StreamPrefetch());
}

// q8_0 against quantized x (QuantizedX: int16, one scale per block of 32),
// one lane per block: a group of 8 blocks is 8 int32 sums, exact on every
// instruction set, converted to f32 (rounded to nearest: the same on every
// target), scaled by weight scale * x scale and accumulated in 8 f32 lanes
// with fused multiply-adds, then summed in one fixed order (Lanes8Sum); the
// plain tail blocks follow in column order. So every target returns the same
// bits. Measured on the ~110M synth (Zen 4, one core, weights in L2): the f32
// dot of in-register dequantized weights ran at ~50 GB/s of q8_0, too slow to
// keep up with memory (~12 instructions per block); this runs at a multiple.
// int8 activations would be faster still, but flipped near-tie argmaxes on
// stories260K (top-1 0.875 at one depth of the standard parity, mean KL 1e-3);
// int16 keeps x's rounding (1/65534 of its block's max) far below the weights'.
constexpr int kGroupBytes = kQ8Group * static_cast<int>(sizeof(BlockQ8_0));  // 288
constexpr int kGroupQuants = kQ8Group * kQ8Block;                            // 256

// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the order every target sums in.
inline float Lanes8Sum(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3 compiles AVX3_DL with "avxvnni" (the VEX form) but not
// "avx512vnni", though its run-time check requires AVX512_VNNI: add it to
// the q8_0 functions so the EVEX vpdpwssd compiles (and inlines) here.
#define VERITY_Q8_ATTR __attribute__((target("avx512vnni")))
// AVX-512 VNNI: a step's 32 int8 (4 per block) widen to 32 int16 and
// vpdpwssd adds each adjacent pair of products into an int32 lane, so lanes
// 2l and 2l+1 hold block l; the 64-bit lanes' halves are added at the end.
// R rows x TT vectors at once (prefill): each step of a row is widened once
// for all TT vectors, each vector step loaded once for all R rows. One vector
// and one row (decode) keeps two accumulators, so each chain is 4 steps long.
template <int R, int TT>
VERITY_Q8_ATTR HWY_INLINE void GroupSums(const uint8_t* const* wq, const QuantizedX* const* xs, int g,
                                         int32_t (*sums)[kQ8Group]) {
  constexpr int S = R * TT == 1 ? 2 : 1;
  const int16_t* xq[TT];
  for (int t = 0; t < TT; t++) xq[t] = xs[t]->q.data() + static_cast<size_t>(g) * kGroupQuants;
  __m512i acc[R][TT][S];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++)
      for (int k = 0; k < S; k++) acc[r][t][k] = _mm512_setzero_si512();
  for (int k = 0; k < 8; k++) {
    __m512i w[R];
    for (int r = 0; r < R; r++)
      w[r] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + 32 * k)));
    for (int t = 0; t < TT; t++) {
      const __m512i xv = _mm512_loadu_si512(xq[t] + 32 * k);
      for (int r = 0; r < R; r++) acc[r][t][k % S] = _mm512_dpwssd_epi32(acc[r][t][k % S], w[r], xv);
    }
  }
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++) {
      __m512i a = acc[r][t][0];
      if (S == 2) a = _mm512_add_epi32(a, acc[r][t][S - 1]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums[r * TT + t]),
                          _mm512_cvtepi64_epi32(_mm512_add_epi32(a, _mm512_srli_epi64(a, 32))));
    }
}
#define VERITY_Q8_SIMD 1
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2
#define VERITY_Q8_ATTR
// AVX2: each half of a step (blocks 0-3, 4-7) widens to 16 int16 and
// vpmaddwd adds adjacent products into int32 lanes (2 per block); a
// horizontal add and a 64-bit permute put the 8 blocks in order at the end.
template <int R, int TT>
HWY_INLINE void GroupSums(const uint8_t* const* wq, const QuantizedX* const* xs, int g, int32_t (*sums)[kQ8Group]) {
  const int16_t* xq[TT];
  for (int t = 0; t < TT; t++) xq[t] = xs[t]->q.data() + static_cast<size_t>(g) * kGroupQuants;
  __m256i lo[R][TT], hi[R][TT];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++) lo[r][t] = hi[r][t] = _mm256_setzero_si256();
  for (int k = 0; k < 8; k++) {
    __m256i w0[R], w1[R];
    for (int r = 0; r < R; r++) {
      w0[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wq[r] + 32 * k)));
      w1[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wq[r] + 32 * k + 16)));
    }
    for (int t = 0; t < TT; t++) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * k));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * k + 16));
      for (int r = 0; r < R; r++) {
        lo[r][t] = _mm256_add_epi32(lo[r][t], _mm256_madd_epi16(w0[r], x0));
        hi[r][t] = _mm256_add_epi32(hi[r][t], _mm256_madd_epi16(w1[r], x1));
      }
    }
  }
  // hadd: [b0 b1 b4 b5 | b2 b3 b6 b7]; the permute restores 0..7.
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums[r * TT + t]),
                          _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[r][t], hi[r][t]), 0xD8));
}
#define VERITY_Q8_SIMD 1
#else
#define VERITY_Q8_ATTR
// Any other target: plain loops over the same layout.
template <int R, int TT>
HWY_INLINE void GroupSums(const uint8_t* const* wq, const QuantizedX* const* xs, int g, int32_t (*sums)[kQ8Group]) {
  for (int r = 0; r < R; r++) {
    const int8_t* w = reinterpret_cast<const int8_t*>(wq[r]);
    for (int t = 0; t < TT; t++) {
      const int16_t* xq = xs[t]->q.data() + static_cast<size_t>(g) * kGroupQuants;
      int32_t* out = sums[r * TT + t];
      for (int l = 0; l < kQ8Group; l++) out[l] = 0;
      for (int k = 0; k < 8; k++)
        for (int l = 0; l < kQ8Group; l++)
          for (int b = 0; b < 4; b++) out[l] += w[32 * k + 4 * l + b] * xq[32 * k + 4 * l + b];
    }
  }
}
#endif

// One plain block of the tail: 32 int8 weights times 32 int16 quants, summed
// exactly (so every target and order gives the same bits).
#if HWY_TARGET == HWY_AVX3_DL
// Explicit EVEX: Highway 1.0.3 compiles this target with "avxvnni", which its
// run-time check does not test, and GCC turns a plain loop like the one below
// into the VEX vpdpwssd (AVX-VNNI), which faults on Zen 4 (AVX512_VNNI only).
// tests/tools/isa_check.py fails the build's tests on any such instruction.
VERITY_Q8_ATTR HWY_INLINE int32_t BlockDot(const int8_t* w, const int16_t* xq) {
  const __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  return _mm512_reduce_add_epi32(_mm512_madd_epi16(wv, _mm512_loadu_si512(xq)));
}
#else
HWY_INLINE int32_t BlockDot(const int8_t* w, const int16_t* xq) {
  int32_t sum = 0;
  for (int k = 0; k < kQ8Block; k++) sum += w[k] * xq[k];
  return sum;
}
#endif

// The dot products of R q8_0 rows with TT quantized vectors: out[r * TT + t].
// The arithmetic per (row, vector) does not depend on R or TT (exact integer
// sums, then the same f32 operations in the same order), so prefill equals
// decode bit for bit.
template <int R, int TT>
VERITY_Q8_ATTR HWY_INLINE void DotQ8Rows(const uint8_t* const* rows, const QuantizedX* const* xs, float* out) {
  const int nb = xs[0]->cols / kQ8Block, ng = nb / kQ8Group;
  float lanes[R * TT][kQ8Group] = {};
  alignas(32) int32_t sums[R * TT][kQ8Group];
  const uint8_t* wq[R];
#ifdef VERITY_Q8_SIMD
  __m256 acc[R * TT];
  for (int k = 0; k < R * TT; k++) acc[k] = _mm256_setzero_ps();
  for (int g = 0; g < ng; g++) {
    for (int r = 0; r < R; r++) wq[r] = rows[r] + static_cast<size_t>(g) * kGroupBytes + 32;
    GroupSums<R, TT>(wq, xs, g, sums);
    for (int r = 0; r < R; r++) {
      const __m256 ws = _mm256_loadu_ps(reinterpret_cast<const float*>(wq[r] - 32));
      for (int t = 0; t < TT; t++)
        acc[r * TT + t] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums[r * TT + t]))),
                            _mm256_mul_ps(ws, _mm256_loadu_ps(xs[t]->scale.data() + g * kQ8Group)), acc[r * TT + t]);
    }
  }
  for (int k = 0; k < R * TT; k++) _mm256_storeu_ps(lanes[k], acc[k]);
#else
  for (int g = 0; g < ng; g++) {
    for (int r = 0; r < R; r++) wq[r] = rows[r] + static_cast<size_t>(g) * kGroupBytes + 32;
    GroupSums<R, TT>(wq, xs, g, sums);
    for (int r = 0; r < R; r++)
      for (int l = 0; l < kQ8Group; l++) {
        float ws;
        std::memcpy(&ws, wq[r] - 32 + 4 * l, 4);
        for (int t = 0; t < TT; t++)
          lanes[r * TT + t][l] = std::fma(static_cast<float>(sums[r * TT + t][l]), ws * xs[t]->scale[g * kQ8Group + l],
                                          lanes[r * TT + t][l]);
      }
  }
#endif
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++) {
      float total = Lanes8Sum(lanes[r * TT + t]);
      // The tail: plain blocks, in column order.
      const uint8_t* tail = rows[r] + static_cast<size_t>(ng) * kGroupBytes;
      const int16_t* xq = xs[t]->q.data() + static_cast<size_t>(ng) * kGroupQuants;
      for (int b = ng * kQ8Group; b < nb; b++, tail += sizeof(BlockQ8_0), xq += kQ8Block) {
        float ws;
        std::memcpy(&ws, tail, 4);
        const int8_t* w = reinterpret_cast<const int8_t*>(tail + 4);
        total = std::fma(static_cast<float>(BlockDot(w, xq)), ws * xs[t]->scale[b], total);
      }
      out[r * TT + t] = xs[t]->finite ? total : std::numeric_limits<float>::quiet_NaN();
    }
}
#undef VERITY_Q8_SIMD

VERITY_Q8_ATTR void MatVecQ8_0Impl(const uint8_t* w, const QuantizedX& x, float* out, int row_begin, int row_end) {
  const size_t row_bytes = static_cast<size_t>(x.cols / kQ8Block) * sizeof(BlockQ8_0);
  const QuantizedX* xs[1] = {&x};
  const StreamPrefetchHint prefetch = StreamPrefetch();
  for (int i = row_begin; i < row_end; i++) {
    const uint8_t* row[1] = {w + i * row_bytes};
    PrefetchRowAhead(prefetch, row[0], row_bytes);
    DotQ8Rows<1, 1>(row, xs, out + i);
  }
}

// Prefill: kR weight rows stay in L1 while they meet a block of vectors, kT
// at a time (each row step widened once for the kT vectors, each vector step
// loaded once for the kR rows); rows and vectors left over go one at a time.
template <int R, int TT>
VERITY_Q8_ATTR HWY_INLINE void Q8Tile(const uint8_t* w, size_t row_bytes, const QuantizedX* x, float* out, size_t ld,
                                      int i, int t) {
  const uint8_t* rows[R];
  const QuantizedX* xs[TT];
  for (int r = 0; r < R; r++) rows[r] = w + (i + r) * row_bytes;
  for (int k = 0; k < TT; k++) xs[k] = &x[t + k];
  float res[R * TT];
  DotQ8Rows<R, TT>(rows, xs, res);
  for (int r = 0; r < R; r++)
    for (int k = 0; k < TT; k++) out[(t + k) * ld + i + r] = res[r * TT + k];
}

VERITY_Q8_ATTR void MatMulQ8_0Impl(const uint8_t* w, const QuantizedX* x, float* out, int T, int ld_out, int row_begin,
                                   int row_end) {
  if (T == 0) return;
  const size_t row_bytes = static_cast<size_t>(x[0].cols / kQ8Block) * sizeof(BlockQ8_0);
  const size_t ld = static_cast<size_t>(ld_out);
  constexpr int kR = 4, kT = 4;
  for (int t0 = 0; t0 < T; t0 += kTokenBlock) {
    const int t1 = std::min(T, t0 + kTokenBlock);
    int i = row_begin;
    for (; i + kR <= row_end; i += kR) {
      int t = t0;
      for (; t + kT <= t1; t += kT) Q8Tile<kR, kT>(w, row_bytes, x, out, ld, i, t);
      for (; t < t1; t++) Q8Tile<kR, 1>(w, row_bytes, x, out, ld, i, t);
    }
    for (; i < row_end; i++) {
      int t = t0;
      for (; t + kT <= t1; t += kT) Q8Tile<1, kT>(w, row_bytes, x, out, ld, i, t);
      for (; t < t1; t++) Q8Tile<1, 1>(w, row_bytes, x, out, ld, i, t);
    }
  }
}
// MatRows for q8_0: each row streamed once (prefetched as in MatVecQ8_0) and
// dotted with the vectors 4 at a time while in L1; DotQ8Rows' result per
// (row, vector) does not depend on how many vectors it takes, so each output
// is MatVecQ8_0's.
VERITY_Q8_ATTR void MatRowsQ8_0Impl(const uint8_t* w, const QuantizedX* x, int n, float* out, int ld_out, int row_begin,
                                    int row_end) {
  if (n == 0) return;
  const size_t row_bytes = static_cast<size_t>(x[0].cols / kQ8Block) * sizeof(BlockQ8_0);
  const size_t ld = static_cast<size_t>(ld_out);
  const StreamPrefetchHint prefetch = StreamPrefetch();
  constexpr int kT = 4;
  for (int i = row_begin; i < row_end; i++) {
    PrefetchRowAhead(prefetch, w + i * row_bytes, row_bytes);
    int t = 0;
    for (; t + kT <= n; t += kT) Q8Tile<1, kT>(w, row_bytes, x, out, ld, i, t);
    for (; t < n; t++) Q8Tile<1, 1>(w, row_bytes, x, out, ld, i, t);
  }
}
#undef VERITY_Q8_ATTR

// ---------------------------------------------------------------- attention
void DivideByImpl(float* x, int count, float divisor) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF v = hn::Set(d, divisor);
  size_t i = 0;
  for (; i + N <= static_cast<size_t>(count); i += N) hn::StoreU(hn::Div(hn::LoadU(d, x + i), v), d, x + i);
  for (; i < static_cast<size_t>(count); i++) x[i] /= divisor;
}

// The query heads that share a KV head (grouped-query attention) are served
// together: each cached key row is scored by every head of the group while it
// is in L1, and each value vector is loaded once for kGroup heads, whose sums
// run as independent chains (one head alone waits on its FMA latency at every
// position). Per head the arithmetic is exactly the one-head loop's, so
// results do not depend on the grouping.
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
constexpr int kGroup = 4;  // 32 vector registers: 16 accumulators + 4 loads
#else
constexpr int kGroup = 2;  // 16 registers: 8 accumulators + 4 loads
#endif

// In decode the KV cache comes from DRAM (each token's weight stream evicts
// it), one head-width row per position, 1 KB apart on the ~110M synth: too
// short a run per position for the hardware prefetchers. Asking for the row
// kAttentionPrefetch positions ahead cut the scores' share of a q8_0 decode
// (16-token prompt, 800 generated) from ~10% to ~7% and the weighted sums'
// from ~7% to ~4.7% (perf, two runs each).
constexpr int kAttentionPrefetch = 32;
HWY_INLINE void PrefetchFloats(const float* p, size_t n) {
  for (size_t i = 0; i < n; i += 64 / sizeof(float)) hwy::Prefetch(p + i);
}

// Raw dots of every head of the group against each position in turn, so a
// key row fetched from L2 for the first head is in L1 for the others.
template <class D>
void RawScores(D d, const float* q, int group, const float* keys, long stride, int n, int count, float* scores,
               long scores_stride) {
  const size_t hs = static_cast<size_t>(n);
  for (int t = 0; t < count; t++) {
    const float* key = keys + t * stride;
    if (t + kAttentionPrefetch < count) PrefetchFloats(keys + (t + kAttentionPrefetch) * stride, hs);
    for (int g = 0; g < group; g++) scores[g * scores_stride + t] = DotF32(q + g * hs, key, hs, d);
  }
}

// Heads narrower than a full vector (stories260K's are 8 wide) use vectors of
// 8 or 4 lanes, so no head runs in scalars.
void AttentionScoresImpl(const float* q, int group, const float* keys, long stride, int n, int count, float* scores,
                         long scores_stride) {
  const size_t hs = static_cast<size_t>(n);
  const DF d;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  if (hs >= hn::Lanes(d)) {
    RawScores(d, q, group, keys, stride, n, count, scores, scores_stride);
  } else if (hs >= hn::Lanes(d8)) {
    RawScores(d8, q, group, keys, stride, n, count, scores, scores_stride);
  } else {
    RawScores(d4, q, group, keys, stride, n, count, scores, scores_stride);
  }
  for (int g = 0; g < group; g++) DivideByImpl(scores + g * scores_stride, count, std::sqrt(static_cast<float>(n)));
}

float MaxOfImpl(const float* x, int count) {
  const DF d;
  const size_t N = hn::Lanes(d);
  float m = x[0];
  size_t i = 0;
  if (static_cast<size_t>(count) >= N) {
    VF v = hn::LoadU(d, x);
    for (i = N; i + N <= static_cast<size_t>(count); i += N) v = hn::Max(v, hn::LoadU(d, x + i));
    m = hn::GetLane(hn::MaxOfLanes(d, v));
  }
  for (; i < static_cast<size_t>(count); i++) m = x[i] > m ? x[i] : m;
  return m;
}

// Outputs [i0, i0 + K * Lanes(d)) of G heads (weights w + g * w_stride, outputs
// out + g * out_stride) held in G * K vectors across every position; each
// value vector is loaded once for the G heads.
template <int K, int G, class D>
HWY_INLINE void WeightedChunk(D d, const float* HWY_RESTRICT w, long w_stride, const float* HWY_RESTRICT v, long stride,
                              int count, float* HWY_RESTRICT out, long out_stride) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> acc[G][K];
  for (int g = 0; g < G; g++)
    for (int k = 0; k < K; k++) acc[g][k] = hn::Zero(d);
  for (int t = 0; t < count; t++) {
    const float* row = v + t * stride;
    if (t + kAttentionPrefetch < count) PrefetchFloats(v + (t + kAttentionPrefetch) * stride, K * N);
    hn::Vec<D> vk[K];
    for (int k = 0; k < K; k++) vk[k] = hn::LoadU(d, row + k * N);
    for (int g = 0; g < G; g++) {
      const auto wt = hn::Set(d, w[g * w_stride + t]);
      for (int k = 0; k < K; k++) acc[g][k] = hn::MulAdd(wt, vk[k], acc[g][k]);
    }
  }
  for (int g = 0; g < G; g++)
    for (int k = 0; k < K; k++) hn::StoreU(acc[g][k], d, out + g * out_stride + k * N);
}

// One chunk of K vectors for every head of the group, kGroup heads at a time.
template <int K, class D>
HWY_INLINE void WeightedChunkAnyGroup(D d, const float* w, long w_stride, int group, const float* v, long stride,
                                      int count, float* out, long out_stride) {
  for (int g = 0; g < group; g += kGroup) {
    const float* wg = w + g * w_stride;
    float* og = out + g * out_stride;
    switch (std::min(kGroup, group - g)) {
      case 1: WeightedChunk<K, 1>(d, wg, w_stride, v, stride, count, og, out_stride); break;
      case 2: WeightedChunk<K, 2>(d, wg, w_stride, v, stride, count, og, out_stride); break;
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
      case 3: WeightedChunk<K, 3>(d, wg, w_stride, v, stride, count, og, out_stride); break;
      case 4: WeightedChunk<K, 4>(d, wg, w_stride, v, stride, count, og, out_stride); break;
#endif
    }
  }
}

void WeightedSumImpl(const float* w, long w_stride, int group, const float* values, long stride, int n, int count,
                     float* out) {
  const DF d;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  const int N = static_cast<int>(hn::Lanes(d)), N8 = static_cast<int>(hn::Lanes(d8)),
            N4 = static_cast<int>(hn::Lanes(d4));
  const long o = n;  // head g's outputs start at out + g * n
  int i = 0;
  for (; i + 4 * N <= n; i += 4 * N)
    WeightedChunkAnyGroup<4>(d, w, w_stride, group, values + i, stride, count, out + i, o);
  for (; i + N <= n; i += N) WeightedChunkAnyGroup<1>(d, w, w_stride, group, values + i, stride, count, out + i, o);
  for (; i + N8 <= n; i += N8) WeightedChunkAnyGroup<1>(d8, w, w_stride, group, values + i, stride, count, out + i, o);
  for (; i + N4 <= n; i += N4) WeightedChunkAnyGroup<1>(d4, w, w_stride, group, values + i, stride, count, out + i, o);
  for (; i < n; i++) {
    for (int g = 0; g < group; g++) {
      float acc = 0.0f;
      for (int t = 0; t < count; t++) acc = std::fma(w[g * w_stride + t], values[t * stride + i], acc);
      out[g * o + i] = acc;
    }
  }
}

float ExpShiftedSumImpl(float* x, int count, float max, float extra) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF m = hn::Set(d, max);
  VF acc = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= static_cast<size_t>(count); i += N) {
    const VF e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), m));
    hn::StoreU(e, d, x + i);
    acc = hn::Add(acc, e);
  }
  float sum = extra + Sum(d, acc);
  for (; i < static_cast<size_t>(count); i++) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

// ---------------------------------------------------------------- MatMul
// out[t*ld + r] for R rows (pointers wr[r], f32, cols each) and TT vectors
// (x + t*cols).
template <int R, int TT>
HWY_INLINE void MicroTile(const float* const* wr, const float* HWY_RESTRICT x, size_t cols, float* out, size_t ld) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF acc[R][TT];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < TT; t++) acc[r][t] = hn::Zero(d);
  size_t j = 0;
  for (; j + N <= cols; j += N) {
    VF wv[R];
    for (int r = 0; r < R; r++) wv[r] = hn::LoadU(d, wr[r] + j);
    for (int t = 0; t < TT; t++) {
      const VF xv = hn::LoadU(d, x + t * cols + j);
      for (int r = 0; r < R; r++) acc[r][t] = hn::MulAdd(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < TT; t++)
    for (int r = 0; r < R; r++) {
      float s = Sum(d, acc[r][t]);
      for (size_t k = j; k < cols; k++) s += wr[r][k] * x[t * cols + k];
      out[t * ld + r] = s;
    }
}

template <int R>
HWY_INLINE void RowTile(const float* const* wr, const float* x, int T, size_t cols, float* out, size_t ld) {
  int t = 0;
  for (; t + kTileT <= T; t += kTileT) MicroTile<R, kTileT>(wr, x + t * cols, cols, out + t * ld, ld);
  switch (T - t) {
    case 1: MicroTile<R, 1>(wr, x + t * cols, cols, out + t * ld, ld); break;
    case 2: MicroTile<R, 2>(wr, x + t * cols, cols, out + t * ld, ld); break;
    case 3: MicroTile<R, (kTileT > 3 ? 3 : 1)>(wr, x + t * cols, cols, out + t * ld, ld); break;
    default: break;
  }
}

// Converts weight row `row` to f32 into dst.
struct RowF32 {
  const float* w;
  const float* Get(int row, size_t cols, float*) const { return w + row * cols; }
};
struct RowBF16 {
  const uint16_t* w;
  const float* Get(int row, size_t cols, float* dst) const { return WidenedRow(w + row * cols, cols, dst); }
};
template <class Rows>
void MatMulImpl(const Rows& rows, const float* x, float* out, int T, int cols, int ld_out, int row_begin, int row_end) {
  const size_t n = static_cast<size_t>(cols), ld = static_cast<size_t>(ld_out);
  // Rows of the tile, as f32 (the weights themselves for f32, else converted).
  const size_t stride = (n + 15) & ~static_cast<size_t>(15);
  float* scratch = detail::Scratch(kRows * stride);
  for (int i = row_begin; i < row_end; i += kRows) {
    const int r = std::min(kRows, row_end - i);
    const float* wr[kRows];
    for (int k = 0; k < r; k++) wr[k] = rows.Get(i + k, n, scratch + k * stride);
    for (int t0 = 0; t0 < T; t0 += kTokenBlock) {
      const int tb = std::min(kTokenBlock, T - t0);
      const float* xb = x + t0 * n;
      float* ob = out + t0 * ld + i;
      switch (r) {
        case 4: RowTile<4>(wr, xb, tb, n, ob, ld); break;
        case 3: RowTile<3>(wr, xb, tb, n, ob, ld); break;
        case 2: RowTile<2>(wr, xb, tb, n, ob, ld); break;
        default: RowTile<1>(wr, xb, tb, n, ob, ld); break;
      }
    }
  }
}

void MatMulF32Impl(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                   int row_end) {
  MatMulImpl(RowF32{w}, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulBF16Impl(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                    int row_end) {
  MatMulImpl(RowBF16{w}, x, out, T, cols, ld_out, row_begin, row_end);
}
// ---------------------------------------------------------------- conversions
// max |v[k]| over one block of 32 (Max may drop a NaN: callers that care check).
HWY_INLINE float BlockAbsMax(const float* HWY_RESTRICT v) {
  const DQ d;
  auto m = hn::Zero(d);
  for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += hn::Lanes(d)) m = hn::Max(m, hn::Abs(hn::LoadU(d, v + k)));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// x to int16 per block of 32: scale = max|x| / 32767, q = round(x / scale)
// (computed as x * (32767 / max|x|), to nearest even). Returns false, writing
// nothing meaningful, when x holds NaN or infinity.
bool QuantizeX16Impl(const float* x, int cols, int16_t* q, float* scale) {
  const DQ d;
  const hn::Rebind<int16_t, DQ> di16;
  const size_t N = hn::Lanes(d);
  for (int b = 0; b < cols / kQ8Block; b++) {
    const float* v = x + b * kQ8Block;
    const float amax = BlockAbsMax(v);
    for (int k = 0; k < kQ8Block; k++)  // Max may drop a NaN; check every value
      if (!std::isfinite(v[k])) return false;
    scale[b] = amax / 32767.0f;
    const auto inv = hn::Set(d, amax == 0.0f ? 0.0f : 32767.0f / amax);
    for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += N)
      hn::StoreU(hn::DemoteTo(di16, hn::NearestInt(hn::Mul(hn::LoadU(d, v + k), inv))), di16, q + b * kQ8Block + k);
  }
  return true;
}

void QuantizeQ8_0Impl(const float* src, BlockQ8_0* dst, size_t n) {
  const DQ d;
  const hn::Rebind<int32_t, DQ> di32;
  const hn::Rebind<int8_t, DQ> di8;
  const size_t N = hn::Lanes(d);
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const float* v = src + b * kQ8Block;
    const float amax = BlockAbsMax(v);
    const float scale = amax / 127.0f;
    dst[b].scale = scale;
    if (scale == 0.0f) {
      std::memset(dst[b].q, 0, sizeof(dst[b].q));
      continue;
    }
    const auto s = hn::Set(d, scale);
    for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += N) {
      // NearestInt rounds ties to even; |v/scale| <= 127 (+1 ulp) so the
      // saturating demotion never clips more than that ulp.
      const auto q = hn::NearestInt(hn::Div(hn::LoadU(d, v + k), s));
      hn::StoreU(hn::DemoteTo(di8, q), di8, dst[b].q + k);
    }
    (void)di32;
  }
}

void DequantizeQ8_0Impl(const BlockQ8_0* src, float* dst, size_t n) {
  const DQ d;
  const hn::Rebind<int32_t, DQ> di32;
  const hn::Rebind<int8_t, DQ> di8;
  const size_t N = hn::Lanes(d);
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const auto s = hn::Set(d, src[b].scale);
    for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += N)
      hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(di32, hn::LoadU(di8, src[b].q + k))), s), d,
                 dst + b * kQ8Block + k);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(TargetNameImpl);
HWY_EXPORT(MatVecF32Impl);
HWY_EXPORT(MatVecBF16Impl);
HWY_EXPORT(MatVecQ8_0Impl);
HWY_EXPORT(MatMulF32Impl);
HWY_EXPORT(MatMulBF16Impl);
HWY_EXPORT(MatMulQ8_0Impl);
HWY_EXPORT(MatRowsF32Impl);
HWY_EXPORT(MatRowsBF16Impl);
HWY_EXPORT(MatRowsQ8_0Impl);
HWY_EXPORT(QuantizeQ8_0Impl);
HWY_EXPORT(DequantizeQ8_0Impl);
HWY_EXPORT(QuantizeX16Impl);
HWY_EXPORT(AttentionScoresImpl);
HWY_EXPORT(ExpShiftedSumImpl);
HWY_EXPORT(MaxOfImpl);
HWY_EXPORT(DivideByImpl);
HWY_EXPORT(WeightedSumImpl);

const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

void AttentionScores(const float* q, int group, const float* keys, long stride, int n, int count, float* scores,
                     long scores_stride) {
  HWY_DYNAMIC_DISPATCH(AttentionScoresImpl)(q, group, keys, stride, n, count, scores, scores_stride);
}
float MaxOf(const float* x, int count) { return HWY_DYNAMIC_DISPATCH(MaxOfImpl)(x, count); }
void DivideBy(float* x, int count, float d) { HWY_DYNAMIC_DISPATCH(DivideByImpl)(x, count, d); }
void WeightedSum(const float* w, long w_stride, int group, const float* values, long stride, int n, int count,
                 float* out) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)(w, w_stride, group, values, stride, n, count, out);
}
float ExpShiftedSum(float* x, int count, float max, float extra) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSumImpl)(x, count, max, extra);
}

void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecF32Impl)(w, x, out, cols, row_begin, row_end);
}
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecBF16Impl)(w, x, out, cols, row_begin, row_end);
}
void MatVecQ8_0(const uint8_t* w, const QuantizedX& x, float* out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecQ8_0Impl)(w, x, out, row_begin, row_end);
}
void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulF32Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulBF16Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulQ8_0(const uint8_t* w, const QuantizedX* x, float* out, int T, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulQ8_0Impl)(w, x, out, T, ld_out, row_begin, row_end);
}

void MatRowsF32(const float* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsF32Impl)(w, x, n, out, cols, ld_out, row_begin, row_end);
}
void MatRowsBF16(const uint16_t* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                 int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsBF16Impl)(w, x, n, out, cols, ld_out, row_begin, row_end);
}
void MatRowsQ8_0(const uint8_t* w, const QuantizedX* x, int n, float* out, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsQ8_0Impl)(w, x, n, out, ld_out, row_begin, row_end);
}

uint16_t F32ToBF16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float BF16ToF32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = F32ToBF16(src[i]);
}
void BF16ToF32Array(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = BF16ToF32(src[i]);
}

void QuantizeQ8_0(const float* src, BlockQ8_0* dst, size_t n) { HWY_DYNAMIC_DISPATCH(QuantizeQ8_0Impl)(src, dst, n); }
void DequantizeQ8_0(const BlockQ8_0* src, float* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ8_0Impl)(src, dst, n);
}

namespace {
// The one statement of the group layout (simd.h): block l's values 4k..4k+3
// sit at step k, lane l of its group of 256 values. For the int8 of weights
// and the int16 of quantized x alike.
template <class T>
void ToGroup(const T* block, int l, T* group) {
  for (int k = 0; k < 8; k++) std::memcpy(group + 32 * k + 4 * l, block + 4 * k, 4 * sizeof(T));
}
template <class T>
void FromGroup(const T* group, int l, T* block) {
  for (int k = 0; k < 8; k++) std::memcpy(block + 4 * k, group + 32 * k + 4 * l, 4 * sizeof(T));
}
}  // namespace

void PackRowQ8_0(const BlockQ8_0* blocks, int cols, uint8_t* row) {
  const int nb = cols / kQ8Block, ng = nb / kQ8Group;
  for (int g = 0; g < ng; g++, row += kQ8Group * sizeof(BlockQ8_0)) {
    const BlockQ8_0* grp = blocks + g * kQ8Group;
    for (int l = 0; l < kQ8Group; l++) {
      std::memcpy(row + 4 * l, &grp[l].scale, 4);
      ToGroup(grp[l].q, l, reinterpret_cast<int8_t*>(row + 32));
    }
  }
  std::memcpy(row, blocks + ng * kQ8Group, (nb - ng * kQ8Group) * sizeof(BlockQ8_0));
}

void UnpackRowQ8_0(const uint8_t* row, int cols, BlockQ8_0* blocks) {
  const int nb = cols / kQ8Block, ng = nb / kQ8Group;
  for (int g = 0; g < ng; g++, row += kQ8Group * sizeof(BlockQ8_0)) {
    BlockQ8_0* grp = blocks + g * kQ8Group;
    for (int l = 0; l < kQ8Group; l++) {
      std::memcpy(&grp[l].scale, row + 4 * l, 4);
      FromGroup(reinterpret_cast<const int8_t*>(row + 32), l, grp[l].q);
    }
  }
  std::memcpy(blocks + ng * kQ8Group, row, (nb - ng * kQ8Group) * sizeof(BlockQ8_0));
}

void QuantizeRowQ8_0(const float* src, int cols, uint8_t* row) {
  thread_local std::vector<BlockQ8_0> blocks;
  blocks.resize(static_cast<size_t>(cols / kQ8Block));
  QuantizeQ8_0(src, blocks.data(), static_cast<size_t>(cols));
  PackRowQ8_0(blocks.data(), cols, row);
}

void DequantizeRowQ8_0(const uint8_t* row, int cols, float* dst) {
  thread_local std::vector<BlockQ8_0> blocks;
  blocks.resize(static_cast<size_t>(cols / kQ8Block));
  UnpackRowQ8_0(row, cols, blocks.data());
  DequantizeQ8_0(blocks.data(), dst, static_cast<size_t>(cols));
}

void QuantizeX(const float* x, int cols, QuantizedX* out) {
  const int nb = cols / kQ8Block, ng = nb / kQ8Group;
  out->cols = cols;
  out->q.resize(static_cast<size_t>(cols));
  out->scale.resize(static_cast<size_t>(nb));
  thread_local std::vector<int16_t> plain;
  plain.resize(static_cast<size_t>(cols));
  out->finite = HWY_DYNAMIC_DISPATCH(QuantizeX16Impl)(x, cols, plain.data(), out->scale.data());
  if (!out->finite) return;
  // Into the weights' layout (PackRowQ8_0's, without the scales).
  int16_t* q = out->q.data();
  for (int g = 0; g < ng; g++, q += kQ8Group * kQ8Block)
    for (int l = 0; l < kQ8Group; l++) ToGroup(plain.data() + (g * kQ8Group + l) * kQ8Block, l, q);
  std::memcpy(q, plain.data() + ng * kQ8Group * kQ8Block, static_cast<size_t>(nb - ng * kQ8Group) * kQ8Block * 2);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
