// The SIMD kernels of kernels/cpu/simd.h, written once against Google Highway
// and compiled by foreach_target.h for every instruction set (this file is
// re-included once per target); HWY_DYNAMIC_DISPATCH picks the best one the CPU
// runs at the first call.
//
// Decode (MatVec*) is memory-bound: each kernel walks its rows one at a time,
// so a thread's range of rows is one contiguous stream for the hardware
// prefetchers, with 4 (f32, bf16) or 2 (q8_0) independent accumulators per row
// reduced once per row; x stays in L1. bf16 and q8_0 are widened to f32 in
// registers (bf16: zero-extend and shift; q8_0: int8 -> int32 -> f32, a block
// dot scaled once per 32 weights), reading 2 and 1.125 bytes per weight. On the
// Zen 5 box one core runs them, with the weights in L2, at ~155 (f32), ~85
// (bf16) and ~40-50 (q8_0) GB/s, against a DRAM stream of ~35-40 GB/s.
//
// Prefill (MatMul*) is compute-bound: a tile of 4 weight rows (converted to f32
// into a per-thread scratch once for bf16/q8_0) is multiplied against tiles of
// up to 4 input vectors with 16 accumulators (3 on targets with 16 vector
// registers), so each weight row is read from memory once per 64 vectors and
// every vector load feeds 3-4 FMAs.
//
// Vectors live in arrays of fixed size, which the scalable targets (SVE, RVV)
// cannot hold; they are disabled, NEON covers Arm.

#ifndef VERITY_KERNELS_CPU_SIMD_SHARED_
#define VERITY_KERNELS_CPU_SIMD_SHARED_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd.h"

namespace verity::kernels::simd::detail {
// Per-thread scratch that only grows (MatMul's f32 weight tile), 64-byte aligned.
inline float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n + 16) buf.resize(n + 16);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~static_cast<uintptr_t>(63));
}
inline int64_t& ForcedTarget() {
  static int64_t forced = 0;  // a Highway target bit, 0 when none is forced
  return forced;
}
}  // namespace verity::kernels::simd::detail

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#endif  // VERITY_KERNELS_CPU_SIMD_SHARED_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

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
constexpr int kTokenBlock = 64;  // input vectors per pass over a weight tile

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

HWY_INLINE float DotF32(const float* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t cols) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N) {
    a0 = hn::MulAdd(hn::LoadU(d, w + j), hn::LoadU(d, x + j), a0);
    a1 = hn::MulAdd(hn::LoadU(d, w + j + N), hn::LoadU(d, x + j + N), a1);
    a2 = hn::MulAdd(hn::LoadU(d, w + j + 2 * N), hn::LoadU(d, x + j + 2 * N), a2);
    a3 = hn::MulAdd(hn::LoadU(d, w + j + 3 * N), hn::LoadU(d, x + j + 3 * N), a3);
  }
  for (; j + N <= cols; j += N) a0 = hn::MulAdd(hn::LoadU(d, w + j), hn::LoadU(d, x + j), a0);
  float s = Sum(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)));
  for (; j < cols; j++) s += w[j] * x[j];
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

HWY_INLINE float DotBF16(const uint16_t* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t cols) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t j = 0;
  for (; j + kUnroll * N <= cols; j += kUnroll * N) {
    a0 = hn::MulAdd(LoadBF16(d16, w + j), hn::LoadU(d, x + j), a0);
    a1 = hn::MulAdd(LoadBF16(d16, w + j + N), hn::LoadU(d, x + j + N), a1);
    a2 = hn::MulAdd(LoadBF16(d16, w + j + 2 * N), hn::LoadU(d, x + j + 2 * N), a2);
    a3 = hn::MulAdd(LoadBF16(d16, w + j + 3 * N), hn::LoadU(d, x + j + 3 * N), a3);
  }
  for (; j + N <= cols; j += N) a0 = hn::MulAdd(LoadBF16(d16, w + j), hn::LoadU(d, x + j), a0);
  float s = Sum(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)));
  for (; j < cols; j++) s += BF16ToF32(w[j]) * x[j];
  return s;
}

void MatVecBF16Impl(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  const size_t n = static_cast<size_t>(cols);
  for (int i = row_begin; i < row_end; i++) out[i] = DotBF16(w + i * n, x, n);
}

// q8_0, dequantized in registers: a block's 32 int8 widen to int32 and convert
// to f32 (N at a time), their dot with x sums into a block vector, scaled into
// the row accumulator with one FMA. x stays f32 (not quantized), so this is the
// exact f32 dot of the dequantized row up to summation order, like MatMulQ8_0.
// Two blocks per step keep two accumulator chains.
using DQ = hn::CappedTag<float, kQ8Block>;  // at most 32 lanes per block chunk

HWY_INLINE hn::Vec<DQ> BlockDot(const BlockQ8_0& b, const float* HWY_RESTRICT x) {
  const DQ d;
  const hn::Rebind<int32_t, DQ> di32;
  const hn::Rebind<int8_t, DQ> di8;
  const size_t N = hn::Lanes(d);
  auto s = hn::Mul(hn::ConvertTo(d, hn::PromoteTo(di32, hn::LoadU(di8, b.q))), hn::LoadU(d, x));
  for (size_t k = N; k < static_cast<size_t>(kQ8Block); k += N)
    s = hn::MulAdd(hn::ConvertTo(d, hn::PromoteTo(di32, hn::LoadU(di8, b.q + k))), hn::LoadU(d, x + k), s);
  return s;
}

HWY_INLINE float DotQ8(const BlockQ8_0* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t blocks) {
  const DQ d;
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  size_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    a0 = hn::MulAdd(BlockDot(w[b], x + b * kQ8Block), hn::Set(d, w[b].scale), a0);
    a1 = hn::MulAdd(BlockDot(w[b + 1], x + (b + 1) * kQ8Block), hn::Set(d, w[b + 1].scale), a1);
  }
  if (b < blocks) a0 = hn::MulAdd(BlockDot(w[b], x + b * kQ8Block), hn::Set(d, w[b].scale), a0);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
}

void MatVecQ8_0Impl(const BlockQ8_0* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  const size_t blocks = static_cast<size_t>(cols) / kQ8Block;
  for (int i = row_begin; i < row_end; i++) out[i] = DotQ8(w + i * blocks, x, blocks);
}

// Sums every 64-bit word (and trailing byte) of a buffer with the widest loads
// and 4 independent accumulators: the read-bandwidth probe.
uint64_t StreamReadImpl(const void* data, size_t bytes) {
  const hn::ScalableTag<uint64_t> d;
  const size_t N = hn::Lanes(d), words = bytes / 8;
  const uint64_t* p = static_cast<const uint64_t*>(data);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= words; i += 4 * N) {
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
  }
  uint64_t s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < words; i++) s += p[i];
  const unsigned char* tail = static_cast<const unsigned char*>(data);
  for (size_t k = words * 8; k < bytes; k++) s += tail[k];
  return s;
}

// ---------------------------------------------------------------- MatMul
// out[t*ld + r] for R rows (pointers wr[r], f32, cols each) and TT vectors
// (x + t*cols).
template <int R, int TT>
HWY_INLINE void MicroTile(const float* const* wr, const float* HWY_RESTRICT x, size_t cols, float* out,
                          size_t ld) {
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
  const float* Get(int row, size_t cols, float* dst) const {
    const DF d;
    const hn::Rebind<uint16_t, DF> d16;
    const size_t N = hn::Lanes(d);
    const uint16_t* src = w + row * cols;
    size_t j = 0;
    for (; j + N <= cols; j += N) hn::StoreU(LoadBF16(d16, src + j), d, dst + j);
    for (; j < cols; j++) dst[j] = BF16ToF32(src[j]);
    return dst;
  }
};
struct RowQ8 {
  const BlockQ8_0* w;
  const float* Get(int row, size_t cols, float* dst) const {
    const DQ d;
    const hn::Rebind<int32_t, DQ> di32;
    const hn::Rebind<int8_t, DQ> di8;
    const size_t N = hn::Lanes(d), blocks = cols / kQ8Block;
    const BlockQ8_0* src = w + row * blocks;
    for (size_t b = 0; b < blocks; b++) {
      const auto s = hn::Set(d, src[b].scale);
      for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += N)
        hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(di32, hn::LoadU(di8, src[b].q + k))), s), d,
                  dst + b * kQ8Block + k);
    }
    return dst;
  }
};

template <class Rows>
void MatMulImpl(const Rows& rows, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
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
void MatMulQ8_0Impl(const BlockQ8_0* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                    int row_end) {
  MatMulImpl(RowQ8{w}, x, out, T, cols, ld_out, row_begin, row_end);
}

// ---------------------------------------------------------------- conversions
void QuantizeQ8_0Impl(const float* src, BlockQ8_0* dst, size_t n) {
  const DQ d;
  const hn::Rebind<int32_t, DQ> di32;
  const hn::Rebind<int8_t, DQ> di8;
  const size_t N = hn::Lanes(d);
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const float* v = src + b * kQ8Block;
    auto m = hn::Zero(d);
    for (size_t k = 0; k < static_cast<size_t>(kQ8Block); k += N) m = hn::Max(m, hn::Abs(hn::LoadU(d, v + k)));
    const float amax = hn::GetLane(hn::MaxOfLanes(d, m));
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
  RowQ8 rows{src};
  rows.Get(0, n, dst);
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
HWY_EXPORT(QuantizeQ8_0Impl);
HWY_EXPORT(DequantizeQ8_0Impl);
HWY_EXPORT(StreamReadImpl);

uint64_t StreamRead(const void* data, size_t bytes) { return HWY_DYNAMIC_DISPATCH(StreamReadImpl)(data, bytes); }

void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecF32Impl)(w, x, out, cols, row_begin, row_end);
}
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecBF16Impl)(w, x, out, cols, row_begin, row_end);
}
void MatVecQ8_0(const BlockQ8_0* w, const float* x, float* out, int cols, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecQ8_0Impl)(w, x, out, cols, row_begin, row_end);
}
void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
               int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulF32Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulBF16Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
}
void MatMulQ8_0(const BlockQ8_0* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulQ8_0Impl)(w, x, out, T, cols, ld_out, row_begin, row_end);
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

const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

std::vector<std::string> AvailableTargets() {
  // SupportedAndGeneratedTargets() honours a forced target; list them unforced.
  std::vector<std::string> names;
  const int64_t forced = detail::ForcedTarget();
  if (forced != 0) hwy::SetSupportedTargetsForTest(0);
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) names.emplace_back(hwy::TargetName(t));
  if (forced != 0) hwy::SetSupportedTargetsForTest(forced);
  return names;
}

bool ForceTargetForTest(const std::string& name) {
  int64_t target = 0;
  if (!name.empty()) {
    if (detail::ForcedTarget() != 0) hwy::SetSupportedTargetsForTest(0);
    for (int64_t t : hwy::SupportedAndGeneratedTargets())
      if (name == hwy::TargetName(t)) target = t;
    if (target == 0) {
      if (detail::ForcedTarget() != 0) hwy::SetSupportedTargetsForTest(detail::ForcedTarget());
      return false;
    }
  }
  detail::ForcedTarget() = target;
  hwy::SetSupportedTargetsForTest(target);  // 0: the CPU's own set again
  hwy::GetChosenTarget().DeInit();          // re-choose at the next dispatch
  return true;
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
