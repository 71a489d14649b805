#include "formats/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace verity {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string o = "[";
  for (size_t i = 0; i < shape.size(); i++) {
    if (i) o += "x";
    o += std::to_string(shape[i]);
  }
  return o + "]";
}

int TensorDTypeSize(TensorDType t) {
  return t == TensorDType::kF32 ? 4 : t == TensorDType::kQ8_0 ? kGgufQ8_0BlockBytes : 2;
}
size_t StoredRowBytes(TensorDType t, int64_t cols) {
  return t == TensorDType::kQ8_0 ? static_cast<size_t>(cols / 32) * kGgufQ8_0BlockBytes
                                 : static_cast<size_t>(cols) * static_cast<size_t>(TensorDTypeSize(t));
}
const char* TensorDTypeName(TensorDType t) {
  switch (t) {
    case TensorDType::kF32: return "F32";
    case TensorDType::kF16: return "F16";
    case TensorDType::kBF16: return "BF16";
    case TensorDType::kQ8_0: return "Q8_0";
  }
  return "?";
}

Result<SafetensorsHeader> ParseSafetensorsHeader(const std::string& prefix, const std::string& what) {
  if (prefix.size() < 8) return Status::Error(what + ": shorter than the 8-byte header length");
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = (len << 8) | static_cast<unsigned char>(prefix[i]);
  if (len < 2 || len > kMaxSafetensorsHeader)
    return Status::Error(what + ": header length " + std::to_string(len) + " is outside [2, " +
                         std::to_string(kMaxSafetensorsHeader) + "]");
  if (prefix.size() < 8 + len) return Status::Error(what + ": truncated inside the JSON header");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(prefix.begin() + 8, prefix.begin() + 8 + static_cast<long>(len));
  } catch (const std::exception&) {
    return Status::Error(what + ": header is not valid JSON");
  }
  if (!j.is_object()) return Status::Error(what + ": header is not a JSON object");
  SafetensorsHeader h;
  h.header_len = len;
  h.data_start = static_cast<int64_t>(8 + len);
  std::vector<std::pair<int64_t, std::string>> order;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Status::Error(what + ": __metadata__ is not an object");
      continue;
    }
    const std::string& name = it.key();
    const auto& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2)
      return Status::Error(what + ": tensor '" + name + "' lacks dtype/shape/data_offsets");
    TensorEntry e;
    const std::string dt = t["dtype"];
    if (dt == "F32") e.dtype = TensorDType::kF32;
    else if (dt == "F16") e.dtype = TensorDType::kF16;
    else if (dt == "BF16") e.dtype = TensorDType::kBF16;
    else return Status::Error(what + ": tensor '" + name + "' has unsupported dtype " + dt);
    int64_t count = 1;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40))
        return Status::Error(what + ": tensor '" + name + "' has an invalid shape");
      e.shape.push_back(d.get<int64_t>());
      if (count > (int64_t{1} << 50) / std::max<int64_t>(1, e.shape.back()))
        return Status::Error(what + ": tensor '" + name + "' shape overflows");
      count *= e.shape.back();
    }
    for (const auto& o : t["data_offsets"])
      if (!o.is_number_unsigned() || o.get<uint64_t>() > (1ull << 50))
        return Status::Error(what + ": tensor '" + name + "' has invalid data_offsets");
    e.begin = t["data_offsets"][0].get<int64_t>();
    e.end = t["data_offsets"][1].get<int64_t>();
    if (e.end < e.begin) return Status::Error(what + ": tensor '" + name + "' data_offsets end before they begin");
    if (e.end - e.begin != count * TensorDTypeSize(e.dtype))
      return Status::Error(what + ": tensor '" + name + "' holds " + std::to_string(e.end - e.begin) +
                           " bytes but dtype " + dt + " and its shape need " +
                           std::to_string(count * TensorDTypeSize(e.dtype)));
    order.emplace_back(e.begin, name);
    h.tensors[name] = e;
  }
  std::sort(order.begin(), order.end());
  int64_t at = 0;
  for (const auto& [begin, name] : order) {
    const TensorEntry& e = h.tensors[name];
    if (e.begin != at)
      return Status::Error(what + ": tensor '" + name + "' starts at byte " + std::to_string(e.begin) + ", expected " +
                           std::to_string(at) + (e.begin < at ? " (overlap)" : " (gap)"));
    at = e.end;
  }
  h.data_size = at;
  return h;
}

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::Error(path + ": shard file is missing or not a file");
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(path + ": cannot open shard");
  std::string prefix(8, '\0');
  if (!f.read(prefix.data(), 8)) return Status::Error(path + ": shorter than the 8-byte header length");
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = (len << 8) | static_cast<unsigned char>(prefix[i]);
  if (len <= kMaxSafetensorsHeader && static_cast<int64_t>(8 + len) <= size) {
    prefix.resize(8 + len);
    f.read(prefix.data() + 8, static_cast<long>(len));
  }
  VERITY_ASSIGN_OR_RETURN(SafetensorsHeader h, ParseSafetensorsHeader(prefix, path));
  if (h.data_start + h.data_size != size)
    return Status::Error(path + ": file is " + std::to_string(size) + " bytes but its header describes " +
                         std::to_string(h.data_start + h.data_size) +
                         (size < h.data_start + h.data_size ? " (truncated)" : " (trailing bytes)"));
  return h;
}

Result<SafetensorsIndex> ParseSafetensorsIndex(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    return Status::Error(what + ": not valid JSON");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return Status::Error(what + ": no weight_map object");
  SafetensorsIndex idx;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return Status::Error(what + ": weight_map entry '" + it.key() + "' is not a file name");
    const std::string shard = it.value();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return Status::Error(what + ": weight_map entry '" + it.key() + "' names '" + shard + "', not a plain file name");
    idx.weight_map[it.key()] = shard;
  }
  if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("total_size")) {
    const auto& t = j["metadata"]["total_size"];
    if (!t.is_number_unsigned()) return Status::Error(what + ": metadata.total_size is not a non-negative integer");
    idx.has_total_size = true;
    idx.total_size = t.get<int64_t>();
  }
  return idx;
}

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN stays NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 (halfway past 65504, ties to even) up: infinity
  if (ax < 0x38800000u) {                        // below 2^-14: a subnormal half in units of 2^-24
    float a;
    std::memcpy(&a, &ax, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // exact scaling, ties to even
  }
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;  // a carry into the exponent is right too
  return static_cast<uint16_t>(sign | h);
}

void ToF32(TensorDType dtype, const unsigned char* src, int64_t count, float* dst) {
  if (dtype == TensorDType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * 4);
    return;
  }
  if (dtype == TensorDType::kQ8_0) {  // weight j of a block = f16 scale * q[j], exact in f32
    for (int64_t b = 0; b < count / 32; b++) {
      const unsigned char* blk = src + b * kGgufQ8_0BlockBytes;
      const float d = F16ToF32(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
      for (int j = 0; j < 32; j++) dst[b * 32 + j] = d * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
    }
    return;
  }
  for (int64_t i = 0; i < count; i++) {
    const uint16_t v = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
    if (dtype == TensorDType::kBF16) {
      const uint32_t bits = static_cast<uint32_t>(v) << 16;
      std::memcpy(&dst[i], &bits, 4);
    } else {
      dst[i] = F16ToF32(v);
    }
  }
}

uint16_t F32ToBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace verity
