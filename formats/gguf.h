// GGUF, the file format of llama.cpp and the local-LLM ecosystem: a strict
// reader (versions 2 and 3) over bytes the caller has mapped, a streaming
// writer (version 3), and the `tokenizer.ggml.*` vocabulary as plain data.
// Pure parsing, no model semantics (engine/gguf_model.cc maps a llama GGUF to
// a Model), so it can be fuzzed on its own. Spec:
// https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//
// Layout: "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count
// key/value pairs (key string, u32 value type, value); tensor_count tensor
// infos (name, u32 n_dims, u64 dims[n_dims] innermost first, u32 ggml type,
// u64 offset into the data section); padding to `general.alignment` (default
// 32); the data section. Strings are u64 length + bytes (no terminator).
// Everything little-endian.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;          // GGML_MAX_DIMS
inline constexpr int kMaxArrayNesting = 8;  // arrays of arrays deeper than this are refused

// Metadata value types (gguf_type).
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// "UINT32", "STRING", ...; "type N" for an unknown one.
std::string ValueTypeName(uint32_t type);

// A metadata value. Integers (and bool) are held in `i` (signed types) or `u`
// (unsigned types and bool), floats in `f`, strings in `s`; an array's
// element type is `array_type` and its elements `items`.
struct Value {
  ValueType type = ValueType::kUint32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  ValueType array_type = ValueType::kUint32;
  std::vector<Value> items;

  static Value Uint32(uint32_t v);
  static Value Int32(int32_t v);
  static Value Uint64(uint64_t v);
  static Value Float32(float v);
  static Value Bool(bool v);
  static Value String(std::string v);
  static Value Array(ValueType element_type, std::vector<Value> items);
  // Returns true iff the value is an integer type (signed or unsigned, not bool).
  bool is_integer() const;
};

// ggml tensor types by id (the ones verity names; any id in TypeTraits is parsed).
enum TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// "F32", "Q4_K", ...; "type N" for an id this reader does not know.
std::string TensorTypeName(uint32_t type);
// Elements per block and bytes per block of a ggml type; false iff unknown.
bool TypeTraits(uint32_t type, int64_t* block_elems, int64_t* block_bytes);

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] is the innermost (a matrix's columns)
  uint32_t type = kF32;
  uint64_t offset = 0;  // within the data section (a multiple of the alignment)
  uint64_t bytes = 0;   // the tensor's size in the file
  uint64_t elements() const;
};

struct File {
  uint32_t version = 0;
  std::vector<std::pair<std::string, Value>> metadata;  // file order
  std::map<std::string, size_t> index;                  // key -> position in metadata
  std::vector<TensorInfo> tensors;                      // file order
  std::map<std::string, size_t> tensor_index;           // name -> position in tensors
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_start = 0;  // absolute offset of the data section (aligned)

  // Returns the value of `key`, or nullptr iff absent.
  const Value* Find(const std::string& key) const;
  const TensorInfo* FindTensor(const std::string& name) const;
};

// Parses `size` bytes of a whole GGUF file. `what` (the file) begins every
// error, which also names the key or tensor. Checks: magic, version 2 or 3,
// counts and lengths against the bytes left, value types, array nesting,
// duplicate keys and tensor names, `general.alignment` (UINT32, a power of
// two), n_dims <= 4, element counts without overflow, known tensor types
// with whole blocks per row, every tensor's data aligned, inside the file
// and not overlapping another's.
Result<File> Parse(const unsigned char* data, size_t size, const std::string& what);

// Typed reads of `file`'s metadata for loaders; errors name `what` and the
// key, and say when it is missing or of the wrong type.
Result<std::string> GetString(const File& file, const std::string& key, const std::string& what);
// Any integer type; must lie in [min, max].
Result<int64_t> GetInt(const File& file, const std::string& key, int64_t min, int64_t max, const std::string& what);
// FLOAT32 or FLOAT64.
Result<double> GetFloat(const File& file, const std::string& key, const std::string& what);

// The vocabulary a GGUF file carries in `tokenizer.ggml.*`, as data.
struct Vocab {
  std::string model;                 // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...
  std::string pre;                   // tokenizer.ggml.pre (pre-tokenizer name), "" when absent
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, by id
  std::vector<float> scores;         // tokenizer.ggml.scores (empty when absent)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (empty when absent): 1 normal,
                                     // 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b"; empty when absent)
  int bos = -1, eos = -1, unk = -1, pad = -1;  // *_token_id, -1 when absent
  std::optional<bool> add_bos, add_eos;        // tokenizer.ggml.add_{bos,eos}_token
};
// tokenizer.ggml.model of a model without a vocabulary, as llama.cpp's own
// converter writes it (gguf-py's NoVocab) and its loader accepts ("none" too).
inline constexpr const char* kNoVocab = "no_vocab";
// Reads `tokenizer.ggml.*`: nullopt iff tokenizer.ggml.model is absent. With
// "no_vocab" or "none", only `model` is set (as llama.cpp, nothing else is
// read). With another model, tokens are required; scores and token_type, when
// present, must have one entry per token; special ids must be tokens.
Result<std::optional<Vocab>> ReadVocab(const File& file, const std::string& what);

// A tensor to write: its bytes come from the writer's callback, in order.
struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order, innermost first
  uint32_t type = kF32;
};

// Writes a version 3 GGUF file: `metadata` in order (add `general.alignment`
// yourself to use another alignment than 32), the tensor infos with offsets
// packed in order and aligned, then each tensor's bytes from `bytes(i, out)`,
// which must produce exactly the size its dims and type imply.
Status Write(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
             const std::vector<TensorSpec>& tensors,
             const std::function<Status(size_t index, std::string* out)>& bytes);

}  // namespace verity::gguf
