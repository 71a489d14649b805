#include "verify/ref_logits.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/sha256.h"

namespace verity {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMagicBytes = 8;
constexpr uint64_t kMaxHeader = 64ull << 20;  // a larger length is corruption, not a long sequence

// An int array field; errors name the file and field.
Status IntArray(const nlohmann::json& h, const char* key, const std::string& path, std::vector<int>* out) {
  if (!h.contains(key) || !h[key].is_array() || h[key].empty())
    return Status::Error(path + ": header field '" + key + "' must be a non-empty array of integers");
  for (const auto& v : h[key]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      return Status::Error(path + ": header field '" + key + "' holds " + v.dump() + ", not a non-negative integer");
    out->push_back(v.get<int>());
  }
  return OkStatus();
}

}  // namespace

const float* RefLogits::Row(int position) const {
  auto it = std::lower_bound(positions.begin(), positions.end(), position);
  if (it == positions.end() || *it != position) return nullptr;
  return rows.data() + static_cast<size_t>(it - positions.begin()) * vocab_size;
}

bool IsRefLogitsFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char m[kMagicBytes] = {};
  return f.read(m, kMagicBytes) && std::memcmp(m, kRefLogitsMagic, kMagicBytes) == 0;
}

Result<RefLogits> ReadRefLogits(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(path + ": reference logits file cannot be opened");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() < kMagicBytes + 8 || bytes.compare(0, kMagicBytes, kRefLogitsMagic) != 0)
    return Status::Error(path + ": not a reference logits file (it must begin with " + kRefLogitsMagic + ")");
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[kMagicBytes + i])) << (8 * i);
  if (n > kMaxHeader || 16 + n > bytes.size())
    return Status::Error(path + ": header length " + std::to_string(n) + " runs past the end of the file");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(bytes.substr(16, n));
  } catch (const std::exception&) {
    return Status::Error(path + ": the header is not valid JSON");
  }
  if (!h.is_object() || h.value("schema", "") != "verity.ref-logits/1")
    return Status::Error(path + ": header field 'schema' must be \"verity.ref-logits/1\"");
  RefLogits r;
  r.path = path;
  r.sha256 = Sha256Hex(bytes);
  if (!h.contains("vocab_size") || !h["vocab_size"].is_number_integer() || h["vocab_size"].get<int64_t>() <= 0 ||
      h["vocab_size"].get<int64_t>() > INT32_MAX)
    return Status::Error(path + ": header field 'vocab_size' must be a positive integer");
  r.vocab_size = h["vocab_size"].get<int>();
  const auto& m = h.contains("model") ? h["model"] : nlohmann::json();
  if (!m.is_object() || !m.contains("sha256") || !m["sha256"].is_string() ||
      m["sha256"].get<std::string>().size() != 64)
    return Status::Error(path + ": header field 'model.sha256' must be 64 hex digits");
  r.model_sha256 = m["sha256"];
  r.model_path = m.value("path", "");
  r.generator = h.value("generator", "");
  VERITY_RETURN_IF_ERROR(IntArray(h, "tokens", path, &r.tokens));
  VERITY_RETURN_IF_ERROR(IntArray(h, "positions", path, &r.positions));
  for (size_t i = 0; i < r.positions.size(); i++) {
    if (r.positions[i] >= static_cast<int>(r.tokens.size()))
      return Status::Error(path + ": position " + std::to_string(r.positions[i]) + " is past the " +
                           std::to_string(r.tokens.size()) + " tokens");
    if (i > 0 && r.positions[i] <= r.positions[i - 1])
      return Status::Error(path + ": positions must be strictly increasing (" + std::to_string(r.positions[i - 1]) +
                           " then " + std::to_string(r.positions[i]) + ")");
  }
  const size_t want = r.positions.size() * static_cast<size_t>(r.vocab_size) * 4;
  const size_t have = bytes.size() - 16 - n;
  if (have != want)
    return Status::Error(path + ": " + std::to_string(have) + " bytes of rows, but " +
                         std::to_string(r.positions.size()) + " positions x vocab_size " +
                         std::to_string(r.vocab_size) + " f32 need " + std::to_string(want));
  r.rows.resize(r.positions.size() * static_cast<size_t>(r.vocab_size));
  std::memcpy(r.rows.data(), bytes.data() + 16 + n, want);  // little-endian f32, as on every supported host
  return r;
}

Result<std::string> ModelSha256(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return Sha256File(path);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "config.json" || name == "model.safetensors.index.json" ||
        (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0))
      names.push_back(name);
  }
  if (ec) return Status::Error(path + ": cannot list the directory");
  std::sort(names.begin(), names.end());
  std::string manifest;
  for (const auto& name : names) {
    VERITY_ASSIGN_OR_RETURN(std::string sha, Sha256File(path + "/" + name));
    manifest += sha + "  " + name + "\n";
  }
  return Sha256Hex(manifest);
}

}  // namespace verity
