// Strict readers for Hugging Face checkpoint files: safetensors headers and
// model.safetensors.index.json. Pure parsing (no model semantics), so they can
// be fuzzed on their own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/status.h"

namespace verity {

// kQ8_0 is GGUF's (ggml's) Q8_0, never found in safetensors: blocks of 32
// weights, each an f16 scale then 32 int8 (34 bytes).
enum class TensorDType { kF32, kF16, kBF16, kQ8_0 };
// Bytes per element (kQ8_0: per block of 32; see StoredRowBytes).
int TensorDTypeSize(TensorDType t);
// Bytes of `cols` consecutive elements (cols % 32 == 0 for kQ8_0).
size_t StoredRowBytes(TensorDType t, int64_t cols);
inline constexpr int kGgufQ8_0BlockBytes = 34;
const char* TensorDTypeName(TensorDType t);

struct TensorEntry {
  TensorDType dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  uint64_t header_len = 0;
  int64_t data_start = 0;  // 8 + header_len
  int64_t data_size = 0;   // sum of tensor byte sizes (= end of the last range)
  std::map<std::string, TensorEntry> tensors;
};

// Upper bound on the JSON header (a larger length is corrupt, not a big model).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Parses the 8-byte length and JSON header in `prefix` (the file's first
// bytes, at least 8 + header_len). `what` names the file in every error.
// Checks: length bound, JSON object, known dtypes, shapes non-negative, byte
// count = prod(shape) x dtype size, ranges contiguous from 0 without gaps or overlaps.
Result<SafetensorsHeader> ParseSafetensorsHeader(const std::string& prefix, const std::string& what);

// Reads and parses a safetensors file's header; also checks the data section
// fits the file exactly (no truncation, no trailing bytes).
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  bool has_total_size = false;
  int64_t total_size = 0;
};

// Parses model.safetensors.index.json text. Shard names must be plain file names.
Result<SafetensorsIndex> ParseSafetensorsIndex(const std::string& text, const std::string& what);

// "[64x32]": a shape as messages print it.
std::string ShapeString(const std::vector<int64_t>& shape);

// Converts `count` elements of `dtype` at `src` to f32 (exact for every
// type; count % 32 == 0 for kQ8_0).
void ToF32(TensorDType dtype, const unsigned char* src, int64_t count, float* dst);
// f32 -> bf16 (round to nearest even), as the converter writes it.
uint16_t F32ToBF16(float f);
// IEEE half <-> f32: F16ToF32 is base/half.h's; F32ToF16 rounds to nearest even (overflow to infinity).
uint16_t F32ToF16(float f);

}  // namespace verity
