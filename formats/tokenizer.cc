// LoadTokenizer: which file is which (UTF-8 itself: base/utf8.h).
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

}  // namespace verity
