// llama.cpp's block quantizations as data: each type's block layout, the
// checks a tensor of it must pass, and a scalar reference dequantization to
// f32. Written from the published block layouts (ggml-common.h's block_q*);
// bit-exact to gguf-py's NumPy dequantizers (tests/quants_test.cc). No
// kernels: the engine's fast paths are elsewhere.
//
// Types are ggml type ids (gguf::TensorType numbering). A block's scales are
// IEEE halves, converted exactly (F16ToF32); a weight is then a product of
// f32 values (exact) less or plus a min, in llama.cpp's dequantize_row_* order.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace verity::quants {

// ggml type ids of the block types this file reads.
enum BlockType : uint32_t {
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
};

struct Layout {
  uint32_t type;        // ggml type id
  const char* name;     // "Q4_K"
  int64_t block_elems;  // weights per block: 32, or 256 for a k-quant (QK_K)
  int64_t block_bytes;  // bytes per block
  // A row (a tensor's innermost dimension) must be a multiple of this: the
  // block, since blocks never straddle rows.
  int64_t row_multiple;
};

// The layout of a block type dequantized here; nullptr for any other type
// (F32, F16, BF16, the I-quants, TQ*, MXFP4, unknown ids).
[[nodiscard]] const Layout* FindLayout(uint32_t type);

// Why `type` is not read, for a type with no layout here: "an I-quant",
// "a ternary type", "MXFP4 (4-bit floats)", "not a block quantization";
// empty for a type FindLayout knows.
[[nodiscard]] std::string RefusalReason(uint32_t type);

// Checks a tensor of `type` before its data is trusted: a layout exists
// (otherwise the type is refused by name), the row length is a multiple of
// the block, and `bytes` is rows x blocks-per-row x block bytes. `where`
// ("FILE: tensor T") begins every error.
[[nodiscard]] Status CheckTensor(uint32_t type, uint64_t row_length, uint64_t rows, uint64_t bytes,
                                 const std::string& where);

// Checks every block's f16 scales (d, and dmin where the type has one) are
// finite, as llama.cpp's ggml_validate_row_data does: a NaN or infinite scale
// poisons its block's weights. The error names the block and the value.
[[nodiscard]] Status CheckScales(uint32_t type, const unsigned char* data, int64_t n_blocks, const std::string& where);

// Dequantizes `n_blocks` consecutive blocks of `type` at `data` into
// n_blocks x block_elems floats at `out`. Errors: no layout for `type`.
[[nodiscard]] Status Dequantize(uint32_t type, const unsigned char* data, int64_t n_blocks, float* out,
                                const std::string& where);

}  // namespace verity::quants
