// The attention kernels of kernels/cpu/simd.h, for the fast backend's
// AttendGroupFast: AttentionScores (the group's dots with each cached key,
// on simd-inl.h's DotF32), MaxOf, ExpShiftedSum (the softmax's max and
// exponentials), DivideBy and WeightedSum (the values weighted by the
// softmax); SoftCapRow and GeGLURow, Gemma's tanh steps. Written once against Google Highway and compiled by
// foreach_target.h for every instruction set (this file is re-included once
// per target); simd-inl.h holds what it shares with the other families.

#include "base/simd_targets.h"  // before any Highway header

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
                         long scores_stride, float divisor) {
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
  for (int g = 0; g < group; g++) DivideByImpl(scores + g * scores_stride, count, divisor);
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

void SoftCapRowImpl(float* x, int count, float cap) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF c = hn::Set(d, cap);
  size_t i = 0;
  for (; i + N <= static_cast<size_t>(count); i += N)
    hn::StoreU(hn::Mul(c, hn::Tanh(d, hn::Div(hn::LoadU(d, x + i), c))), d, x + i);
  for (; i < static_cast<size_t>(count); i++) x[i] = cap * std::tanh(x[i] / cap);
}

void GeGLURowImpl(float* hb, const float* up, int n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF beta = hn::Set(d, 0.7978845608028654f), kappa = hn::Set(d, 0.044715f), half = hn::Set(d, 0.5f),
           one = hn::Set(d, 1.0f);
  size_t i = 0;
  for (; i + N <= static_cast<size_t>(n); i += N) {
    const VF v = hn::LoadU(d, hb + i);
    const VF inner = hn::Mul(beta, hn::MulAdd(kappa, hn::Mul(v, hn::Mul(v, v)), v));
    const VF g = hn::Mul(hn::Mul(half, v), hn::Add(one, hn::Tanh(d, inner)));
    hn::StoreU(hn::Mul(g, hn::LoadU(d, up + i)), d, hb + i);
  }
  for (; i < static_cast<size_t>(n); i++) {
    const float v = hb[i], inner = 0.7978845608028654f * (v + 0.044715f * (v * v * v));
    hb[i] = 0.5f * v * (1.0f + std::tanh(inner)) * up[i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(AttentionScoresImpl);
HWY_EXPORT(SoftCapRowImpl);
HWY_EXPORT(GeGLURowImpl);
HWY_EXPORT(ExpShiftedSumImpl);
HWY_EXPORT(MaxOfImpl);
HWY_EXPORT(DivideByImpl);
HWY_EXPORT(WeightedSumImpl);

void AttentionScores(const float* q, int group, const float* keys, long stride, int n, int count, float* scores,
                     long scores_stride, float divisor) {
  HWY_DYNAMIC_DISPATCH(AttentionScoresImpl)(q, group, keys, stride, n, count, scores, scores_stride, divisor);
}
void SoftCapRow(float* x, int count, float cap) { HWY_DYNAMIC_DISPATCH(SoftCapRowImpl)(x, count, cap); }
void GeGLURow(float* hb, const float* up, int n) { HWY_DYNAMIC_DISPATCH(GeGLURowImpl)(hb, up, n); }
float MaxOf(const float* x, int count) { return HWY_DYNAMIC_DISPATCH(MaxOfImpl)(x, count); }
void DivideBy(float* x, int count, float d) { HWY_DYNAMIC_DISPATCH(DivideByImpl)(x, count, d); }
void WeightedSum(const float* w, long w_stride, int group, const float* values, long stride, int n, int count,
                 float* out) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)(w, w_stride, group, values, stride, n, count, out);
}
float ExpShiftedSum(float* x, int count, float max, float extra) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSumImpl)(x, count, max, extra);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
