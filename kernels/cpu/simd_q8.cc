// Every q8_0 kernel of kernels/cpu/simd.h: the products (MatVecQ8_0,
// MatRowsQ8_0, MatMulQ8_0, one per-row dot for all three, so each returns the
// same bits on every target and prefill equals decode), and the conversions
// to and from q8_0 (QuantizeX and its QuantizeX16, QuantizeQ8_0,
// DequantizeQ8_0, the row packing of simd.h's group layout), together because
// they share that layout and its block helpers. Written once against Google
// Highway and compiled by foreach_target.h for every instruction set (this
// file is re-included once per target); simd-inl.h holds what it shares with
// the other families.
//
// Decode: q8_0 multiplies int8 by int8 (x quantized once per product,
// QuantizedX) with one lane per block of 32, so a block costs a fraction of an
// instruction instead of ~12.
//
// Prefill: q8_0 runs its decode dot per row and vector, the row held in L1
// across a block of 64 vectors.

#include "base/simd_targets.h"  // before any Highway header

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd_q8.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- products
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

// ---------------------------------------------------------------- conversions
using DQ = hn::CappedTag<float, kQ8Block>;  // at most 32 lanes per block chunk

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

HWY_EXPORT(MatVecQ8_0Impl);
HWY_EXPORT(MatMulQ8_0Impl);
HWY_EXPORT(MatRowsQ8_0Impl);
HWY_EXPORT(QuantizeQ8_0Impl);
HWY_EXPORT(DequantizeQ8_0Impl);
HWY_EXPORT(QuantizeX16Impl);

void MatVecQ8_0(const uint8_t* w, const QuantizedX& x, float* out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecQ8_0Impl)(w, x, out, row_begin, row_end);
}
void MatMulQ8_0(const uint8_t* w, const QuantizedX* x, float* out, int T, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulQ8_0Impl)(w, x, out, T, ld_out, row_begin, row_end);
}
void MatRowsQ8_0(const uint8_t* w, const QuantizedX* x, int n, float* out, int ld_out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsQ8_0Impl)(w, x, n, out, ld_out, row_begin, row_end);
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
