// Products with llama.cpp's block-quantized weights (Q4_0, Q4_1, Q5_0, Q5_1
// and the k-quants Q2_K ... Q6_K) read where they lie: each block's quants
// are unpacked in registers, multiplied by their sub-block's integer scale
// and dotted with x on integers, never written out as f32 (docs/dtypes.md,
// "Block quantizations on the CPU"). Highway, every target the dispatch
// supports, like simd.h; the layouts are formats/quants.h's (ggml-common.h's
// block_q*), which the tests hold these kernels to.
//
// x is quantized once per product (BlockX): int16 per block of 256 values
// (32 when cols is not a multiple of 256), scale = max|x| / 32767. llama.cpp
// rounds x to int8 (Q8_K, Q8_0/Q8_1) for these products; int16 keeps x's
// rounding 258 times finer, so the fast path's distance from the reference
// path is the weights' business, not the activations' (the parity cost of
// each choice, per type, is in docs/dtypes.md).
//
// Arithmetic: within a block every product of integers is summed exactly in
// int32 lanes, each lane's sum is converted to f32 and scaled once per block
// (the block's d times x's scale) into f32 lanes; the mins (Q4_1, Q5_1,
// Q2_K, Q4_K, Q5_K) are each sub-block's min times its block's min scale
// times the sum of x's quants over it times x's scale, in f32 lanes of their
// own (one f32 chain per row for the one-min types). The lanes are summed at
// the end of the row, so results depend on the target's
// vector width (float rounding); for one target, MatMulBlock's output for a
// (row, vector) is bit for bit MatVecBlock's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace verity::kernels::simd {

// True for the ggml type ids (GGUF numbering: Q4_0 = 2, Q4_1 = 3, Q5_0 = 6,
// Q5_1 = 7, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14) these
// kernels read. Q8_0 has its own (simd.h, in a repacked layout).
bool HasBlockKernel(uint32_t ggml_type);

// x quantized for the block kernels, once per product and shared by every
// row and thread.
struct BlockX {
  int cols = 0;
  int block = 0;                      // values per x scale: 256, or 32 when cols % 256 != 0
  bool finite = true;                 // false: x held NaN or infinity (every product is NaN)
  std::vector<int16_t> q;             // cols values, column order
  std::vector<float> scale;           // per block of `block` values: max|x| / 32767
  std::vector<int32_t> sum16;         // per 16 values: the sum of their q (the mins' term)
  std::vector<int32_t> sum32;         // per 32 values: the same
  std::vector<float> xsum16, xsum32;  // those sums times their block's scale
};
// cols % 32 == 0.
void QuantizeBlockX(const float* x, int cols, BlockX* out);

// Matrix-vector over rows [row_begin, row_end) of a [rows x x.cols] matrix of
// `ggml_type` blocks (row after row, each row cols / block_elems blocks as
// the file holds them): out[i] = the dot of row i with x. No alignment is
// required. HasBlockKernel(ggml_type) must hold, and x.cols must be a multiple
// of the type's block (256 for the k-quants).
void MatVecBlock(uint32_t ggml_type, const uint8_t* w, const BlockX& x, float* out, int row_begin, int row_end);

// The same for T vectors (prefill, or a decode step of T sequences): out is
// row-major [T x ld_out] and out[t * ld_out + i] is bit for bit what
// MatVecBlock writes for x[t]. Each row is read from memory once per 64
// vectors and unpacked once per 4.
void MatMulBlock(uint32_t ggml_type, const uint8_t* w, const BlockX* x, float* out, int T, int ld_out, int row_begin,
                 int row_end);

}  // namespace verity::kernels::simd
