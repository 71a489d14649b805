// llama2.c's tokenizer, byte for byte: encode merges the best-scoring adjacent
// pair until none is in the vocabulary; decode maps <0xNN> back to bytes.
#include "formats/llama2c_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "formats/tokenizer_internal.h"

namespace verity {
namespace {
// What run.c hard-codes; used only when the file names no BOS/EOS piece.
constexpr int kFormatBos = 1, kFormatEos = 2;
}  // namespace

Result<Llama2cTokenizer> Llama2cTokenizer::Load(const std::string& path) {
  VERITY_RETURN_IF_ERROR(CheckReadableFile(path, "tokenizer file"));
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status::Error(path + ": cannot open tokenizer file (" + std::strerror(errno) + ")");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) return Status::Error(path + ": cannot read tokenizer file (" + std::strerror(errno) + ")");
  return Parse(bytes.str(), path);
}

Result<Llama2cTokenizer> Llama2cTokenizer::Parse(const std::string& bytes, const std::string& path) {
  std::istringstream f(bytes);
  int32_t max_token_length = 0;
  if (!f.read(reinterpret_cast<char*>(&max_token_length), 4))
    return Status::Error(path + ": truncated tokenizer header (max_token_length)");
  if (max_token_length <= 0 || max_token_length > 4096)
    return Status::Error(path + ": max_token_length " + std::to_string(max_token_length) + " is out of range");
  Llama2cTokenizer t;
  for (int i = 0;; i++) {
    float score;
    if (!f.read(reinterpret_cast<char*>(&score), 4)) {
      if (f.gcount() == 0 && f.eof()) break;
      return Status::Error(path + ": truncated tokenizer entry " + std::to_string(i) + " (score)");
    }
    int32_t len;
    if (!f.read(reinterpret_cast<char*>(&len), 4))
      return Status::Error(path + ": truncated tokenizer entry " + std::to_string(i) + " (length)");
    if (len < 0 || len > max_token_length)
      return Status::Error(path + ": tokenizer entry " + std::to_string(i) + " has length " + std::to_string(len) +
                           " outside [0, max_token_length=" + std::to_string(max_token_length) + "]");
    std::string s(static_cast<size_t>(len), '\0');
    if (len > 0 && !f.read(s.data(), len))
      return Status::Error(path + ": truncated tokenizer entry " + std::to_string(i) + " (bytes)");
    t.vocab_.push_back(std::move(s));
    t.scores_.push_back(score);
  }
  // Encode emits <unk>, BOS and EOS as ids 0, 1 and 2.
  if (t.vocab_size() < 3)
    return Status::Error(path + ": tokenizer holds " + std::to_string(t.vocab_size()) +
                         " entries; the llama2.c format needs at least 3 (<unk>, <s>, </s>)");
  t.sorted_.resize(t.vocab_.size());
  for (size_t i = 0; i < t.sorted_.size(); i++) t.sorted_[i] = static_cast<int>(i);
  std::stable_sort(t.sorted_.begin(), t.sorted_.end(), [&t](int a, int b) { return t.vocab_[a] < t.vocab_[b]; });
  auto find = [&t](const char* wrapped, const char* bare, int fallback) {
    int id = t.Lookup(wrapped);
    if (id < 0) id = t.Lookup(bare);
    return id >= 0 ? id : (fallback < t.vocab_size() ? fallback : -1);
  };
  t.bos_ = find("\n<s>\n", "<s>", kFormatBos);
  t.eos_ = find("\n</s>\n", "</s>", kFormatEos);
  return t;
}

Result<Llama2cTokenizer> Llama2cTokenizer::Load(const std::string& path, int vocab_size) {
  VERITY_ASSIGN_OR_RETURN(auto t, Load(path));
  if (t.vocab_size() != vocab_size)
    return Status::Error(path + ": tokenizer vocabulary size " + std::to_string(t.vocab_size()) +
                         " differs from the model's vocab_size " + std::to_string(vocab_size));
  return t;
}

int Llama2cTokenizer::Lookup(const std::string& s) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), s,
                             [this](int id, const std::string& key) { return vocab_[id] < key; });
  if (it != sorted_.end() && vocab_[*it] == s) return *it;
  return -1;
}

std::vector<int> Llama2cTokenizer::Encode(const std::string& text, bool bos, bool eos) const {
  std::vector<int> tokens;
  if (bos) tokens.push_back(bos_);
  // The sentencepiece "dummy prefix": a leading space before non-empty text.
  if (!text.empty()) {
    int space = Lookup(" ");
    if (space >= 0) tokens.push_back(space);
  }
  std::string cp;  // bytes of the current UTF-8 code point
  for (size_t i = 0; i < text.size(); i++) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) cp.clear();
    cp.push_back(static_cast<char>(c));
    unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((next & 0xC0) == 0x80 && cp.size() < 4) continue;
    int id = Lookup(cp);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      // Byte fallback: <0x00> is id 3. A vocabulary too small to hold the 256
      // byte pieces gets <unk> (0) instead, as SentencePiece does without byte
      // fallback, never an id past its end.
      for (unsigned char b : cp) tokens.push_back(b + 3 < vocab_size() ? b + 3 : 0);
    }
    cp.clear();
  }
  for (;;) {
    float best_score = -1e10f;
    int best_id = -1;
    size_t best_idx = 0;
    for (size_t i = 0; i + 1 < tokens.size(); i++) {
      int id = Lookup(vocab_[tokens[i]] + vocab_[tokens[i + 1]]);
      if (id != -1 && scores_[id] > best_score) {
        best_score = scores_[id];
        best_id = id;
        best_idx = i;
      }
    }
    if (best_id == -1) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + static_cast<long>(best_idx) + 1);
  }
  if (eos) tokens.push_back(eos_);
  return tokens;
}

std::string Llama2cTokenizer::Decode(int prev, int token) const {
  if (token < 0 || token >= vocab_size()) return std::string();
  const std::string& piece = vocab_[token];
  size_t start = (prev == bos_ && !piece.empty() && piece[0] == ' ') ? 1 : 0;
  std::string p = piece.substr(start);
  unsigned int byte;
  char tail;
  if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>%c", &byte, &tail) == 1)
    return std::string(1, static_cast<char>(byte));
  return p;
}

Result<std::vector<int>> Llama2cTokenizer::Encode(const std::string& text, bool add_special) const {
  return Encode(text, add_special, false);
}

Result<std::string> Llama2cTokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = bos_;
  for (size_t i = 0; i < ids.size(); i++) {
    const int id = ids[i];
    if (id < 0 || id >= vocab_size())
      return Status::Error("id " + std::to_string(id) + " (position " + std::to_string(i) +
                           ") is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    if (id != bos_ && id != eos_) out += Decode(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace verity
