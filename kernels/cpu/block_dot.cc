// The block-quantized products of kernels/cpu/block_dot.h, written once
// against Google Highway and compiled by foreach_target.h for every
// instruction set (this file is re-included once per target), as the simd*.cc kernels.
//
// Each type is a struct that decodes a block's scales (Decode) and hands its
// weights to the dot, a vector of int16 at a time, already multiplied by
// their sub-block's integer scale (Weights: emit(j, w) for weights j.. of the
// block); DotRow multiplies them with x's int16 quants (pairwise into int32
// lanes) and does the per-block f32 scaling. A vector holds at most 32 int16
// (one 32-weight sub-block on AVX-512; half or a quarter of one below), so
// a sub-block's scale is one broadcast, except for the k-quants whose scales
// cover 16 weights (Q2_K, Q3_K, Q6_K), where a 32-lane vector takes two.
//
// Bounds (all int16 products fit int32 lanes): a weight times its scale is
// at most 4096 in magnitude (Q6_K: 32 x 128), x's quants at most 32767, and
// a lane sums 16 products per 256-weight block: 16 x 4096 x 32767 < 2^31.

#ifndef VERITY_KERNELS_CPU_BLOCK_DOT_SHARED_
#define VERITY_KERNELS_CPU_BLOCK_DOT_SHARED_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/half.h"
#include "kernels/cpu/block_dot.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/simd.h"
#include "base/simd_targets.h"  // before any Highway header
#endif                          // VERITY_KERNELS_CPU_BLOCK_DOT_SHARED_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/block_dot.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D16 = hn::CappedTag<int16_t, 32>;  // one 32-weight sub-block at most
using V16 = hn::Vec<D16>;
using DU8 = hn::Rebind<uint8_t, D16>;  // the quant bytes behind a V16
using VU8 = hn::Vec<DU8>;
using D32 = hn::Repartition<int32_t, D16>;
using V32 = hn::Vec<D32>;
using DF = hn::Repartition<float, D16>;
using VF = hn::Vec<DF>;
constexpr int kN = static_cast<int>(hn::MaxLanes(D16()));  // weights per emitted vector: 8, 16 or 32
// The mins' lanes (8 or 16 sub-block mins per block, 8 or fewer at a time).
using DM = hn::CappedTag<int32_t, 8>;
using VM = hn::Vec<DM>;
using DMU8 = hn::Rebind<uint8_t, DM>;
using DFM = hn::Rebind<float, DM>;
using VFM = hn::Vec<DFM>;
constexpr int kML = static_cast<int>(hn::MaxLanes(DM()));

// A block's f16 scale: F16C's conversion where the target has it (AVX2 and
// up; exact, as base/half.h's).
HWY_INLINE float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return F16ToF32(h);
#endif
}

// AVX-512 VNNI's vpdpwssd (one instruction for the pairwise multiply-add) on
// AVX3_DL. Highway 1.0.3 compiles that target without "avx512vnni" (simd_q8.cc
// VERITY_Q8_ATTR says why): every function that inlines it carries it.
#if HWY_TARGET == HWY_AVX3_DL
#define VERITY_DOT_ATTR __attribute__((target("avx512vnni")))
#else
#define VERITY_DOT_ATTR
#endif

// sum + the pairwise products of a and b (lane l: a[2l] b[2l] + a[2l+1] b[2l+1]).
VERITY_DOT_ATTR HWY_INLINE V32 MulPairsAdd(V16 a, V16 b, V32 sum) {
#if HWY_TARGET == HWY_AVX3_DL
  return V32{_mm512_dpwssd_epi32(sum.raw, a.raw, b.raw)};
#else
  const D32 d32;
  V32 unused = hn::Zero(d32);
  return hn::RearrangeToOddPlusEven(hn::ReorderWidenMulAccumulate(d32, a, b, sum, unused), unused);
#endif
}

// s + a * b rounded as the target's vector MulAdd rounds (simd-inl.h TailMulAdd):
// the mins' chain, the same in every inlined copy.
HWY_INLINE float Fma1(float a, float b, float s) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(hn::MulAdd(hn::Set(d1, a), hn::Set(d1, b), hn::Set(d1, s)));
}

HWY_INLINE V16 Widen(VU8 v) { return hn::PromoteTo(D16(), v); }
// kN quant bytes at p, one per int16 lane (a load that widens: the bit
// fields are then cut out in 16-bit lanes, with no widening per field).
HWY_INLINE V16 Bytes16(const uint8_t* p) { return Widen(hn::LoadU(DU8(), p)); }
HWY_INLINE V16 Low4(V16 v) { return hn::And(v, hn::Set(D16(), 0xF)); }
HWY_INLINE V16 Bits2(V16 v, int shift) { return hn::And(hn::ShiftRightSame(v, shift), hn::Set(D16(), 3)); }
HWY_INLINE V16 Bit(V16 v, int bit) { return hn::And(hn::ShiftRightSame(v, bit), hn::Set(D16(), 1)); }
HWY_INLINE VU8 Low4(VU8 v) { return hn::And(v, hn::Set(DU8(), 0xF)); }

// A k-quant block's sub-block scales (16, or 8 for Q4_K/Q5_K) as integers,
// for the weight vectors to take theirs from. On AVX-512 they sit in one
// register (made there from the block's bytes, without a trip through
// memory) and a vector's scales are one vpermw; elsewhere a vector covers
// one sub-block at most and its scale is a broadcast.
struct ScaleTable {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  __m512i v;  // lanes 0..15
  static HWY_INLINE ScaleTable Int8(const uint8_t* p) {
    return {_mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
  }
  static HWY_INLINE ScaleTable LowNibbles(const uint8_t* p) {
    const __m128i bytes = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(0xF));
    return {_mm512_castsi256_si512(_mm256_cvtepu8_epi16(bytes))};
  }
  static HWY_INLINE ScaleTable Bytes8(uint64_t w) {
    return {_mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(w))))};
  }
  static HWY_INLINE ScaleTable Int16(const int16_t* p) {
    return {_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  // Lane i: scale (j + i) / 16 (j a multiple of 32: two scales).
  HWY_INLINE V16 Per16(int j) const {
    const __m512i halves = _mm512_set_epi64(0x0001000100010001LL, 0x0001000100010001LL, 0x0001000100010001LL,
                                            0x0001000100010001LL, 0, 0, 0, 0);
    return V16{_mm512_permutexvar_epi16(_mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(j / 16)), halves), v)};
  }
  // Every lane: scale k.
  HWY_INLINE V16 Per32(int k) const {
    return V16{_mm512_permutexvar_epi16(_mm512_set1_epi16(static_cast<short>(k)), v)};
  }
#else
  int16_t s[16];
  static HWY_INLINE ScaleTable Int8(const uint8_t* p) {
    ScaleTable t;
    for (int i = 0; i < 16; i++) t.s[i] = static_cast<int8_t>(p[i]);
    return t;
  }
  static HWY_INLINE ScaleTable LowNibbles(const uint8_t* p) {
    ScaleTable t;
    for (int i = 0; i < 16; i++) t.s[i] = static_cast<int16_t>(p[i] & 0xF);
    return t;
  }
  static HWY_INLINE ScaleTable Bytes8(uint64_t w) {
    ScaleTable t{};
    for (int i = 0; i < 8; i++) t.s[i] = static_cast<int16_t>((w >> (8 * i)) & 0xFF);
    return t;
  }
  static HWY_INLINE ScaleTable Int16(const int16_t* p) {
    ScaleTable t;
    std::memcpy(t.s, p, sizeof(t.s));
    return t;
  }
  HWY_INLINE V16 Per16(int j) const { return hn::Set(D16(), s[j / 16]); }  // kN <= 16: one scale
  HWY_INLINE V16 Per32(int k) const { return hn::Set(D16(), s[k]); }
#endif
};

// Weights j.. of a 32-weight block whose 16 bytes hold weight l < 16 in the
// low nibble of byte l and weight l + 16 in its high nibble (Q4_0 ... Q5_1).
HWY_INLINE VU8 Nibbles32(const uint8_t* qs, int j) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kN > 16) {
    const hn::Half<DU8> dh;
    const auto v = hn::LoadU(dh, qs);
    return hn::Combine(DU8(), hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, 0xF)));
  }
#endif
  const VU8 v = hn::LoadU(DU8(), qs + j % 16);
  return j < 16 ? Low4(v) : hn::ShiftRight<4>(v);
}

// Weights j.. of a Q5_0/Q5_1 block: fifth bits from bit j.. of qh (little-endian u32).
HWY_INLINE V16 Fifth(const uint8_t* qh, int j) {
  const D16 d;
  uint8_t bits[8] = {static_cast<uint8_t>(qh[j / 8] >> (j % 8))};  // j % 8 != 0 only below 8 lanes
  if constexpr (kN >= 8) std::memcpy(bits, qh + j / 8, kN / 8);
  return hn::IfThenElseZero(hn::LoadMaskBits(d, bits), hn::Set(d, 16));
}

// ------------------------------------------------------------------ types
// Each: kElems weights in kBytes bytes; Scales Decode(block); Weights(block,
// scales, emit); and kMins, the mins per block (0, 1, 8 or 16), added as
// min_mult x the integer sum over sub-blocks of min x (the sum of x's quants
// over the sub-block): for one, the min is the block's min_mult and meets
// the sum of the block's 32 quants (AddBlock); for 8 or 16, MinVec(scales,
// block, k) gives mins k.. as int32 lanes,
// against x's sums per 32 (8) or per 16 (16).

// Types with fewer than 8 mins per block have no min vectors (never asked for).
struct NoMinVec {
  template <class S>
  static HWY_INLINE VM MinVec(const S&, const uint8_t*, int) {
    return hn::Zero(DM());
  }
};

// The 32-weight types' scales: d, and the min (Q4_1, Q5_1) or 0.
struct Scales32 {
  float d, min_mult;
};

struct Q4_0 : NoMinVec {
  static constexpr int kElems = 32, kBytes = 18;
  static constexpr int kMins = 0;
  using Scales = Scales32;
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b), 0.0f}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales&, Emit&& emit) {
    for (int j = 0; j < 32; j += kN) emit(j, hn::Sub(Widen(Nibbles32(b + 2, j)), hn::Set(D16(), 8)));
  }
};

struct Q4_1 : NoMinVec {
  static constexpr int kElems = 32, kBytes = 20;
  static constexpr int kMins = 1;
  using Scales = Scales32;
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b), Half(b + 2)}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales&, Emit&& emit) {
    for (int j = 0; j < 32; j += kN) emit(j, Widen(Nibbles32(b + 4, j)));
  }
};

struct Q5_0 : NoMinVec {
  static constexpr int kElems = 32, kBytes = 22;
  static constexpr int kMins = 0;
  using Scales = Scales32;
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b), 0.0f}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales&, Emit&& emit) {
    for (int j = 0; j < 32; j += kN)
      emit(j, hn::Sub(hn::Or(Widen(Nibbles32(b + 6, j)), Fifth(b + 2, j)), hn::Set(D16(), 16)));
  }
};

struct Q5_1 : NoMinVec {
  static constexpr int kElems = 32, kBytes = 24;
  static constexpr int kMins = 1;
  using Scales = Scales32;
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b), Half(b + 2)}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales&, Emit&& emit) {
    for (int j = 0; j < 32; j += kN) emit(j, hn::Or(Widen(Nibbles32(b + 8, j)), Fifth(b + 4, j)));
  }
};

// Q2_K: 16 scale bytes (low nibble scale, high nibble min, per 16 weights),
// 64 bytes of 2-bit quants, f16 d, f16 dmin. Weight 128h + 32s + l is bits
// 2s..2s+1 of qs[32h + l].
struct Q2_K {
  static constexpr int kElems = 256, kBytes = 84;
  static constexpr int kMins = 16;
  struct Scales {
    float d, min_mult;
    ScaleTable sc;
  };
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b + 80), -Half(b + 82), ScaleTable::LowNibbles(b)}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales& s, Emit&& emit) {
    for (int h = 0; h < 2; h++)
      for (int p = 0; p < 32; p += kN) {
        const V16 q = Bytes16(b + 16 + 32 * h + p);
        for (int sh = 0; sh < 4; sh++) {
          const int j = 128 * h + 32 * sh + p;
          emit(j, hn::Mul(Bits2(q, 2 * sh), s.sc.Per16(j)));
        }
      }
  }
  static HWY_INLINE VM MinVec(const Scales&, const uint8_t* b, int k) {
    return hn::ShiftRight<4>(hn::PromoteTo(DM(), hn::LoadU(DMU8(), b + k)));
  }
};

// Q3_K: 32 bytes hmask, 64 bytes of 2-bit quants (placed as Q2_K's), 12
// bytes of 6-bit scales (offset by 32), f16 d. Weight e's third bit is bit
// e / 32 of hmask[e % 32]; a clear bit subtracts 4.
struct Q3_K : NoMinVec {
  static constexpr int kElems = 256, kBytes = 110;
  static constexpr int kMins = 0;
  struct Scales {
    float d, min_mult;
    ScaleTable sc;
  };
  static HWY_INLINE Scales Decode(const uint8_t* b) {
    const uint8_t* sc = b + 96;
    int16_t v[16];
    for (int i = 0; i < 16; i++) {
      const int low = (i < 8 ? sc[i] : sc[i - 8] >> 4) & 0xF;
      const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
      v[i] = static_cast<int16_t>((low | (high << 4)) - 32);
    }
    return {Half(b + 108), 0.0f, ScaleTable::Int16(v)};
  }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales& s, Emit&& emit) {
    for (int h = 0; h < 2; h++)
      for (int p = 0; p < 32; p += kN) {
        const V16 q = Bytes16(b + 32 + 32 * h + p), hm = Bytes16(b + p);
        for (int sh = 0; sh < 4; sh++) {
          const int j = 128 * h + 32 * sh + p;
          const V16 v = hn::Or(Bits2(q, 2 * sh), hn::ShiftLeft<2>(Bit(hm, 4 * h + sh)));
          emit(j, hn::Mul(hn::Sub(v, hn::Set(D16(), 4)), s.sc.Per16(j)));
        }
      }
  }
};

// Q4_K and Q5_K's eight 6-bit scales and mins of 32-weight sub-blocks in 12
// bytes s, as two words of 8 bytes (byte j: sub-block j). For j < 4 the
// scale is the low 6 bits of s[j] and the min those of s[j + 4]; for j >= 4
// the scale is the low nibble of s[j + 4] under the top 2 bits of s[j - 4],
// the min its high nibble under the top 2 bits of s[j].
struct KScales {
  uint64_t scales, mins;
};
HWY_INLINE KScales DecodeKScales(const uint8_t* s) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
  return {(a & 0x3f3f3f3fu) | (static_cast<uint64_t>(sc_hi) << 32),
          (b & 0x3f3f3f3fu) | (static_cast<uint64_t>(mn_hi) << 32)};
}
// Mins k.. of a word of 8 (DecodeKScales).
HWY_INLINE VM KMinVec(uint64_t mins, int k) {
  uint8_t bytes[8];
  std::memcpy(bytes, &mins, 8);
  return hn::PromoteTo(DM(), hn::LoadU(DMU8(), bytes + k));
}

// Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles: 32-byte group
// g holds weights 64g + l (low nibbles) and 64g + 32 + l (high).
struct Q4_K {
  static constexpr int kElems = 256, kBytes = 144;
  static constexpr int kMins = 8;
  struct Scales {
    float d, min_mult;
    ScaleTable sc;
    uint64_t mins;
  };
  static HWY_INLINE Scales Decode(const uint8_t* b) {
    const KScales k = DecodeKScales(b + 4);
    return {Half(b), -Half(b + 2), ScaleTable::Bytes8(k.scales), k.mins};
  }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales& s, Emit&& emit) {
    for (int g = 0; g < 4; g++)
      for (int p = 0; p < 32; p += kN) {
        const V16 q = Bytes16(b + 16 + 32 * g + p);
        emit(64 * g + p, hn::Mul(Low4(q), s.sc.Per32(2 * g)));
        emit(64 * g + 32 + p, hn::Mul(hn::ShiftRight<4>(q), s.sc.Per32(2 * g + 1)));
      }
  }
  static HWY_INLINE VM MinVec(const Scales& s, const uint8_t*, int k) { return KMinVec(s.mins, k); }
};

// Q5_K: Q4_K with 32 bytes qh between the scales and the nibbles: weight e's
// fifth bit is bit e / 32 of qh[e % 32].
struct Q5_K {
  static constexpr int kElems = 256, kBytes = 176;
  static constexpr int kMins = 8;
  using Scales = Q4_K::Scales;
  static HWY_INLINE Scales Decode(const uint8_t* b) { return Q4_K::Decode(b); }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales& s, Emit&& emit) {
    for (int g = 0; g < 4; g++)
      for (int p = 0; p < 32; p += kN) {
        const V16 q = Bytes16(b + 48 + 32 * g + p), qh = Bytes16(b + 16 + p);
        const V16 lo = hn::Or(Low4(q), hn::ShiftLeft<4>(Bit(qh, 2 * g)));
        const V16 hi = hn::Or(hn::ShiftRight<4>(q), hn::ShiftLeft<4>(Bit(qh, 2 * g + 1)));
        emit(64 * g + p, hn::Mul(lo, s.sc.Per32(2 * g)));
        emit(64 * g + 32 + p, hn::Mul(hi, s.sc.Per32(2 * g + 1)));
      }
  }
  static HWY_INLINE VM MinVec(const Scales& s, const uint8_t*, int k) { return KMinVec(s.mins, k); }
};

// Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales
// of 16 weights, f16 d. In half h, weight 128h + 32k + l: the low (k < 2) or
// high nibble of ql[64h + 32(k % 2) + l], bits 2k..2k+1 of qh[32h + l]; less 32.
struct Q6_K : NoMinVec {
  static constexpr int kElems = 256, kBytes = 210;
  static constexpr int kMins = 0;
  struct Scales {
    float d, min_mult;
    ScaleTable sc;
  };
  static HWY_INLINE Scales Decode(const uint8_t* b) { return {Half(b + 208), 0.0f, ScaleTable::Int8(b + 192)}; }
  template <class Emit>
  static HWY_INLINE void Weights(const uint8_t* b, const Scales& s, Emit&& emit) {
    const V16 k32 = hn::Set(D16(), 32);
    for (int h = 0; h < 2; h++)
      for (int p = 0; p < 32; p += kN) {
        const V16 qa = Bytes16(b + 64 * h + p), qb = Bytes16(b + 64 * h + 32 + p);
        const V16 qh = Bytes16(b + 128 + 32 * h + p);
        const V16 v[4] = {hn::Or(Low4(qa), hn::ShiftLeft<4>(Bits2(qh, 0))),
                          hn::Or(Low4(qb), hn::ShiftLeft<4>(Bits2(qh, 2))),
                          hn::Or(hn::ShiftRight<4>(qa), hn::ShiftLeft<4>(Bits2(qh, 4))),
                          hn::Or(hn::ShiftRight<4>(qb), hn::ShiftLeft<4>(Bits2(qh, 6)))};
        for (int k = 0; k < 4; k++) {
          const int j = 128 * h + 32 * k + p;
          emit(j, hn::Mul(hn::Sub(v[k], k32), s.sc.Per16(j)));
        }
      }
  }
};

// ------------------------------------------------------------------ dots
// What a (row, vector) pair accumulates: the blocks' scaled integer sums in
// f32 lanes, the mins of types with 8 or 16 per block in f32 lanes of their
// own, and the mins of types with one per block in one f32 chain. Every
// kernel below adds to it with the same operations in the same order, so a
// (row, vector)'s result does not depend on which kernel computed it.
struct Acc {
  VF sums;
  VFM mins[8 / kML];
  float min1;
};

HWY_INLINE void Clear(Acc& a) {
  a.sums = hn::Zero(DF());
  for (VFM& m : a.mins) m = hn::Zero(DFM());
  a.min1 = 0.0f;
}

// Block b (its weights from column j0) of a row with scale d, min multiplier
// min_mult and mins `minf(k)` (mins k..k+kML times min_mult, f32 lanes),
// whose integer sums with x are `sum`. The mins meet x's scaled sums
// (BlockX::xsum16/32), so a block's mins cost one multiply-add per lane.
template <class T, class MinF>
HWY_INLINE void AddBlock(Acc& a, V32 sum, float d, float min_mult, MinF&& minf, const BlockX& x, int b, int j0,
                         int xshift) {
  const float xd = x.scale[static_cast<size_t>(b >> xshift)];
  a.sums = hn::MulAdd(hn::ConvertTo(DF(), sum), hn::Mul(hn::Set(DF(), d), hn::Set(DF(), xd)), a.sums);
  if constexpr (T::kMins == 1) {
    const int32_t* s16 = x.sum16.data() + j0 / 16;
    a.min1 = Fma1(min_mult * xd, static_cast<float>(s16[0] + s16[1]), a.min1);
  }
  if constexpr (T::kMins >= 8) {
    const float* xs = T::kMins == 8 ? x.xsum32.data() + j0 / 32 : x.xsum16.data() + j0 / 16;
    for (int k = 0; k < T::kMins; k += kML) {
      VFM& m = a.mins[(k % 8) / kML];
      m = hn::MulAdd(minf(k), hn::LoadU(DFM(), xs + k), m);
    }
  }
}

// Mins k.. of a block times its min multiplier, as AddBlock takes them.
template <class T>
HWY_INLINE VFM ScaledMins(const typename T::Scales& s, const uint8_t* blk, int k) {
  return hn::Mul(hn::ConvertTo(DFM(), T::MinVec(s, blk, k)), hn::Set(DFM(), s.min_mult));
}

// The lanes of a row's accumulators, summed in one fixed tree whatever the
// kernel: halves added down to 4 lanes (the mins' lanes added there), then
// (l0 + l2) + (l1 + l3); Finish4 does 4 rows at once with the same
// additions, so a row's result does not depend on how many were finished
// with it. A row of a few blocks is short, so its reduction's latency shows:
// 4 rows share one.
using D4 = hn::CappedTag<float, 4>;
using V4 = hn::Vec<D4>;

template <class D>
HWY_INLINE V4 To4(D d, hn::Vec<D> v) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return To4(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    return v;
  }
#else
  (void)d;
  return v;
#endif
}

template <class T>
HWY_INLINE V4 Lanes4(const Acc& a) {
  V4 v = To4(DF(), a.sums);
  if constexpr (T::kMins >= 8) {
    VFM m = a.mins[0];
    for (int k = 1; k < 8 / kML; k++) m = hn::Add(m, a.mins[k]);
    v = hn::Add(v, To4(DFM(), m));
  }
  return v;
}

HWY_INLINE float Result(float lanes, const Acc& a, const BlockX& x) {
  return x.finite ? lanes + a.min1 : std::numeric_limits<float>::quiet_NaN();
}

template <class T>
HWY_INLINE float Finish(const Acc& a, const BlockX& x) {
  const V4 v = Lanes4<T>(a);
#if HWY_TARGET != HWY_SCALAR
  const V4 s = hn::Add(v, hn::Shuffle1032(v));  // l0 + l2, l1 + l3
  return Result(hn::GetLane(s) + hn::GetLane(hn::Shuffle2301(s)), a, x);
#else
  return Result(hn::GetLane(v), a, x);
#endif
}

// Rows a[0..3] (each against its x[r]) into out[0..3]: Finish's additions.
template <class T>
HWY_INLINE void Finish4(const Acc* a, const BlockX* const* x, float* out) {
#if HWY_TARGET != HWY_SCALAR
  const D4 d4;
  const hn::Repartition<uint64_t, D4> d64;
  const V4 r0 = Lanes4<T>(a[0]), r1 = Lanes4<T>(a[1]), r2 = Lanes4<T>(a[2]), r3 = Lanes4<T>(a[3]);
  // (a0 + a2, b0 + b2, a1 + a3, b1 + b3), and the same for rows 2 and 3.
  const V4 s01 = hn::Add(hn::InterleaveLower(d4, r0, r1), hn::InterleaveUpper(d4, r0, r1));
  const V4 s23 = hn::Add(hn::InterleaveLower(d4, r2, r3), hn::InterleaveUpper(d4, r2, r3));
  const V4 lo = hn::BitCast(d4, hn::InterleaveLower(d64, hn::BitCast(d64, s01), hn::BitCast(d64, s23)));
  const V4 hi = hn::BitCast(d4, hn::InterleaveUpper(d64, hn::BitCast(d64, s01), hn::BitCast(d64, s23)));
  alignas(16) float lanes[4];
  hn::Store(hn::Add(lo, hi), d4, lanes);
  for (int r = 0; r < 4; r++) out[r] = Result(lanes[r], a[r], *x[r]);
#else
  for (int r = 0; r < 4; r++) out[r] = Finish<T>(a[r], *x[r]);
#endif
}

// x's scale of block b is scale[b >> XShift]: x has one per 256 values (a
// k-quant block, or 8 blocks of a 32-weight type) or one per 32.
template <class T>
HWY_INLINE int XShift(const BlockX& x) {
  return x.block == T::kElems ? 0 : 3;
}

// One row's accumulators against x, its blocks unpacked as they are read
// (decode).
template <class T>
VERITY_DOT_ATTR HWY_INLINE void DotRow(const uint8_t* row, const BlockX& x, Acc& acc) {
  const D16 d16;
  const D32 d32;
  const int nb = x.cols / T::kElems, xshift = XShift<T>(x);
  const int16_t* xq = x.q.data();
  Clear(acc);
  for (int b = 0; b < nb; b++) {
    const uint8_t* blk = row + static_cast<size_t>(b) * T::kBytes;
    const int j0 = b * T::kElems;
    const typename T::Scales s = T::Decode(blk);
    // Two chains of integer sums (alternate weight vectors), so the
    // multiply-adds of a block do not wait on each other as much.
    V32 sum[2] = {hn::Zero(d32), hn::Zero(d32)};
    T::Weights(blk, s, [&](int j, V16 w) VERITY_DOT_ATTR HWY_ATTR {
      const int k = (j / kN) & 1;
      sum[k] = MulPairsAdd(w, hn::LoadU(d16, xq + j0 + j), sum[k]);
    });
    AddBlock<T>(
        acc, hn::Add(sum[0], sum[1]), s.d, s.min_mult, [&](auto k) HWY_ATTR { return ScaledMins<T>(s, blk, k); }, x, b,
        j0, xshift);
  }
}

template <class T>
VERITY_DOT_ATTR void MatVecT(const uint8_t* w, const BlockX& x, float* out, int row_begin, int row_end) {
  const size_t row_bytes = static_cast<size_t>(x.cols / T::kElems) * T::kBytes;
  const StreamPrefetchHint prefetch = StreamPrefetch();
  const BlockX* xs[4] = {&x, &x, &x, &x};
  int i = row_begin;
  for (; i + 4 <= row_end; i += 4) {
    Acc acc[4];
    for (int r = 0; r < 4; r++) {
      const uint8_t* row = w + static_cast<size_t>(i + r) * row_bytes;
      PrefetchRowAhead(prefetch, row, row_bytes);
      DotRow<T>(row, x, acc[r]);
    }
    Finish4<T>(acc, xs, out + i);
  }
  for (; i < row_end; i++) {
    const uint8_t* row = w + static_cast<size_t>(i) * row_bytes;
    PrefetchRowAhead(prefetch, row, row_bytes);
    Acc acc;
    DotRow<T>(row, x, acc);
    out[i] = Finish<T>(acc, x);
  }
}

// Prefill: rows unpacked once into this thread's scratch, as DotRow's
// emits see them (int16 times their sub-block's scale, in column order),
// with each block's d, min multiplier and mins; then multiplied with many
// vectors from L1/L2, R rows x TT vectors at a time, every weight and x
// vector loaded once for the tile. The integer sums per block are exact and
// everything after them is AddBlock and Finish, so each output is DotRow's.
template <class T>
struct UnpackedRows {
  int nb = 0, cols = 0;
  std::vector<int16_t> w;      // rows x cols
  std::vector<float> d, mult;  // rows x nb
  std::vector<float> mins;     // rows x nb x kMins (kMins >= 8): ScaledMins
  const int16_t* W(int r) const { return w.data() + static_cast<size_t>(r) * cols; }
  float D(int r, int b) const { return d[static_cast<size_t>(r) * nb + b]; }
  float Mult(int r, int b) const { return mult[static_cast<size_t>(r) * nb + b]; }
  float* Mins(int r, int b) { return mins.data() + (static_cast<size_t>(r) * nb + b) * T::kMins; }
  const float* Mins(int r, int b) const { return mins.data() + (static_cast<size_t>(r) * nb + b) * T::kMins; }
};

template <class T>
VERITY_DOT_ATTR void Unpack(const uint8_t* w, size_t row_bytes, int first, int rows, int cols, UnpackedRows<T>* u) {
  u->nb = cols / T::kElems;
  u->cols = cols;
  u->w.resize(static_cast<size_t>(rows) * cols);
  u->d.resize(static_cast<size_t>(rows) * u->nb);
  u->mult.resize(u->d.size());
  u->mins.resize(u->d.size() * (T::kMins >= 8 ? T::kMins : 0));
  for (int r = 0; r < rows; r++) {
    const uint8_t* row = w + static_cast<size_t>(first + r) * row_bytes;
    int16_t* out = u->w.data() + static_cast<size_t>(r) * cols;
    for (int b = 0; b < u->nb; b++) {
      const uint8_t* blk = row + static_cast<size_t>(b) * T::kBytes;
      const int j0 = b * T::kElems;
      const typename T::Scales s = T::Decode(blk);
      u->d[static_cast<size_t>(r) * u->nb + b] = s.d;
      u->mult[static_cast<size_t>(r) * u->nb + b] = s.min_mult;
      T::Weights(blk, s, [&](int j, V16 v) HWY_ATTR { hn::StoreU(v, D16(), out + j0 + j); });
      if constexpr (T::kMins >= 8)
        for (int k = 0; k < T::kMins; k += kML) hn::StoreU(ScaledMins<T>(s, blk, k), DFM(), u->Mins(r, b) + k);
    }
  }
}

template <class T, int R, int TT>
VERITY_DOT_ATTR HWY_INLINE void DotUnpacked(const UnpackedRows<T>& u, int r0, const BlockX* const* xs, float* out,
                                            size_t ld, int row, int t0) {
  const D16 d16;
  const D32 d32;
  const int xshift = XShift<T>(*xs[0]);
  Acc acc[R][TT];
  for (auto& ar : acc)
    for (Acc& a : ar) Clear(a);
  const int16_t* w[R];
  for (int r = 0; r < R; r++) w[r] = u.W(r0 + r);
  for (int b = 0; b < u.nb; b++) {
    const int j0 = b * T::kElems;
    V32 sum[R][TT];
    for (auto& sr : sum)
      for (V32& v : sr) v = hn::Zero(d32);
#pragma GCC unroll 8
    for (int j = j0; j < j0 + T::kElems; j += kN) {
      V16 xv[TT];
      for (int t = 0; t < TT; t++) xv[t] = hn::LoadU(d16, xs[t]->q.data() + j);
      for (int r = 0; r < R; r++) {
        const V16 wv = hn::LoadU(d16, w[r] + j);
        for (int t = 0; t < TT; t++) sum[r][t] = MulPairsAdd(wv, xv[t], sum[r][t]);
      }
    }
    for (int r = 0; r < R; r++) {
      const float* mins = T::kMins >= 8 ? u.Mins(r0 + r, b) : nullptr;
      for (int t = 0; t < TT; t++)
        AddBlock<T>(
            acc[r][t], sum[r][t], u.D(r0 + r, b), u.Mult(r0 + r, b),
            [&](int k) HWY_ATTR { return hn::LoadU(DFM(), mins + k); }, *xs[t], b, j0, xshift);
    }
  }
  for (int t = 0; t < TT; t++) {
    if constexpr (R == 4) {
      const Acc rows[4] = {acc[0][t], acc[1][t], acc[2][t], acc[3][t]};
      const BlockX* x4[4] = {xs[t], xs[t], xs[t], xs[t]};
      Finish4<T>(rows, x4, out + (t0 + t) * ld + row);
    } else {
      for (int r = 0; r < R; r++) out[(t0 + t) * ld + row + r] = Finish<T>(acc[r][t], *xs[t]);
    }
  }
}

// Register tiles: 4 rows x 2 vectors where there are 32 vector registers, 2 x 2 below.
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_NEON
constexpr int kTileRows = 4;
#else
constexpr int kTileRows = 2;
#endif
constexpr int kTileVectors = 2;

template <class T, int R>
VERITY_DOT_ATTR HWY_INLINE void TileRows(const UnpackedRows<T>& u, int r0, const BlockX* x, int t0, int t1, float* out,
                                         size_t ld, int row) {
  int t = t0;
  for (; t + kTileVectors <= t1; t += kTileVectors) {
    const BlockX* xs[kTileVectors] = {&x[t], &x[t + 1]};
    DotUnpacked<T, R, kTileVectors>(u, r0, xs, out, ld, row, t);
  }
  for (; t < t1; t++) {
    const BlockX* xs[1] = {&x[t]};
    DotUnpacked<T, R, 1>(u, r0, xs, out, ld, row, t);
  }
}

// Up to 128 vectors per pass (their quants, 2 bytes a value: 512 KB for
// rows of 2048, which stay in L2), the rows unpacked kTileRows at a time per
// pass (at 64 a pass, unpacking was 6% of a 512-token prefill).
template <class T>
VERITY_DOT_ATTR void MatMulT(const uint8_t* w, const BlockX* x, float* out, int T_, int ld_out, int row_begin,
                             int row_end) {
  if (T_ == 0) return;
  constexpr int kTokenBlock = 128;
  const int cols = x[0].cols;
  const size_t row_bytes = static_cast<size_t>(cols / T::kElems) * T::kBytes, ld = static_cast<size_t>(ld_out);
  thread_local UnpackedRows<T> u;
  for (int t0 = 0; t0 < T_; t0 += kTokenBlock) {
    const int t1 = std::min(T_, t0 + kTokenBlock);
    for (int i = row_begin; i < row_end; i += kTileRows) {
      const int rows = std::min(kTileRows, row_end - i);
      Unpack<T>(w, row_bytes, i, rows, cols, &u);
      if (rows == kTileRows) {
        TileRows<T, kTileRows>(u, 0, x, t0, t1, out, ld, i);
      } else {
        for (int r = 0; r < rows; r++) TileRows<T, 1>(u, r, x, t0, t1, out, ld, i + r);
      }
    }
  }
}

// Calls f.template operator()<Type>() for the ggml type id; false if none.
template <class F>
HWY_INLINE bool ForType(uint32_t type, F&& f) {
  switch (type) {
    case 2: f(Q4_0{}); return true;
    case 3: f(Q4_1{}); return true;
    case 6: f(Q5_0{}); return true;
    case 7: f(Q5_1{}); return true;
    case 10: f(Q2_K{}); return true;
    case 11: f(Q3_K{}); return true;
    case 12: f(Q4_K{}); return true;
    case 13: f(Q5_K{}); return true;
    case 14: f(Q6_K{}); return true;
    default: return false;
  }
}

VERITY_DOT_ATTR void MatVecBlockImpl(uint32_t type, const uint8_t* w, const BlockX& x, float* out, int row_begin,
                                     int row_end) {
  ForType(type, [&](auto t) VERITY_DOT_ATTR { MatVecT<decltype(t)>(w, x, out, row_begin, row_end); });
}
VERITY_DOT_ATTR void MatMulBlockImpl(uint32_t type, const uint8_t* w, const BlockX* x, float* out, int T, int ld_out,
                                     int row_begin, int row_end) {
  ForType(type, [&](auto t) VERITY_DOT_ATTR { MatMulT<decltype(t)>(w, x, out, T, ld_out, row_begin, row_end); });
}

// x to int16 per block: scale = max|x| / 32767, q = round(x * (32767 / max|x|))
// to nearest even. Returns false when x holds NaN or infinity.
bool QuantizeBlockXImpl(const float* x, int cols, int block, int16_t* q, float* scale) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int16_t, decltype(d)> di16;
  const size_t N = hn::Lanes(d);
  for (int b = 0; b < cols / block; b++) {
    const float* v = x + static_cast<size_t>(b) * block;
    auto m = hn::Zero(d);
    size_t k = 0;
    for (; k + N <= static_cast<size_t>(block); k += N) m = hn::Max(m, hn::Abs(hn::LoadU(d, v + k)));
    float amax = hn::GetLane(hn::MaxOfLanes(d, m));
    for (; k < static_cast<size_t>(block); k++) amax = std::max(amax, std::fabs(v[k]));
    for (int i = 0; i < block; i++)  // Max may drop a NaN; check every value
      if (!std::isfinite(v[i])) return false;
    scale[b] = amax / 32767.0f;
    const float inv = amax == 0.0f ? 0.0f : 32767.0f / amax;
    int16_t* out = q + static_cast<size_t>(b) * block;
    for (k = 0; k + N <= static_cast<size_t>(block); k += N) {
      hn::StoreU(hn::DemoteTo(di16, hn::NearestInt(hn::Mul(hn::LoadU(d, v + k), hn::Set(d, inv)))), di16, out + k);
    }
    for (; k < static_cast<size_t>(block); k++) out[k] = static_cast<int16_t>(std::nearbyint(v[k] * inv));
  }
  return true;
}

// The sums of each 16 and 32 quants, and those times their block's scale
// (plain loops: compiled per target, so vectorized where it can be).
void BlockXSumsImpl(const int16_t* q, const float* scale, int cols, int block, int32_t* sum16, int32_t* sum32,
                    float* xsum16, float* xsum32) {
  for (int i = 0; i < cols / 16; i++) {
    int32_t s = 0;
    for (int k = 0; k < 16; k++) s += q[16 * i + k];
    sum16[i] = s;
    xsum16[i] = scale[16 * i / block] * static_cast<float>(s);
  }
  for (int i = 0; i < cols / 32; i++) {
    sum32[i] = sum16[2 * i] + sum16[2 * i + 1];
    xsum32[i] = scale[32 * i / block] * static_cast<float>(sum32[i]);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(MatVecBlockImpl);
HWY_EXPORT(MatMulBlockImpl);
HWY_EXPORT(QuantizeBlockXImpl);
HWY_EXPORT(BlockXSumsImpl);

bool HasBlockKernel(uint32_t ggml_type) {
  switch (ggml_type) {
    case 2:
    case 3:
    case 6:
    case 7:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14: return true;
    default: return false;
  }
}

void QuantizeBlockX(const float* x, int cols, BlockX* out) {
  out->cols = cols;
  out->block = cols % 256 == 0 ? 256 : 32;
  out->q.resize(static_cast<size_t>(cols));
  out->scale.resize(static_cast<size_t>(cols / out->block));
  out->sum16.resize(static_cast<size_t>(cols / 16));
  out->sum32.resize(static_cast<size_t>(cols / 32));
  out->xsum16.resize(out->sum16.size());
  out->xsum32.resize(out->sum32.size());
  out->finite = HWY_DYNAMIC_DISPATCH(QuantizeBlockXImpl)(x, cols, out->block, out->q.data(), out->scale.data());
  if (!out->finite) return;
  HWY_DYNAMIC_DISPATCH(BlockXSumsImpl)
  (out->q.data(), out->scale.data(), cols, out->block, out->sum16.data(), out->sum32.data(), out->xsum16.data(),
   out->xsum32.data());
}

void MatVecBlock(uint32_t ggml_type, const uint8_t* w, const BlockX& x, float* out, int row_begin, int row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecBlockImpl)(ggml_type, w, x, out, row_begin, row_end);
}

void MatMulBlock(uint32_t ggml_type, const uint8_t* w, const BlockX* x, float* out, int T, int ld_out, int row_begin,
                 int row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulBlockImpl)(ggml_type, w, x, out, T, ld_out, row_begin, row_end);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
