// SIMD kernels for the fast CPU path: matrix-vector (decode) and matrix-matrix
// (prefill) products over f32, bf16 and q8_0 weights, and the weight
// conversions done at load. Pure functions (no state, no threads: callers split
// rows over their pool), written once with Google Highway and compiled for
// AVX-512 with VNNI ("AVX3_DL"), AVX-512 ("AVX3"), AVX2/FMA, SSE4 and scalar on
// x86 (NEON and scalar on Arm;
// the scalable SVE/RVV targets are left out); the best one this CPU runs is
// chosen at the first call (HWY_DYNAMIC_DISPATCH).
//
// Rounding: every f32 and bf16 kernel sums in f32 with its own lane order, so
// results agree with a plain scalar loop to float rounding (relative ~1e-6 *
// sqrt(cols)), not bit for bit, and may differ between instruction sets.
// MatMul* agrees with the MatVec* of the same dtype to the same tolerance.
// q8_0 quantizes x too (QuantizedX): its block sums are exact integers on
// every instruction set and their scaled f32 sum runs in one fixed order, so
// q8_0 returns the same bits on every target, and MatMul equals MatVec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace verity::kernels::simd {

// Q8_0: each row is split into blocks of 32 weights, each block one f32 scale
// and 32 int8 (36 bytes). Weight j of a block is scale * q[j].
inline constexpr int kQ8Block = 32;
struct BlockQ8_0 {
  float scale;
  int8_t q[kQ8Block];
};
static_assert(sizeof(BlockQ8_0) == 36);

// How a q8_0 row of `cols` weights (nb = cols / 32 blocks) sits in memory, so
// that the dot product runs on integers with one lane per block: the first
// nb / 8 * 8 blocks in groups of 8, each group the 8 scales (32 bytes) and then
// its 256 int8 interleaved 4 at a time (step k = 0..7 holds q[4k..4k+3] of
// block 0, then of block 1, ... of block 7); the remaining nb % 8 blocks as
// plain BlockQ8_0. 288 bytes per group = 8 blocks of 36: the size of a row is
// that of nb plain blocks, and rows stay independent (row slices are views).
inline constexpr int kQ8Group = 8;
// Writes the nb = cols / 32 blocks as one row in that layout.
void PackRowQ8_0(const BlockQ8_0* blocks, int cols, uint8_t* row);
// The inverse: the row's blocks, in column order.
void UnpackRowQ8_0(const uint8_t* row, int cols, BlockQ8_0* blocks);

// Activations for the q8_0 kernels: x rounded to int16 per block of 32
// (scale = max|x| / 32767), laid out like a weight row, once per product and
// shared by every row and thread. A q8_0 dot product is then an exact int32
// sum per block, scaled by weight scale * x scale and summed in f32. x's
// rounding is at most 1/65534 of its block's largest value, far below the
// weights' 1/254 (int8 activations flipped near-tie argmaxes on stories260K).
struct QuantizedX {
  int cols = 0;
  bool finite = true;        // false: x held NaN or infinity (every product is NaN)
  std::vector<int16_t> q;    // laid out as PackRowQ8_0 lays out int8 (scales left out)
  std::vector<float> scale;  // per block, in column order
};
// cols % 32 == 0.
void QuantizeX(const float* x, int cols, QuantizedX* out);

// Matrix-vector over rows [row_begin, row_end) of a row-major [rows x cols]
// matrix: out[i] = sum_j W[i][j] * x[j] (only out[row_begin..row_end) is
// written). No alignment is required of any pointer. For q8_0, w holds rows of
// cols / 32 * 36 bytes in the layout above and x is quantized (QuantizedX,
// x.cols = cols): out[i] = sum_b ws_b * xs_b * (sum_k wq_k * xq_k).
void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecQ8_0(const uint8_t* w, const QuantizedX& x, float* out, int row_begin, int row_end);

// Matrix-matrix for a block of T input vectors (prefill): x is row-major
// [T x cols], out is row-major [T x ld_out] and rows [row_begin, row_end) of
// each output vector are written: out[t*ld_out + i] = sum_j W[i][j] * x[t*cols + j].
// Cache-blocked: a tile of weight rows is loaded (and for bf16 converted to
// f32) once per block of up to 64 vectors, then multiplied against them from
// cache. Agrees with MatVec* of the same dtype per vector to float rounding.
void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin, int row_end);
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin, int row_end);
// q8_0: the T vectors quantized (x[t] for t < T); each output is exactly what
// MatVecQ8_0 computes for that vector (the same per-row function).
void MatMulQ8_0(const uint8_t* w, const QuantizedX* x, float* out, int T, int ld_out, int row_begin, int row_end);

// Matrix-vector for n independent vectors at once (a decode step of several
// sequences): x is row-major [n x cols], out row-major [n x ld_out], and
// out[t*ld_out + i] for rows [row_begin, row_end) is bit for bit what MatVec*
// of the same dtype writes for vector t (for q8_0, x[t] quantized). Each
// weight row is read from memory once for all n vectors.
void MatRowsF32(const float* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin, int row_end);
void MatRowsBF16(const uint16_t* w, const float* x, int n, float* out, int cols, int ld_out, int row_begin,
                 int row_end);
void MatRowsQ8_0(const uint8_t* w, const QuantizedX* x, int n, float* out, int ld_out, int row_begin, int row_end);

// Attention for the `group` query heads that share one KV head (grouped-query
// attention; group 1 for multi-head), in the fast backend's AttendGroupFast.
// Each cached key and value is read once for the whole group; per head the
// result does not depend on the group size.
//
// scores[g * scores_stride + t] = (q[g] . keys[t * stride .. + n)) / divisor
// for g < group and t < count, where q[g] = q + g * n: each dot in 4
// independent vector accumulators, so the order differs from a plain loop
// (float rounding only).
// (AttentionArgs::score_divisor: sqrtf(n) unless Gemma's scale says otherwise)
void AttentionScores(const float* q, int group, const float* keys, long stride, int n, int count, float* scores,
                     long scores_stride, float divisor);
// x[i] = exp(x[i] - max) for i < count, vectorized (Highway's Exp: within a
// few ulp of expf); returns `extra` + the sum of the new x[i] in lane order.
float ExpShiftedSum(float* x, int count, float max, float extra);

// Gemma's transcendental steps, vectorized (Highway's Tanh: within a few
// ulp of tanhf; the reference backend keeps tanhf). x[i] = cap * tanh(x[i] /
// cap) for i < count: a soft cap (SoftCap in kernels.h).
void SoftCapRow(float* x, int count, float cap);
// hb[i] = gelu_tanh(hb[i]) * up[i] for i < n (GeGLUReference's formula).
void GeGLURow(float* hb, const float* up, int n);

// The largest of x[0..count), count >= 1.
float MaxOf(const float* x, int count);
// x[i] /= d for i < count, a vector at a time (the same bits as the scalar loop:
// division is exactly rounded either way).
void DivideBy(float* x, int count, float d);
// out[g * n + i] = sum over t < count of w[g * w_stride + t] * values[t * stride + i],
// for g < group and i < n: the outputs held in vector registers across every t
// (each output summed in t order, as a plain loop, with fused multiply-adds).
void WeightedSum(const float* w, long w_stride, int group, const float* values, long stride, int n, int count,
                 float* out);

// Conversions used when weights are converted at load.
uint16_t F32ToBF16(float v);  // round to nearest, ties to even; NaN stays NaN (quiet), +-inf stays
float BF16ToF32(uint16_t v);  // exact
void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n);  // F32ToBF16 per element
void BF16ToF32Array(const uint16_t* src, float* dst, size_t n);    // BF16ToF32 per element
// n % 32 == 0, into plain blocks. Per block: scale = max|v| / 127, q = v / scale rounded to nearest
// (ties to even), so |v - scale*q| <= scale/2 (+ f32 rounding); an all-zero
// block has scale 0. Inputs must be finite.
void QuantizeQ8_0(const float* src, BlockQ8_0* dst, size_t n);
void DequantizeQ8_0(const BlockQ8_0* src, float* dst, size_t n);  // n % 32 == 0: dst = scale * q
// One row: QuantizeQ8_0 then PackRowQ8_0; and back (exact).
void QuantizeRowQ8_0(const float* src, int cols, uint8_t* row);
void DequantizeRowQ8_0(const uint8_t* row, int cols, float* dst);

// How bf16 and q8_0 matrix-vector products prefetch their weight rows ahead of
// their loads: non-temporally 8 KB ahead (AMD Zen 5 and older), prefetcht0 1 KB
// ahead (AMD family 19h: Zen 3; Zen 4 shares the family, unmeasured), or not
// at all (Intel, Arm), unless VERITY_STREAM_PREFETCH=nta|t0|off says
// otherwise (kernels/cpu/prefetch.h says what was measured). Decided once per process; it changes speed, never results.
enum class StreamPrefetchHint { kOff, kNonTemporal, kT0 };
StreamPrefetchHint StreamPrefetch();
bool StreamPrefetchOn();  // StreamPrefetch() != kOff
// "nta", "t0" or "off": VERITY_STREAM_PREFETCH's names.
const char* StreamPrefetchName(StreamPrefetchHint h);

// The instruction set the dispatcher chose on this CPU ("AVX3", "AVX2", "SSE4",
// "NEON", "SCALAR"/"EMU128"): Highway's name for the target.
const char* TargetName();

// The instruction sets this binary holds kernels for that this CPU can run,
// under VERITY_SIMD_TARGET's cap, best first (e.g. {"AVX3", "AVX2", "SSE4",
// "EMU128"}). The cap is applied before main(): with VERITY_SIMD_TARGET=AVX2
// no kernel of any binary dispatches above AVX2. A name this build does not
// hold allows only the most basic target, and CapError says so.
std::vector<std::string> AvailableTargets();
// "" or, when VERITY_SIMD_TARGET names no target of this build, the error
// naming it and the valid ones (`verity` exits 2 with it; the fast backend
// refuses to be made).
std::string CapError();
// VERITY_SIMD_TARGET as given ("" when unset).
std::string TargetCap();
// Makes every later call dispatch to the named target (one of
// AvailableTargets()); "" restores the best under the cap. Returns false, changing nothing,
// for a name not available. Not for use while other threads call kernels.
bool ForceTargetForTest(const std::string& name);

}  // namespace verity::kernels::simd
