// Per-element arithmetic of the CUDA kernels, written once as __host__
// __device__ functions: kernels.cu calls them on the device, and
// tests/cuda_elementwise_test.cc calls the same code on the CPU and compares
// it with the reference path (kernels/cpu/common.cc, reference.cc, simd.cc).
//
// Products and sums that the CPU rounds separately go through Mul/Add/Sub,
// which on the device are the round-to-nearest intrinsics nvcc never fuses
// into an FMA, so a rotation or a scale rounds exactly as on the CPU. The
// transcendental functions (expf, sqrtf) are the platform's: bit-exact with
// the CPU on the host; on the device sqrtf and division are IEEE-rounded
// (nvcc's default -prec-sqrt/-prec-div) and expf is within CUDA's 2-ulp bound.
//
// Plain C++17 without CUDA headers when compiled by the host compiler.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define VERITY_HD __host__ __device__ __forceinline__
#else
#define VERITY_HD inline
#endif

namespace verity::kernels::cuda::ew {

VERITY_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
VERITY_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
VERITY_HD float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

VERITY_HD float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}
VERITY_HD uint32_t FloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

// bf16 (the top 16 bits of an f32) to f32: exact.
VERITY_HD float BF16ToF32(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// f32 to bf16, round to nearest even; a NaN stays a (quiet) NaN, +-inf stays.
VERITY_HD uint16_t F32ToBF16(float v) {
  uint32_t bits = FloatToBits(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Weight j (0..31) of one 36-byte q8_0 block (f32 scale, then 32 int8): scale * q[j], exact.
VERITY_HD float Q8_0Weight(const unsigned char* block, int j) {
  float scale;
#if defined(__CUDA_ARCH__)
  scale = *reinterpret_cast<const float*>(block);  // device rows are 4-byte aligned (36-byte blocks, cudaMalloc base)
#else
  std::memcpy(&scale, block, sizeof scale);
#endif
  return Mul(scale, static_cast<float>(static_cast<int8_t>(block[4 + j])));
}

// SwiGLU gate for one unit: silu(h) * h2, silu(h) = h * (1 / (1 + e^-h)), as run.c.
VERITY_HD float SwiGLU(float h, float h2) {
  const float gate = Mul(h, 1.0f / Add(1.0f, expf(-h)));
  return Mul(gate, h2);
}

// GeGLU gate for one unit (Gemma): gelu_tanh(h) * h2, in GeGLUReference's
// order of operations (kernels/cpu/common.cc), tanhf the platform's.
VERITY_HD float GeGLU(float h, float h2) {
  const float beta = 0.7978845608028654f, kappa = 0.044715f;
  const float inner = Mul(beta, Add(h, Mul(kappa, Mul(Mul(h, h), h))));
  return Mul(Mul(Mul(0.5f, h), Add(1.0f, tanhf(inner))), h2);
}

// Gemma 2's soft-cap of one score or logit: cap * tanh(s / cap), as
// kernels::SoftCap.
VERITY_HD float SoftCap(float s, float cap) { return Mul(cap, tanhf(s / cap)); }

// The scores' divisor, as AttentionArgs::score_divisor(): sqrt of Gemma's
// query_pre_attn_scalar where given (scale_dim > 0), else of head_size.
VERITY_HD float ScoreDivisor(float scale_dim, int head_size) {
  return sqrtf(scale_dim > 0.0f ? scale_dim : static_cast<float>(head_size));
}

// An attention score as every CPU attention takes it (AttentionArgs): the
// product q.k divided by the score divisor (sqrt of head_size or of Gemma's
// query_pre_attn_scalar), then soft-capped where softcap > 0.
VERITY_HD float AttentionScore(float dot, float divisor, float softcap) {
  const float s = dot / divisor;
  return softcap > 0.0f ? SoftCap(s, softcap) : s;
}

// The first position a query at `pos` attends to: pos - window + 1 under a
// sliding window that reaches past 0, else 0 (AttentionArgs::first()).
VERITY_HD int64_t FirstAttended(int64_t pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

// A prefill block's attention as two batched products over every query head
// (the backend's GemmAttention): head h's matrices as float offsets from the
// block's q rows (and its output rows: the same columns), the K and V caches
// (its KV head h / group's columns) and the scores ([heads][T][n]: tn = T x n
// floats a head).
struct AttentionHeadOffsets {
  int64_t q, kv, scores;
};
VERITY_HD AttentionHeadOffsets AttentionHeadAt(int h, int group, int head_size, int64_t tn) {
  return {int64_t{h} * head_size, int64_t{h / group} * head_size, int64_t{h} * tn};
}

// Inverse frequency of pair i of a head: 1 / theta^(2i / head_size), as run.c.
// The unscaled table as kernels::RopeBaseInverseFrequencies computes it (the backend is handed the model's table).
inline float RopeInvFreq(int i, int head_size, float theta) {
  return 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
}

// Rotates one pair (v0, v1) by the angle whose cosine and sine are fcr, fci.
VERITY_HD void RopePair(float* v0, float* v1, float fcr, float fci) {
  const float a = *v0, b = *v1;
  *v0 = Sub(Mul(a, fcr), Mul(b, fci));
  *v1 = Add(Mul(a, fci), Mul(b, fcr));
}

// Index of the two members of pair i (0 <= i < head_size/2) in the head starting at `base`:
// adjacent (2i, 2i+1) when interleaved, else halves (i, i + head_size/2).
VERITY_HD void RopePairIndex(int base, int i, int head_size, bool interleaved, int* a, int* b) {
  *a = interleaved ? base + 2 * i : base + i;
  *b = interleaved ? *a + 1 : *a + head_size / 2;
}

// 1 / sqrt(mean of squares + eps) from the sum of squares of `size` values, as run.c.
VERITY_HD float RmsnormScale(float sum_sq, int size, float eps) {
  float ss = sum_sq / static_cast<float>(size);
  ss = Add(ss, eps);
  return 1.0f / sqrtf(ss);
}
// One normalized value: weight * (scale * x), as run.c.
VERITY_HD float RmsnormApply(float x, float weight, float scale) { return Mul(weight, Mul(scale, x)); }

// The running state of a softmax-weighted sum over scores seen one tile at a
// time: m is the largest score so far, s the sum of e^(score - m).
struct OnlineSoftmax {
  float m = -INFINITY;
  float s = 0.0f;
};
// Folds in a tile whose largest score is tile_max. Returns the factor by which
// everything accumulated so far (s included, already applied) is rescaled;
// the caller then adds e^(score - state.m) per score of the tile.
VERITY_HD float OnlineSoftmaxRescale(OnlineSoftmax* st, float tile_max) {
  const float m_new = st->m > tile_max ? st->m : tile_max;
  const float factor = st->m == -INFINITY ? 0.0f : expf(Sub(st->m, m_new));
  st->s = Mul(st->s, factor);
  st->m = m_new;
  return factor;
}
// The weight of one score under the current state, before the final division by s.
VERITY_HD float OnlineSoftmaxWeight(const OnlineSoftmax& st, float score) { return expf(Sub(score, st.m)); }

// Split decode attention (kernels.cu). A lane of the warp on one position
// holds head values LaneValue(r, lane, i, vec) for r < nv, i < vec: one r is
// the warp's consecutive run of 32 * vec values (a coalesced load).
VERITY_HD int LaneValue(int r, int lane, int i, int vec) { return (r * 32 + lane) * vec + i; }
// Value i of a head's output from its chunks' softmax partials, folded in
// chunk order 0, 1, ... (a fixed order: the same bits whichever block runs
// it). Partial c sits at base + c * (hs + 2): the chunk's max score m_c, its
// sum of weights s_c = sum e^(score - m_c), then its hs weighted values
// acc_c. out_i = sum_c acc_c[i] e^(m_c - M) / sum_c s_c e^(m_c - M), M = max m_c.
// `load` reads one float (on the device: from L2, past any stale L1 line).
template <class Load>
VERITY_HD float CombineChunks(const float* base, int64_t chunks, int hs, int i, Load load) {
  float mx = -INFINITY;
  for (int64_t c = 0; c < chunks; c++) {
    const float m = load(base + c * (hs + 2));
    mx = mx > m ? mx : m;
  }
  float total = 0.0f, o = 0.0f;
  for (int64_t c = 0; c < chunks; c++) {
    const float* p = base + c * (hs + 2);
    const float f = expf(Sub(load(p), mx));
    total += load(p + 1) * f;
    o += load(p + 2 + i) * f;
  }
  return o / total;
}

// Returns true iff (value b at index ib) beats (value a at index ia) for an
// argmax: larger, or equal at a lower index (std::max_element's first maximum).
VERITY_HD bool ArgmaxBeats(float b, int ib, float a, int ia) { return b > a || (b == a && ib < ia); }

// Mixtral routing of one token: the k largest of n router logits, ordered by
// value (ties: the lower index first), and their softmax weights
// e^(l - l_max) / sum over the k; the arithmetic of engine/forward.cc.
// O(n*k), no scratch: each pick is the best of those after the previous pick.
VERITY_HD void MoeTopK(const float* logits, int n, int k, int* chosen, float* weights) {
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int e = 0; e < n; e++) {
      if (j > 0) {  // only experts ranked after the previous pick
        const int prev = chosen[j - 1];
        if (!(logits[e] < logits[prev] || (logits[e] == logits[prev] && e > prev))) continue;
      }
      if (best < 0 || ArgmaxBeats(logits[e], e, logits[best], best)) best = e;
    }
    chosen[j] = best;
  }
  const float mx = logits[chosen[0]];
  float sum = 0.0f;
  for (int j = 0; j < k; j++) sum = Add(sum, expf(Sub(logits[chosen[j]], mx)));
  for (int j = 0; j < k; j++) weights[j] = expf(Sub(logits[chosen[j]], mx)) / sum;
}

}  // namespace verity::kernels::cuda::ew
