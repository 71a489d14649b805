// The f32 and bf16 decode kernels of kernels/cpu/simd.h: MatVecF32/BF16 (one
// vector) and MatRowsF32/BF16 (several independent vectors, a continuous-
// batching step), together because MatRows is MatVec's arithmetic exactly (the
// same accumulators fed in the same order: each output bit for bit MatVec's).
// Written once against Google Highway and compiled by foreach_target.h for
// every instruction set (this file is re-included once per target);
// simd-inl.h holds what it shares with the other families (DotF32, LoadBF16,
// WidenedRow, ...).
//
// Decode (MatVec*) is memory-bound: each kernel walks its rows one at a time,
// so a thread's range of rows is one contiguous stream for the hardware
// prefetchers, with 4 (f32, bf16) independent accumulators per row reduced
// once per row; x stays in L1. bf16 is widened to f32 in registers
// (zero-extend and shift), reading 2 bytes per weight.

#include "base/simd_targets.h"  // before any Highway header

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd_matvec.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- MatVec
// One row at a time, so each thread reads one contiguous stream (rows
// [row_begin, row_end) are adjacent in memory), which the hardware prefetchers
// follow best: on the Zen 5 box, 4 rows interleaved were as fast for f32 but
// 2x slower for q8_0 (36-byte blocks, 864-byte rows) and 1.4x slower for bf16.
// x is re-read per row from L1 (kUnroll accumulators per row: simd-inl.h).

// bf16 and q8_0 decode prefetch their weight stream ahead of their loads
// (kernels/cpu/prefetch.h says with which hint and distance, and why).

void MatVecF32Impl(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  const size_t n = static_cast<size_t>(cols);
  for (int i = row_begin; i < row_end; i++) out[i] = DotF32(w + i * n, x, n);
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

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(MatVecF32Impl);
HWY_EXPORT(MatVecBF16Impl);
HWY_EXPORT(MatRowsF32Impl);
HWY_EXPORT(MatRowsBF16Impl);

void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecF32Impl)(w, x, out, cols, row_begin, row_end);
}
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecBF16Impl)(w, x, out, cols, row_begin, row_end);
}

void MatRowsF32(const float* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsF32Impl)(w, x, n, out, cols, ld_out, row_begin, row_end);
}
void MatRowsBF16(const uint16_t* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                 int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsBF16Impl)(w, x, n, out, cols, ld_out, row_begin, row_end);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
