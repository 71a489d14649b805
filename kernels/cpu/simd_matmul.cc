// The f32 and bf16 prefill kernels of kernels/cpu/simd.h: MatMulF32 and
// MatMulBF16, a register tile of weight rows against a block of input vectors
// (q8_0's MatMul is in simd_q8.cc, on its decode dot). Written once against
// Google Highway and compiled by foreach_target.h for every instruction set
// (this file is re-included once per target); simd-inl.h holds what it shares
// with the other families (WidenedRow, Sum, kTokenBlock, detail::Scratch).
//
// Prefill (MatMul*) is compute-bound: a tile of 4 weight rows (converted to f32
// into a per-thread scratch once for bf16) is multiplied against tiles of
// up to 4 input vectors with 16 accumulators (3 on targets with 16 vector
// registers), so each weight row is read from memory once per 64 vectors and
// every vector load feeds 3-4 FMAs.

#include "base/simd_targets.h"  // before any Highway header

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The MatMul register tile: kRows weight rows x kTileT input vectors.
constexpr int kRows = 4;
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
constexpr int kTileT = 4;  // 32 vector registers: 16 accumulators + 4 rows + x
#else
constexpr int kTileT = 3;  // 16 registers: 12 accumulators + 4 rows
#endif

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

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(MatMulF32Impl);
HWY_EXPORT(MatMulBF16Impl);

void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulF32Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulBF16Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
