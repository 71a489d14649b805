// GGUF reader and writer. The reader trusts nothing: every count is checked
// against the bytes that remain before anything is reserved, so a lying
// header is a named error, never an allocation of its claimed size.
#include "formats/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace verity::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Size in bytes of a scalar value type; 0 for string, array and unknown.
uint64_t ScalarSize(uint32_t t) {
  switch (static_cast<ValueType>(t)) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    default: return 0;
  }
}

// Reads little-endian fields from [p, end); each read checks the bytes left.
class Reader {
 public:
  Reader(const unsigned char* data, size_t size, std::string what)
      : base_(data), p_(data), end_(data + size), what_(std::move(what)) {}

  uint64_t left() const { return static_cast<uint64_t>(end_ - p_); }
  uint64_t pos() const { return static_cast<uint64_t>(p_ - base_); }
  const std::string& what() const { return what_; }

  // Fails naming `field` when fewer than n bytes are left.
  Status Need(uint64_t n, const std::string& field) const {
    if (n > left())
      return Status::Error(what_ + ": truncated: " + field + " needs " + std::to_string(n) + " bytes at offset " +
                           std::to_string(pos()) + ", " + std::to_string(left()) + " left");
    return OkStatus();
  }
  template <class T>
  Result<T> Read(const std::string& field) {
    VERITY_RETURN_IF_ERROR(Need(sizeof(T), field));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  Result<std::string> String(const std::string& field) {
    VERITY_ASSIGN_OR_RETURN(uint64_t n, Read<uint64_t>(field + " length"));
    VERITY_RETURN_IF_ERROR(Need(n, field + " (" + std::to_string(n) + " bytes)"));
    std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return s;
  }

 private:
  const unsigned char* base_;
  const unsigned char* p_;
  const unsigned char* end_;
  std::string what_;
};

Result<Value> ReadValue(Reader& r, uint32_t type, const std::string& key, int depth);

Result<Value> ReadScalar(Reader& r, ValueType t, const std::string& key) {
  Value v;
  v.type = t;
  const std::string field = "value of " + key;
  switch (t) {
    case ValueType::kUint8: {
      VERITY_ASSIGN_OR_RETURN(v.u, r.Read<uint8_t>(field));
      break;
    }
    case ValueType::kInt8: {
      VERITY_ASSIGN_OR_RETURN(v.i, r.Read<int8_t>(field));
      break;
    }
    case ValueType::kUint16: {
      VERITY_ASSIGN_OR_RETURN(v.u, r.Read<uint16_t>(field));
      break;
    }
    case ValueType::kInt16: {
      VERITY_ASSIGN_OR_RETURN(v.i, r.Read<int16_t>(field));
      break;
    }
    case ValueType::kUint32: {
      VERITY_ASSIGN_OR_RETURN(v.u, r.Read<uint32_t>(field));
      break;
    }
    case ValueType::kInt32: {
      VERITY_ASSIGN_OR_RETURN(v.i, r.Read<int32_t>(field));
      break;
    }
    case ValueType::kUint64: {
      VERITY_ASSIGN_OR_RETURN(v.u, r.Read<uint64_t>(field));
      break;
    }
    case ValueType::kInt64: {
      VERITY_ASSIGN_OR_RETURN(v.i, r.Read<int64_t>(field));
      break;
    }
    case ValueType::kFloat32: {
      VERITY_ASSIGN_OR_RETURN(v.f, r.Read<float>(field));
      break;
    }
    case ValueType::kFloat64: {
      VERITY_ASSIGN_OR_RETURN(v.f, r.Read<double>(field));
      break;
    }
    case ValueType::kBool: {
      VERITY_ASSIGN_OR_RETURN(uint8_t b, r.Read<uint8_t>(field));
      if (b > 1)
        return Status::Error(r.what() + ": key " + key + ": BOOL value " + std::to_string(b) + " is not 0 or 1");
      v.u = b;
      break;
    }
    case ValueType::kString: {
      VERITY_ASSIGN_OR_RETURN(v.s, r.String(field));
      break;
    }
    default:
      return Status::Error(r.what() + ": key " + key + ": unknown value type " +
                           std::to_string(static_cast<uint32_t>(t)));
  }
  return v;
}

Result<Value> ReadArray(Reader& r, const std::string& key, int depth) {
  if (depth >= kMaxArrayNesting)
    return Status::Error(r.what() + ": key " + key + ": arrays nested deeper than " + std::to_string(kMaxArrayNesting));
  VERITY_ASSIGN_OR_RETURN(uint32_t et, r.Read<uint32_t>("array type of " + key));
  if (et > static_cast<uint32_t>(ValueType::kFloat64))
    return Status::Error(r.what() + ": key " + key + ": unknown array element type " + std::to_string(et));
  VERITY_ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>("array length of " + key));
  // Every element takes at least this many bytes: a lying count fails here.
  const uint64_t min_elem = ScalarSize(et) ? ScalarSize(et) : et == static_cast<uint32_t>(ValueType::kString) ? 8 : 12;
  if (n > r.left() / min_elem)
    return Status::Error(r.what() + ": key " + key + ": array of " + std::to_string(n) + " " + ValueTypeName(et) +
                         " elements needs at least " +
                         (n > UINT64_MAX / min_elem ? std::string("more") : std::to_string(n * min_elem)) + " bytes, " +
                         std::to_string(r.left()) + " left");
  Value v;
  v.type = ValueType::kArray;
  v.array_type = static_cast<ValueType>(et);
  v.items.reserve(static_cast<size_t>(n));
  for (uint64_t k = 0; k < n; k++) {
    VERITY_ASSIGN_OR_RETURN(Value e, ReadValue(r, et, key + "[" + std::to_string(k) + "]", depth + 1));
    v.items.push_back(std::move(e));
  }
  return v;
}

Result<Value> ReadValue(Reader& r, uint32_t type, const std::string& key, int depth) {
  if (type == static_cast<uint32_t>(ValueType::kArray)) return ReadArray(r, key, depth);
  if (type > static_cast<uint32_t>(ValueType::kFloat64))
    return Status::Error(r.what() + ": key " + key + ": unknown value type " + std::to_string(type));
  return ReadScalar(r, static_cast<ValueType>(type), key);
}

// a * b, or false on overflow.
bool MulOk(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

Status ReadTensorInfo(Reader& r, uint64_t k, TensorInfo* t) {
  const std::string field = "tensor info " + std::to_string(k);
  VERITY_ASSIGN_OR_RETURN(t->name, r.String(field + " name"));
  const std::string at = r.what() + ": tensor " + t->name;
  VERITY_ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>("n_dims of tensor " + t->name));
  if (n_dims > static_cast<uint32_t>(kMaxDims))
    return Status::Error(at + ": n_dims " + std::to_string(n_dims) + " exceeds " + std::to_string(kMaxDims));
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; d++) {
    VERITY_ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>("dims of tensor " + t->name));
    // ggml holds dimensions as int64_t, and so must their product.
    if (n > static_cast<uint64_t>(INT64_MAX) || !MulOk(elements, n, &elements) ||
        elements > static_cast<uint64_t>(INT64_MAX))
      return Status::Error(at + ": element count overflows (dimension " + std::to_string(d) + " is " +
                           std::to_string(n) + ")");
    t->dims.push_back(n);
  }
  VERITY_ASSIGN_OR_RETURN(t->type, r.Read<uint32_t>("type of tensor " + t->name));
  VERITY_ASSIGN_OR_RETURN(t->offset, r.Read<uint64_t>("offset of tensor " + t->name));
  int64_t block = 0, block_bytes = 0;
  if (!TypeTraits(t->type, &block, &block_bytes))
    return Status::Error(at + ": unknown tensor type " + std::to_string(t->type));
  const uint64_t row = t->dims.empty() ? 1 : t->dims[0];
  if (row % static_cast<uint64_t>(block) != 0)
    return Status::Error(at + ": type " + TensorTypeName(t->type) + " stores blocks of " + std::to_string(block) +
                         " but the innermost dimension is " + std::to_string(row));
  if (!MulOk(elements / static_cast<uint64_t>(block), static_cast<uint64_t>(block_bytes), &t->bytes))
    return Status::Error(at + ": byte size overflows");
  return OkStatus();
}

// The data section: every tensor aligned, inside the file, no two overlapping.
Status CheckTensorData(const File& f, uint64_t file_size, const std::string& what) {
  std::vector<const TensorInfo*> order;
  for (const auto& t : f.tensors) {
    const std::string at = what + ": tensor " + t.name;
    if (t.offset % f.alignment != 0)
      return Status::Error(at + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                           std::to_string(f.alignment));
    const uint64_t room = file_size - f.data_start;  // data_start <= file_size when tensors exist
    if (t.offset > room || t.bytes > room - t.offset)
      return Status::Error(at + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                           ") runs past the end of the file (data section holds " + std::to_string(room) + " bytes)");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < order.size(); k++)
    if (order[k]->offset < order[k - 1]->offset + order[k - 1]->bytes)
      return Status::Error(what + ": tensors " + order[k - 1]->name + " and " + order[k]->name + " overlap");
  return OkStatus();
}

}  // namespace

std::string ValueTypeName(uint32_t type) {
  static const char* names[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  return type < 13 ? names[type] : "type " + std::to_string(type);
}

Value Value::Uint32(uint32_t v) {
  Value x;
  x.type = ValueType::kUint32;
  x.u = v;
  return x;
}
Value Value::Int32(int32_t v) {
  Value x;
  x.type = ValueType::kInt32;
  x.i = v;
  return x;
}
Value Value::Uint64(uint64_t v) {
  Value x;
  x.type = ValueType::kUint64;
  x.u = v;
  return x;
}
Value Value::Float32(float v) {
  Value x;
  x.type = ValueType::kFloat32;
  x.f = v;
  return x;
}
Value Value::Bool(bool v) {
  Value x;
  x.type = ValueType::kBool;
  x.u = v;
  return x;
}
Value Value::String(std::string v) {
  Value x;
  x.type = ValueType::kString;
  x.s = std::move(v);
  return x;
}
Value Value::Array(ValueType element_type, std::vector<Value> items) {
  Value x;
  x.type = ValueType::kArray;
  x.array_type = element_type;
  x.items = std::move(items);
  return x;
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64: return true;
    default: return false;
  }
}

bool TypeTraits(uint32_t type, int64_t* block_elems, int64_t* block_bytes) {
  // ggml's type table (ggml.h enum ggml_type; block structs in ggml-common.h).
  struct T {
    uint32_t id;
    int64_t elems, bytes;
  };
  static const T table[] = {
      {0, 1, 4},      {1, 1, 2},     {2, 32, 18},    {3, 32, 20},    {6, 32, 22},    {7, 32, 24},    {8, 32, 34},
      {9, 32, 36},    {10, 256, 84}, {11, 256, 110}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292},
      {16, 256, 66},  {17, 256, 74}, {18, 256, 98},  {19, 256, 50},  {20, 32, 18},   {21, 256, 110}, {22, 256, 82},
      {23, 256, 136}, {24, 1, 1},    {25, 1, 2},     {26, 1, 4},     {27, 1, 8},     {28, 1, 8},     {29, 256, 56},
      {30, 1, 2},     {34, 256, 54}, {35, 256, 66},  {39, 32, 17}};
  for (const T& t : table)
    if (t.id == type) {
      *block_elems = t.elems;
      *block_bytes = t.bytes;
      return true;
    }
  return false;
}

std::string TensorTypeName(uint32_t type) {
  static const std::map<uint32_t, const char*> names = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},   {6, "Q5_0"},    {7, "Q5_1"},   {8, "Q8_0"},
      {9, "Q8_1"},     {10, "Q2_K"},   {11, "Q3_K"},    {12, "Q4_K"},  {13, "Q5_K"},   {14, "Q6_K"},  {15, "Q8_K"},
      {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"}, {22, "IQ2_S"},
      {23, "IQ4_XS"},  {24, "I8"},     {25, "I16"},     {26, "I32"},   {27, "I64"},    {28, "F64"},   {29, "IQ1_M"},
      {30, "BF16"},    {34, "TQ1_0"},  {35, "TQ2_0"},   {39, "MXFP4"}};
  auto it = names.find(type);
  return it != names.end() ? it->second : "type " + std::to_string(type);
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // checked for overflow when parsed
  return n;
}

const Value* File::Find(const std::string& key) const {
  auto it = index.find(key);
  return it == index.end() ? nullptr : &metadata[it->second].second;
}

const TensorInfo* File::FindTensor(const std::string& name) const {
  auto it = tensor_index.find(name);
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

Result<File> Parse(const unsigned char* data, size_t size, const std::string& what) {
  Reader r(data, size, what);
  if (size < 4) return Status::Error(what + ": truncated header: " + std::to_string(size) + " bytes, not a GGUF file");
  VERITY_ASSIGN_OR_RETURN(uint32_t magic, r.Read<uint32_t>("magic"));
  if (magic != kMagic) {
    std::string got;
    for (int k = 0; k < 4; k++) {
      const unsigned char c = data[k];
      char buf[8];
      std::snprintf(buf, sizeof buf, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
      got += buf;
    }
    return Status::Error(what + ": bad magic \"" + got + "\": not a GGUF file (expected \"GGUF\")");
  }
  File f;
  VERITY_ASSIGN_OR_RETURN(f.version, r.Read<uint32_t>("version"));
  if (f.version == 1)
    return Status::Error(what + ": GGUF version 1 is not supported (32-bit counts; only versions 2 and 3 are read)");
  if (f.version != 2 && f.version != 3)
    return Status::Error(what + ": GGUF version " + std::to_string(f.version) +
                         " is not supported (only 2 and 3; a big-endian file reads as a huge version)");
  VERITY_ASSIGN_OR_RETURN(uint64_t n_tensors, r.Read<uint64_t>("tensor_count"));
  VERITY_ASSIGN_OR_RETURN(uint64_t n_kv, r.Read<uint64_t>("metadata_kv_count"));
  // A key/value takes >= 13 bytes (length, type, one byte); a tensor info >= 24.
  if (n_kv > r.left() / 13)
    return Status::Error(what + ": metadata_kv_count " + std::to_string(n_kv) + " cannot fit in the " +
                         std::to_string(r.left()) + " bytes left");
  if (n_tensors > r.left() / 24)
    return Status::Error(what + ": tensor_count " + std::to_string(n_tensors) + " cannot fit in the " +
                         std::to_string(r.left()) + " bytes left");
  for (uint64_t k = 0; k < n_kv; k++) {
    VERITY_ASSIGN_OR_RETURN(std::string key, r.String("key " + std::to_string(k)));
    VERITY_ASSIGN_OR_RETURN(uint32_t type, r.Read<uint32_t>("value type of " + key));
    VERITY_ASSIGN_OR_RETURN(Value v, ReadValue(r, type, key, 0));
    if (f.index.count(key)) return Status::Error(what + ": duplicate key " + key);
    f.index[key] = f.metadata.size();
    f.metadata.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = f.Find("general.alignment")) {
    if (a->type != ValueType::kUint32)
      return Status::Error(what + ": key general.alignment must be UINT32, got " +
                           ValueTypeName(static_cast<uint32_t>(a->type)));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      return Status::Error(what + ": key general.alignment is " + std::to_string(a->u) + ", not a power of two");
    f.alignment = static_cast<uint32_t>(a->u);
  }
  for (uint64_t k = 0; k < n_tensors; k++) {
    TensorInfo t;
    VERITY_RETURN_IF_ERROR(ReadTensorInfo(r, k, &t));
    if (f.tensor_index.count(t.name)) return Status::Error(what + ": duplicate tensor " + t.name);
    f.tensor_index[t.name] = f.tensors.size();
    f.tensors.push_back(std::move(t));
  }
  const uint64_t end = r.pos();
  f.data_start = (end + f.alignment - 1) / f.alignment * f.alignment;  // end < 2^63: no overflow
  if (!f.tensors.empty()) {
    if (f.data_start > size)
      return Status::Error(what + ": truncated: the data section would start at " + std::to_string(f.data_start) +
                           ", past the end of the file (" + std::to_string(size) + " bytes)");
    VERITY_RETURN_IF_ERROR(CheckTensorData(f, size, what));
  }
  return f;
}

Result<std::string> GetString(const File& file, const std::string& key, const std::string& what) {
  const Value* v = file.Find(key);
  if (!v) return Status::Error(what + ": required key " + key + " is missing");
  if (v->type != ValueType::kString)
    return Status::Error(what + ": key " + key + " must be a STRING, got " +
                         ValueTypeName(static_cast<uint32_t>(v->type)));
  return v->s;
}

Result<int64_t> GetInt(const File& file, const std::string& key, int64_t min, int64_t max, const std::string& what) {
  const Value* v = file.Find(key);
  if (!v) return Status::Error(what + ": required key " + key + " is missing");
  if (!v->is_integer())
    return Status::Error(what + ": key " + key + " must be an integer, got " +
                         ValueTypeName(static_cast<uint32_t>(v->type)));
  const bool is_signed = v->type == ValueType::kInt8 || v->type == ValueType::kInt16 || v->type == ValueType::kInt32 ||
                         v->type == ValueType::kInt64;
  const bool in_range = is_signed ? v->i >= min && v->i <= max
                                  : v->u <= static_cast<uint64_t>(INT64_MAX) && static_cast<int64_t>(v->u) >= min &&
                                        static_cast<int64_t>(v->u) <= max;
  const std::string shown = is_signed ? std::to_string(v->i) : std::to_string(v->u);
  if (!in_range)
    return Status::Error(what + ": key " + key + " is " + shown + ", outside [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]");
  return is_signed ? v->i : static_cast<int64_t>(v->u);
}

Result<double> GetFloat(const File& file, const std::string& key, const std::string& what) {
  const Value* v = file.Find(key);
  if (!v) return Status::Error(what + ": required key " + key + " is missing");
  if (v->type != ValueType::kFloat32 && v->type != ValueType::kFloat64)
    return Status::Error(what + ": key " + key + " must be FLOAT32, got " +
                         ValueTypeName(static_cast<uint32_t>(v->type)));
  if (!std::isfinite(v->f)) return Status::Error(what + ": key " + key + " is not finite");
  return v->f;
}

namespace {

// An array-valued key whose elements all have type `t`; nullptr iff absent.
Result<const Value*> ArrayOf(const File& file, const std::string& key, ValueType t, const std::string& what) {
  const Value* v = file.Find(key);
  if (!v) return static_cast<const Value*>(nullptr);
  if (v->type != ValueType::kArray || v->array_type != t)
    return Status::Error(what + ": key " + key + " must be an ARRAY of " + ValueTypeName(static_cast<uint32_t>(t)));
  return v;
}

}  // namespace

Result<std::optional<Vocab>> ReadVocab(const File& file, const std::string& what) {
  if (!file.Find("tokenizer.ggml.model")) return std::optional<Vocab>();
  Vocab v;
  VERITY_ASSIGN_OR_RETURN(v.model, GetString(file, "tokenizer.ggml.model", what));
  // llama.cpp's names for a model without a vocabulary (its loader reads no
  // other tokenizer key then, and neither does this).
  if (v.model == kNoVocab || v.model == "none") return std::optional<Vocab>(std::move(v));
  if (file.Find("tokenizer.ggml.pre")) {
    VERITY_ASSIGN_OR_RETURN(v.pre, GetString(file, "tokenizer.ggml.pre", what));
  }
  VERITY_ASSIGN_OR_RETURN(const Value* tokens, ArrayOf(file, "tokenizer.ggml.tokens", ValueType::kString, what));
  if (!tokens)
    return Status::Error(what + ": required key tokenizer.ggml.tokens is missing (tokenizer.ggml.model is set)");
  if (tokens->items.empty()) return Status::Error(what + ": key tokenizer.ggml.tokens is empty");
  for (const Value& t : tokens->items) v.tokens.push_back(t.s);
  const size_t n = v.tokens.size();
  VERITY_ASSIGN_OR_RETURN(const Value* scores, ArrayOf(file, "tokenizer.ggml.scores", ValueType::kFloat32, what));
  if (scores) {
    if (scores->items.size() != n)
      return Status::Error(what + ": key tokenizer.ggml.scores has " + std::to_string(scores->items.size()) +
                           " entries for " + std::to_string(n) + " tokens");
    for (const Value& s : scores->items) v.scores.push_back(static_cast<float>(s.f));
  }
  VERITY_ASSIGN_OR_RETURN(const Value* types, ArrayOf(file, "tokenizer.ggml.token_type", ValueType::kInt32, what));
  if (types) {
    if (types->items.size() != n)
      return Status::Error(what + ": key tokenizer.ggml.token_type has " + std::to_string(types->items.size()) +
                           " entries for " + std::to_string(n) + " tokens");
    for (const Value& t : types->items) {
      if (t.i < 1 || t.i > 6)
        return Status::Error(what + ": key tokenizer.ggml.token_type holds " + std::to_string(t.i) + " (not 1..6)");
      v.token_types.push_back(static_cast<int32_t>(t.i));
    }
  }
  VERITY_ASSIGN_OR_RETURN(const Value* merges, ArrayOf(file, "tokenizer.ggml.merges", ValueType::kString, what));
  if (merges)
    for (const Value& m : merges->items) v.merges.push_back(m.s);
  const std::pair<const char*, int*> ids[] = {{"tokenizer.ggml.bos_token_id", &v.bos},
                                              {"tokenizer.ggml.eos_token_id", &v.eos},
                                              {"tokenizer.ggml.unknown_token_id", &v.unk},
                                              {"tokenizer.ggml.padding_token_id", &v.pad}};
  for (const auto& [key, dst] : ids) {
    if (!file.Find(key)) continue;
    VERITY_ASSIGN_OR_RETURN(int64_t id, GetInt(file, key, 0, static_cast<int64_t>(n) - 1, what));
    *dst = static_cast<int>(id);
  }
  const std::pair<const char*, std::optional<bool>*> flags[] = {{"tokenizer.ggml.add_bos_token", &v.add_bos},
                                                                {"tokenizer.ggml.add_eos_token", &v.add_eos}};
  for (const auto& [key, dst] : flags) {
    const Value* b = file.Find(key);
    if (!b) continue;
    if (b->type != ValueType::kBool) return Status::Error(what + ": key " + std::string(key) + " must be a BOOL");
    *dst = b->u != 0;
  }
  return std::optional<Vocab>(std::move(v));
}

namespace {

class Out {
 public:
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(const std::string& s) {
    U64(s.size());
    buf_ += s;
  }
  void Raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  void Val(const Value& v) {
    switch (v.type) {
      case ValueType::kUint8:
      case ValueType::kBool: {
        uint8_t x = static_cast<uint8_t>(v.u);
        Raw(&x, 1);
        break;
      }
      case ValueType::kInt8: {
        int8_t x = static_cast<int8_t>(v.i);
        Raw(&x, 1);
        break;
      }
      case ValueType::kUint16: {
        uint16_t x = static_cast<uint16_t>(v.u);
        Raw(&x, 2);
        break;
      }
      case ValueType::kInt16: {
        int16_t x = static_cast<int16_t>(v.i);
        Raw(&x, 2);
        break;
      }
      case ValueType::kUint32: U32(static_cast<uint32_t>(v.u)); break;
      case ValueType::kInt32: {
        int32_t x = static_cast<int32_t>(v.i);
        Raw(&x, 4);
        break;
      }
      case ValueType::kUint64: U64(v.u); break;
      case ValueType::kInt64: Raw(&v.i, 8); break;
      case ValueType::kFloat32: {
        float x = static_cast<float>(v.f);
        Raw(&x, 4);
        break;
      }
      case ValueType::kFloat64: Raw(&v.f, 8); break;
      case ValueType::kString: Str(v.s); break;
      case ValueType::kArray:
        U32(static_cast<uint32_t>(v.array_type));
        U64(v.items.size());
        for (const Value& e : v.items) Val(e);
        break;
    }
  }
  std::string& buf() { return buf_; }

 private:
  std::string buf_;
};

}  // namespace

Status Write(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
             const std::vector<TensorSpec>& tensors,
             const std::function<Status(size_t index, std::string* out)>& bytes) {
  uint64_t alignment = kDefaultAlignment;
  for (const auto& [k, v] : metadata)
    if (k == "general.alignment") alignment = v.u;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return Status::Error(path + ": general.alignment must be a power of two");
  auto pad = [alignment](uint64_t n) { return (n + alignment - 1) / alignment * alignment; };
  Out h;
  h.U32(kMagic);
  h.U32(3);
  h.U64(tensors.size());
  h.U64(metadata.size());
  for (const auto& [k, v] : metadata) {
    h.Str(k);
    h.U32(static_cast<uint32_t>(v.type));
    h.Val(v);
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    int64_t block = 0, block_bytes = 0;
    if (!TypeTraits(t.type, &block, &block_bytes) || t.dims.empty() || t.dims.size() > kMaxDims ||
        t.dims[0] % static_cast<uint64_t>(block) != 0)
      return Status::Error(path + ": cannot write tensor " + t.name + " as " + TensorTypeName(t.type));
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    sizes.push_back(n / static_cast<uint64_t>(block) * static_cast<uint64_t>(block_bytes));
    h.Str(t.name);
    h.U32(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) h.U64(d);
    h.U32(t.type);
    h.U64(offset);
    offset = pad(offset + sizes.back());
  }
  h.buf().resize(pad(h.buf().size()), '\0');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::Error(path + ": cannot create (" + std::strerror(errno) + ")");
  bool ok = std::fwrite(h.buf().data(), 1, h.buf().size(), f) == h.buf().size();
  std::string data;
  Status st;
  for (size_t i = 0; i < tensors.size() && ok && st.ok(); i++) {
    data.clear();
    st = bytes(i, &data);
    if (st.ok() && data.size() != sizes[i])
      st = Status::Error(path + ": tensor " + tensors[i].name + " got " + std::to_string(data.size()) +
                         " bytes, its dims and type need " + std::to_string(sizes[i]));
    data.resize(pad(data.size()), '\0');
    ok = ok && std::fwrite(data.data(), 1, data.size(), f) == data.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!st.ok()) return st;
  if (!ok) return Status::Error(path + ": write failed");
  return OkStatus();
}

}  // namespace verity::gguf
