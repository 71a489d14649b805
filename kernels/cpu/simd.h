// SIMD kernels for the fast CPU path: matrix-vector (decode) and matrix-matrix
// (prefill) products over f32, bf16 and q8_0 weights, and the weight
// conversions done at load. Pure functions (no state, no threads: callers split
// rows over their pool), written once with Google Highway and compiled for
// AVX-512 ("AVX3"), AVX2/FMA, SSE4 and scalar on x86 (NEON and scalar on Arm;
// the scalable SVE/RVV targets are left out); the best one this CPU runs is
// chosen at the first call (HWY_DYNAMIC_DISPATCH).
//
// Rounding: every kernel sums in f32 with its own lane order, so results agree
// with a plain scalar loop to float rounding (relative ~1e-6 * sqrt(cols)), not
// bit for bit, and may differ between instruction sets. MatMul* agrees with the
// MatVec* of the same dtype to the same tolerance (both dequantize weights to
// f32 exactly; neither quantizes x).
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

// Matrix-vector over rows [row_begin, row_end) of a row-major [rows x cols]
// matrix: out[i] = sum_j W[i][j] * x[j] (only out[row_begin..row_end) is
// written). For Q8, cols % 32 == 0 and row i starts at block i*cols/32.
// No alignment is required of any pointer.
void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecQ8_0(const BlockQ8_0* w, const float* x, float* out, int cols, int row_begin, int row_end);

// Matrix-matrix for a block of T input vectors (prefill): x is row-major
// [T x cols], out is row-major [T x ld_out] and rows [row_begin, row_end) of
// each output vector are written: out[t*ld_out + i] = sum_j W[i][j] * x[t*cols + j].
// Cache-blocked: a tile of weight rows is loaded (and for bf16/q8 converted to
// f32) once per block of up to 64 vectors, then multiplied against them from
// cache. Agrees with MatVec* of the same dtype per vector to float rounding.
void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
               int row_end);
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end);
void MatMulQ8_0(const BlockQ8_0* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end);

// Conversions used when weights are converted at load.
uint16_t F32ToBF16(float v);  // round to nearest, ties to even; NaN stays NaN (quiet), +-inf stays
float BF16ToF32(uint16_t v);  // exact
void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n);  // F32ToBF16 per element
void BF16ToF32Array(const uint16_t* src, float* dst, size_t n);    // BF16ToF32 per element
// n % 32 == 0. Per block: scale = max|v| / 127, q = v / scale rounded to nearest
// (ties to even), so |v - scale*q| <= scale/2 (+ f32 rounding); an all-zero
// block has scale 0. Inputs must be finite.
void QuantizeQ8_0(const float* src, BlockQ8_0* dst, size_t n);
void DequantizeQ8_0(const BlockQ8_0* src, float* dst, size_t n);  // n % 32 == 0: dst = scale * q

// Reads every byte of data once with the widest loads and returns a checksum
// (so the reads cannot be elided): the read-bandwidth probe of a roofline.
uint64_t StreamRead(const void* data, size_t bytes);

// The instruction set the dispatcher chose on this CPU ("AVX3", "AVX2", "SSE4",
// "NEON", "SCALAR"/"EMU128"): Highway's name for the target.
const char* TargetName();

// For tests and benchmarks. The instruction sets this binary holds kernels for
// that this CPU can run, best first (e.g. {"AVX3", "AVX2", "SSE4", "SCALAR"}).
std::vector<std::string> AvailableTargets();
// Makes every later call dispatch to the named target (one of
// AvailableTargets()); "" restores the best. Returns false, changing nothing,
// for a name not available. Not for use while other threads call kernels.
bool ForceTargetForTest(const std::string& name);

}  // namespace verity::kernels::simd
