// LoadTokenizer: which file is which, and the UTF-8 helpers every kind shares.
#include "formats/tokenizer.h"

#include <sys/stat.h>

#include "formats/llama2c_tokenizer.h"
#include "formats/tokenizer_internal.h"

namespace verity {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<std::unique_ptr<TextTokenizer>> LoadHfJson(const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(auto text, ReadWholeFile(path, "tokenizer.json"));
  std::string config;
  const std::string cfg_path = path.substr(0, path.find_last_of('/') + 1) + "tokenizer_config.json";
  if (Exists(cfg_path)) {
    VERITY_ASSIGN_OR_RETURN(config, ReadWholeFile(cfg_path, "tokenizer_config.json"));
  }
  return ParseHfTokenizer(text, config, path);
}

Result<std::unique_ptr<TextTokenizer>> LoadLlama2c(const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(auto t, Llama2cTokenizer::Load(path));
  return std::unique_ptr<TextTokenizer>(new Llama2cTokenizer(std::move(t)));
}

Result<std::unique_ptr<TextTokenizer>> LoadSentencePiece(const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(auto bytes, ReadWholeFile(path, "SentencePiece model"));
  return ParseSentencePiece(bytes, path);
}

}  // namespace

Result<std::unique_ptr<TextTokenizer>> LoadTokenizer(const std::string& path) {
  if (IsDirectory(path)) {
    for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"}) {
      const std::string p = path + "/" + name;
      if (Exists(p)) return LoadTokenizer(p);
    }
    return Status::Error(path + ": directory holds none of tokenizer.json, tokenizer.model, tokenizer.bin");
  }
  if (path.ends_with(".json")) return LoadHfJson(path);
  if (path.ends_with(".model")) return LoadSentencePiece(path);
  if (path.ends_with(".bin")) return LoadLlama2c(path);
  // No telling extension: look at the first bytes.
  VERITY_ASSIGN_OR_RETURN(auto bytes, ReadWholeFile(path, "tokenizer file"));
  size_t i = bytes.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && bytes[i] == '{') return LoadHfJson(path);
  // A ModelProto opens with field 1 (pieces), length-delimited: tag 0x0A.
  if (!bytes.empty() && bytes[0] == '\x0A') return ParseSentencePiece(bytes, path);
  return LoadLlama2c(path);
}

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) { i++; continue; }
    if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) { n = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return false;
    for (size_t k = 1; k <= n; k++) {
      if (i + k >= s.size()) return false;
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string Utf8Lossy(const std::string& s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) { out += static_cast<char>(c); i++; continue; }
    if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) { n = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else { out += kReplacement; i++; continue; }
    // The longest valid prefix is one maximal subpart: one U+FFFD for it.
    size_t k = 1;
    for (; k <= n && i + k < s.size(); k++) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) break;
    }
    if (k == n + 1) {
      out.append(s, i, n + 1);
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return out;
}

}  // namespace verity
