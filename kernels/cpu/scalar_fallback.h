// Temporary scalar stand-ins for kernels/cpu/simd.h (the SIMD library being
// written alongside): the same functions with the same signatures and
// contracts, in plain loops, under their own namespace so both can be linked
// while the switch happens. Removed once simd.h's implementation is committed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace verity::kernels::fallback {

inline constexpr int kQ8Block = 32;
struct BlockQ8_0 {
  float scale;
  int8_t q[kQ8Block];
};
static_assert(sizeof(BlockQ8_0) == 36);

void MatVecF32(const float* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecBF16(const uint16_t* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatVecQ8_0(const BlockQ8_0* w, const float* x, float* out, int cols, int row_begin, int row_end);
void MatMulF32(const float* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
               int row_end);
void MatMulBF16(const uint16_t* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end);
void MatMulQ8_0(const BlockQ8_0* w, const float* x, float* out, int T, int cols, int ld_out, int row_begin,
                int row_end);
uint16_t F32ToBF16(float v);
float BF16ToF32(uint16_t v);
void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n);
void BF16ToF32Array(const uint16_t* src, float* dst, size_t n);
void QuantizeQ8_0(const float* src, BlockQ8_0* dst, size_t n);
void DequantizeQ8_0(const BlockQ8_0* src, float* dst, size_t n);
const char* TargetName();

}  // namespace verity::kernels::fallback
