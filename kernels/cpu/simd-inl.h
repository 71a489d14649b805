// What more than one family of the SIMD kernels of kernels/cpu/simd.h uses,
// per target: the f32 vector type, the token block of prefill, the horizontal
// sum, the f32 dot of decode and attention (DotF32, with TailMulAdd), and bf16
// widened to f32 (LoadBF16, WidenedRow) for the bf16 MatVec, MatRows and
// MatMul. Plus, once, the per-thread scratch of MatRows and MatMul.
//
// The kernels are written once against Google Highway, one .cc per family,
// each compiled by foreach_target.h for every instruction set (the file is
// re-included once per target) with its own HWY_EXPORT and
// HWY_DYNAMIC_DISPATCH wrappers; HWY_DYNAMIC_DISPATCH picks the best target the
// CPU runs at the first call:
// - simd_matvec.cc: f32 and bf16 decode (MatVec*, MatRows*);
// - simd_q8.cc: every q8_0 kernel (MatVec, MatRows, MatMul) and the q8_0
//   conversions (QuantizeX, QuantizeQ8_0, DequantizeQ8_0, the row packing);
// - simd_matmul.cc: f32 and bf16 prefill (MatMul*);
// - simd_attention.cc: AttentionScores, MaxOf, DivideBy, WeightedSum,
//   ExpShiftedSum;
// - simd.cc: TargetName and the bf16 conversions, which belong to no family.
// This header is Highway's -inl.h idiom: each family includes it after
// hwy/foreach_target.h, and the toggle guard below lets it in once per target,
// so what it defines exists in every target's namespace of every family.
//
// Vectors live in arrays of fixed size, which the scalable targets (SVE, RVV)
// cannot hold; they are disabled, NEON covers Arm.

// The plain part, once per translation unit.
#ifndef VERITY_KERNELS_CPU_SIMD_INL_SHARED_
#define VERITY_KERNELS_CPU_SIMD_INL_SHARED_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/simd.h"

namespace verity::kernels::simd::detail {
// Per-thread scratch that only grows (MatMul's f32 weight tile, MatRows' widened bf16 one), 64-byte aligned.
inline float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n + 16) buf.resize(n + 16);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~static_cast<uintptr_t>(63));
}
}  // namespace verity::kernels::simd::detail

#endif  // VERITY_KERNELS_CPU_SIMD_INL_SHARED_

// The per-target part (still compiled once per target).
#if defined(VERITY_KERNELS_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef VERITY_KERNELS_CPU_SIMD_INL_H_
#undef VERITY_KERNELS_CPU_SIMD_INL_H_
#else
#define VERITY_KERNELS_CPU_SIMD_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr int kTokenBlock = 64;  // input vectors per pass over a weight tile (MatMul*, MatMulQ8_0)

inline float Sum(DF d, VF v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

// kUnroll independent accumulators per row (decode's dots, simd_matvec.cc)
// hide the FMA latency; they are summed once per row.
constexpr int kUnroll = 4;

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

// bf16 -> f32 is exact: the 16 bits become the high half of the f32. Widening
// N bf16 (a half-width load, zero-extended) then shifting measured faster than
// masking/shifting the raw 32-bit lanes against an even/odd-reordered x
// (35 vs 22 GB/s on one core, cold), though both are far from compute-bound.
HWY_INLINE VF LoadBF16(const hn::Rebind<uint16_t, DF> d16, const uint16_t* HWY_RESTRICT p) {
  const DF d;
  const hn::Rebind<uint32_t, DF> d32;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, p))));
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

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // VERITY_KERNELS_CPU_SIMD_INL_H_
