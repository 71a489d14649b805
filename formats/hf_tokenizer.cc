// Hugging Face tokenizer.json with model BPE: the Llama 2 / Mistral family
// (metaspace "▁", byte fallback <0xNN>) and the Llama 3 / Qwen family
// (byte-level BPE after a Split regex). Every component type the file names
// is implemented or refused by name; nothing is skipped.
//
// Where Hugging Face's Rust `tokenizers` and @lenml/tokenizers (the
// independent implementation the conformance tests compare with) differ,
// docs/tokenizers.md says which one this follows.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <utf8proc.h>

#include "base/utf8.h"
#include "formats/tokenizer.h"
#include "formats/tokenizer_internal.h"

namespace verity {
namespace {

using nlohmann::json;

// Ids beyond this are refused: a vocabulary is a dense table and a hostile
// file must not make us allocate gigabytes for it.
constexpr int64_t kMaxId = 1 << 21;  // 2M; the largest real vocabularies hold ~256K

// UTF-8 itself: base/utf8.h.
using utf8::LeadLength;

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out += to;
  }
  out.append(s, at, std::string::npos);
  s = std::move(out);
}

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
// others for U+0100 onwards, so every byte is one visible character.
struct ByteLevelMap {
  std::string to_char[256];
  std::unordered_map<std::string, unsigned char> to_byte;
  ByteLevelMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[b] = utf8::Encode(printable ? static_cast<uint32_t>(b) : next++);
      to_byte[to_char[b]] = static_cast<unsigned char>(b);
    }
  }
};
const ByteLevelMap& ByteLevel() {
  static const ByteLevelMap m;
  return m;
}

// ECMAScript's String.prototype.trim set (what lenml strips around added tokens).
bool IsJsSpaceAt(const std::string& s, size_t i, size_t* len) {
  static const char* const kSpaces[] = {
      "\t",           "\n",           "\v",           "\f",           "\r",           " ",
      "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
      "\xE3\x80\x80", "\xEF\xBB\xBF"};
  for (const char* sp : kSpaces) {
    const size_t n = std::strlen(sp);
    if (s.compare(i, n, sp) == 0) return *len = n, true;
  }
  // U+2000..U+200A
  if (i + 3 <= s.size() && s[i] == '\xE2' && s[i + 1] == '\x80' && static_cast<unsigned char>(s[i + 2]) >= 0x80 &&
      static_cast<unsigned char>(s[i + 2]) <= 0x8A)
    return *len = 3, true;
  return false;
}
std::string TrimStartJs(const std::string& s) {
  size_t i = 0, n = 0;
  while (i < s.size() && IsJsSpaceAt(s, i, &n)) i += n;
  return s.substr(i);
}
std::string TrimEndJs(const std::string& s) {
  // Walk code points forward, remembering where the trailing space run began.
  size_t i = 0, n = 0, keep = 0;
  while (i < s.size()) {
    if (IsJsSpaceAt(s, i, &n)) {
      i += n;
    } else {
      i += LeadLength(static_cast<unsigned char>(s[i]));
      keep = std::min(i, s.size());
    }
  }
  return s.substr(0, keep);
}

// --- JSON field access, every error naming the file and the field ----------

struct Reader {
  std::string file;
  Status Err(const std::string& field, const std::string& what) const {
    return Status::Error(file + ": " + field + " " + what);
  }
  Result<std::string> Str(const json& o, const char* key, const std::string& at) const {
    auto it = o.find(key);
    if (it == o.end()) return Err(at + "." + key, "is missing");
    if (!it->is_string()) return Err(at + "." + key, "must be a string");
    return it->get<std::string>();
  }
  Result<bool> Bool(const json& o, const char* key, const std::string& at, bool dflt) const {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) return Err(at + "." + key, "must be true or false");
    return it->get<bool>();
  }
  Result<int64_t> Int(const json& o, const char* key, const std::string& at) const {
    auto it = o.find(key);
    if (it == o.end()) return Err(at + "." + key, "is missing");
    if (!it->is_number_integer()) return Err(at + "." + key, "must be an integer");
    return it->get<int64_t>();
  }
  Result<std::string> Type(const json& o, const std::string& at) const {
    if (!o.is_object()) return Err(at, "must be an object");
    return Str(o, "type", at);
  }
};

// --- the pipeline's parts ---------------------------------------------------

struct AddedToken {
  std::string content;
  int id = 0;
  bool special = false, lstrip = false, rstrip = false;
};

// A pattern: a literal string or a regex.
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;
  Result<std::vector<std::pair<size_t, size_t>>> FindAll(const std::string& s) const {
    if (regex) return regex->FindAll(s);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t at = 0, hit; (hit = s.find(literal, at)) != std::string::npos; at = hit + literal.size())
      out.emplace_back(hit, hit + literal.size());
    return out;
  }
};

Result<Pattern> ParsePattern(const Reader& r, const json& o, const std::string& at) {
  auto it = o.find("pattern");
  if (it == o.end() || !it->is_object()) return r.Err(at + ".pattern", "must be an object with String or Regex");
  Pattern p;
  if (it->contains("String")) {
    VERITY_ASSIGN_OR_RETURN(p.literal, r.Str(*it, "String", at + ".pattern"));
  } else if (it->contains("Regex")) {
    VERITY_ASSIGN_OR_RETURN(auto re, r.Str(*it, "Regex", at + ".pattern"));
    VERITY_ASSIGN_OR_RETURN(p.regex, Regex::Compile(re, r.file + ": " + at + ".pattern.Regex"));
  } else {
    return r.Err(at + ".pattern", "must hold String or Regex");
  }
  return p;
}

// Replaces every match of `p` in `s` with `to`.
Result<std::string> ReplacePattern(const Pattern& p, const std::string& s, const std::string& to) {
  VERITY_ASSIGN_OR_RETURN(auto hits, p.FindAll(s));
  std::string out;
  size_t at = 0;
  for (auto [b, e] : hits) {
    out.append(s, at, b - at);
    out += to;
    at = e;
  }
  out.append(s, at, std::string::npos);
  return out;
}

struct NormStep {
  enum Kind { kPrepend, kReplace, kNfc } kind;
  std::string text;  // prepended text, or the replacement
  Pattern pattern;
};

enum class PrependScheme { kAlways, kFirst, kNever };

struct PreStep {
  enum Kind { kSplit, kByteLevel, kMetaspace } kind;
  Pattern pattern;  // Split; ByteLevel with use_regex
  // Split: what becomes of a match: its own piece, dropped, or joined to the
  // text before it (Gemma's) or after it.
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext } behavior = Behavior::kIsolated;
  bool use_regex = false;         // ByteLevel
  bool add_prefix_space = false;  // ByteLevel
  std::string replacement;        // Metaspace
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = true;  // Metaspace
};

struct DecStep {
  enum Kind { kReplace, kByteFallback, kFuse, kStrip, kByteLevel, kMetaspace } kind;
  Pattern pattern;
  std::string text;  // Replace: content; Strip: content; Metaspace: replacement
  int64_t start = 0, stop = 0;
  PrependScheme prepend = PrependScheme::kAlways;
};

const char kGpt2Pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Result<PrependScheme> ParsePrependScheme(const Reader& r, const json& o, const std::string& at) {
  auto it = o.find("prepend_scheme");
  if (it != o.end() && !it->is_null()) {
    if (!it->is_string()) return r.Err(at + ".prepend_scheme", "must be a string");
    const std::string s = it->get<std::string>();
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    return r.Err(at + ".prepend_scheme", "'" + s + "' is not always, first or never");
  }
  // Files older than prepend_scheme say add_prefix_space (default true).
  VERITY_ASSIGN_OR_RETURN(bool add, r.Bool(o, "add_prefix_space", at, true));
  return add ? PrependScheme::kAlways : PrependScheme::kNever;
}

Result<std::string> MetaspaceReplacement(const Reader& r, const json& o, const std::string& at) {
  VERITY_ASSIGN_OR_RETURN(auto rep, r.Str(o, "replacement", at));
  if (rep.empty()) return r.Err(at + ".replacement", "is empty");
  return rep;
}

Status ParseNormalizer(const Reader& r, const json& o, const std::string& at, std::vector<NormStep>* out) {
  if (o.is_null()) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto type, r.Type(o, at));
  if (type == "Sequence") {
    auto it = o.find("normalizers");
    if (it == o.end() || !it->is_array()) return r.Err(at + ".normalizers", "must be an array");
    for (size_t i = 0; i < it->size(); i++)
      VERITY_RETURN_IF_ERROR(ParseNormalizer(r, (*it)[i], at + ".normalizers[" + std::to_string(i) + "]", out));
    return OkStatus();
  }
  NormStep s;
  if (type == "Prepend") {
    s.kind = NormStep::kPrepend;
    VERITY_ASSIGN_OR_RETURN(s.text, r.Str(o, "prepend", at));
  } else if (type == "Replace") {
    s.kind = NormStep::kReplace;
    VERITY_ASSIGN_OR_RETURN(s.pattern, ParsePattern(r, o, at));
    VERITY_ASSIGN_OR_RETURN(s.text, r.Str(o, "content", at));
  } else if (type == "NFC") {
    s.kind = NormStep::kNfc;  // Qwen2's: canonical composition (utf8proc)
  } else {
    return r.Err(at + ".type",
                 "'" + type + "' is not a supported normalizer (supported: Sequence, Prepend, Replace, NFC)");
  }
  out->push_back(std::move(s));
  return OkStatus();
}

Status ParsePreTokenizer(const Reader& r, const json& o, const std::string& at, std::vector<PreStep>* out) {
  if (o.is_null()) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto type, r.Type(o, at));
  if (type == "Sequence") {
    auto it = o.find("pretokenizers");
    if (it == o.end() || !it->is_array()) return r.Err(at + ".pretokenizers", "must be an array");
    for (size_t i = 0; i < it->size(); i++)
      VERITY_RETURN_IF_ERROR(ParsePreTokenizer(r, (*it)[i], at + ".pretokenizers[" + std::to_string(i) + "]", out));
    return OkStatus();
  }
  PreStep s;
  if (type == "Split") {
    s.kind = PreStep::kSplit;
    VERITY_ASSIGN_OR_RETURN(s.pattern, ParsePattern(r, o, at));
    VERITY_ASSIGN_OR_RETURN(auto behavior, r.Str(o, "behavior", at));
    using B = PreStep::Behavior;
    const std::pair<const char*, B> known[] = {{"Isolated", B::kIsolated},
                                               {"Removed", B::kRemoved},
                                               {"MergedWithPrevious", B::kMergedWithPrevious},
                                               {"MergedWithNext", B::kMergedWithNext}};
    auto it = std::find_if(std::begin(known), std::end(known), [&](const auto& k) { return behavior == k.first; });
    if (it == std::end(known))
      return r.Err(at + ".behavior", "'" + behavior +
                                         "' is not supported (supported: Isolated, Removed, MergedWithPrevious, "
                                         "MergedWithNext)");
    s.behavior = it->second;
    VERITY_ASSIGN_OR_RETURN(bool invert, r.Bool(o, "invert", at, false));
    if (invert) return r.Err(at + ".invert", "true is not supported");
  } else if (type == "ByteLevel") {
    s.kind = PreStep::kByteLevel;
    VERITY_ASSIGN_OR_RETURN(s.add_prefix_space, r.Bool(o, "add_prefix_space", at, true));
    VERITY_ASSIGN_OR_RETURN(s.use_regex, r.Bool(o, "use_regex", at, true));
    if (s.use_regex) {
      VERITY_ASSIGN_OR_RETURN(s.pattern.regex, Regex::Compile(kGpt2Pattern, r.file + ": " + at));
    }
  } else if (type == "Metaspace") {
    s.kind = PreStep::kMetaspace;
    VERITY_ASSIGN_OR_RETURN(s.replacement, MetaspaceReplacement(r, o, at));
    VERITY_ASSIGN_OR_RETURN(s.prepend, ParsePrependScheme(r, o, at));
    VERITY_ASSIGN_OR_RETURN(s.split, r.Bool(o, "split", at, true));
  } else {
    return r.Err(at + ".type",
                 "'" + type + "' is not a supported pre_tokenizer (supported: Sequence, Split, ByteLevel, Metaspace)");
  }
  out->push_back(std::move(s));
  return OkStatus();
}

Status ParseDecoder(const Reader& r, const json& o, const std::string& at, std::vector<DecStep>* out) {
  if (o.is_null()) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto type, r.Type(o, at));
  if (type == "Sequence") {
    auto it = o.find("decoders");
    if (it == o.end() || !it->is_array()) return r.Err(at + ".decoders", "must be an array");
    for (size_t i = 0; i < it->size(); i++)
      VERITY_RETURN_IF_ERROR(ParseDecoder(r, (*it)[i], at + ".decoders[" + std::to_string(i) + "]", out));
    return OkStatus();
  }
  DecStep s;
  if (type == "Replace") {
    s.kind = DecStep::kReplace;
    VERITY_ASSIGN_OR_RETURN(s.pattern, ParsePattern(r, o, at));
    VERITY_ASSIGN_OR_RETURN(s.text, r.Str(o, "content", at));
  } else if (type == "ByteFallback") {
    s.kind = DecStep::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = DecStep::kFuse;
  } else if (type == "Strip") {
    s.kind = DecStep::kStrip;
    VERITY_ASSIGN_OR_RETURN(s.text, r.Str(o, "content", at));
    if (s.text.empty() || LeadLength(static_cast<unsigned char>(s.text[0])) != s.text.size())
      return r.Err(at + ".content", "must be one character");
    VERITY_ASSIGN_OR_RETURN(s.start, r.Int(o, "start", at));
    VERITY_ASSIGN_OR_RETURN(s.stop, r.Int(o, "stop", at));
    if (s.start < 0 || s.stop < 0) return r.Err(at, "start and stop must be >= 0");
  } else if (type == "ByteLevel") {
    s.kind = DecStep::kByteLevel;
  } else if (type == "Metaspace") {
    s.kind = DecStep::kMetaspace;
    VERITY_ASSIGN_OR_RETURN(s.text, MetaspaceReplacement(r, o, at));
    VERITY_ASSIGN_OR_RETURN(s.prepend, ParsePrependScheme(r, o, at));
  } else {
    return r.Err(at + ".type", "'" + type +
                                   "' is not a supported decoder (supported: Sequence, Replace, ByteFallback, Fuse, "
                                   "Strip, ByteLevel, Metaspace)");
  }
  out->push_back(std::move(s));
  return OkStatus();
}

// --- the tokenizer ------------------------------------------------------------

class HfTokenizer : public TextTokenizer {
 public:
  // `cr` names tokenizer_config.json (cfg is null when there is none).
  static Result<std::unique_ptr<TextTokenizer>> Parse(const json& tj, const json& cfg, const Reader& r,
                                                      const Reader& cr);

  Result<std::vector<int>> Encode(const std::string& text, bool add_special) const override;
  Result<std::string> Decode(const std::vector<int>& ids) const override;
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  bool is_added_token(int id) const override {
    return std::any_of(added_.begin(), added_.end(), [id](const AddedToken& t) { return t.id == id; });
  }
  std::string kind() const override { return "tokenizer.json (BPE)"; }

 private:
  Status ParseModel(const json& m, const Reader& r);
  Status ParseMerges(const json& m, const Reader& r);
  Status ParseAddedTokens(const json& tj, const Reader& r);
  Status ParsePostProcessor(const json& o, const std::string& at, const Reader& r);
  Status ParseConfig(const json& cfg, const Reader& r);
  // Splits text into sections: plain text (added = -1) and added tokens.
  std::vector<std::pair<std::string, int>> SplitAdded(const std::string& text) const;
  Result<std::string> Normalize(std::string s) const;
  Result<std::vector<std::string>> PreTokenize(const std::string& s, size_t section) const;
  Status Bpe(const std::string& word, std::vector<int>* out) const;
  Result<std::vector<std::string>> RunDecoders(std::vector<std::string> tokens) const;

  std::string where_;
  std::unordered_map<std::string, int> token_to_id_;  // vocab, then added tokens over it
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_token_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left, right) ids -> (rank, merged id)
  int byte_ids_[256];
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  int unk_ = -1;
  std::vector<AddedToken> added_;
  std::unordered_map<unsigned char, std::vector<size_t>> added_by_first_;  // longest first
  std::vector<NormStep> norm_;
  std::vector<PreStep> pre_;
  std::vector<DecStep> dec_;
  std::vector<int> prefix_, suffix_;  // what add_special puts around the text
  int bos_ = -1, eos_ = -1;
};

// Merges as "a b" (tokenizers < 0.20) or ["a", "b"]; the rank is the
// position; both parts and their concatenation must be in the vocabulary.
Status HfTokenizer::ParseMerges(const json& m, const Reader& r) {
  auto merges = m.find("merges");
  if (merges == m.end() || !merges->is_array()) return r.Err("model.merges", "must be an array");
  for (size_t i = 0; i < merges->size(); i++) {
    const json& e = (*merges)[i];
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (e.is_string()) {  // "a b" (tokenizers < 0.20)
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return r.Err(at, "\"" + s + "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return r.Err(at, "must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = token_to_id_.find(a), ib = token_to_id_.find(b), iab = token_to_id_.find(a + b);
    if (ia == token_to_id_.end() || ib == token_to_id_.end() || iab == token_to_id_.end())
      return r.Err(at, "merges \"" + a + "\" + \"" + b + "\" but " +
                           (ia == token_to_id_.end()   ? "\"" + a + "\""
                            : ib == token_to_id_.end() ? "\"" + b + "\""
                                                       : "\"" + a + b + "\"") +
                           " is not in model.vocab");
    const uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
    merges_.emplace(key, std::make_pair(static_cast<int>(i), iab->second));  // the first rank wins
  }
  return OkStatus();
}

Status HfTokenizer::ParseModel(const json& m, const Reader& r) {
  VERITY_ASSIGN_OR_RETURN(auto type, r.Type(m, "model"));
  if (type != "BPE") return r.Err("model.type", "'" + type + "' is not supported (supported: BPE)");
  auto dropout = m.find("dropout");
  if (dropout != m.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0))
    return r.Err("model.dropout", "must be null (BPE dropout is not deterministic)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(key);
    if (it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      return r.Err(std::string("model.") + key, "is not supported");
  }
  VERITY_ASSIGN_OR_RETURN(byte_fallback_, r.Bool(m, "byte_fallback", "model", false));
  VERITY_ASSIGN_OR_RETURN(fuse_unk_, r.Bool(m, "fuse_unk", "model", false));
  VERITY_ASSIGN_OR_RETURN(ignore_merges_, r.Bool(m, "ignore_merges", "model", false));
  auto vocab = m.find("vocab");
  if (vocab == m.end() || !vocab->is_object()) return r.Err("model.vocab", "must be an object of token: id");
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer()) return r.Err("model.vocab[\"" + it.key() + "\"]", "must be an integer id");
    const int64_t id = it->get<int64_t>();
    if (id < 0 || id >= kMaxId)
      return r.Err("model.vocab[\"" + it.key() + "\"]", "id " + std::to_string(id) + " is out of range");
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  has_token_.assign(id_to_token_.size(), false);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const int id = it->get<int>();
    if (has_token_[id])
      return r.Err("model.vocab",
                   "gives id " + std::to_string(id) + " to both \"" + id_to_token_[id] + "\" and \"" + it.key() + "\"");
    id_to_token_[id] = it.key();
    has_token_[id] = true;
    token_to_id_[it.key()] = id;
  }
  VERITY_RETURN_IF_ERROR(ParseMerges(m, r));
  for (int b = 0; b < 256; b++) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = token_to_id_.find(name);
    byte_ids_[b] = it == token_to_id_.end() ? -1 : it->second;
  }
  auto unk = m.find("unk_token");
  if (unk != m.end() && !unk->is_null()) {
    if (!unk->is_string()) return r.Err("model.unk_token", "must be a string or null");
    auto it = token_to_id_.find(unk->get<std::string>());
    if (it == token_to_id_.end())
      return r.Err("model.unk_token", "\"" + unk->get<std::string>() + "\" is not in model.vocab");
    unk_ = it->second;
  }
  return OkStatus();
}

Status HfTokenizer::ParseAddedTokens(const json& tj, const Reader& r) {
  auto it = tj.find("added_tokens");
  if (it == tj.end() || it->is_null()) return OkStatus();
  if (!it->is_array()) return r.Err("added_tokens", "must be an array");
  for (size_t i = 0; i < it->size(); i++) {
    const json& e = (*it)[i];
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    if (!e.is_object()) return r.Err(at, "must be an object");
    AddedToken t;
    VERITY_ASSIGN_OR_RETURN(t.content, r.Str(e, "content", at));
    if (t.content.empty()) return r.Err(at + ".content", "is empty");
    VERITY_ASSIGN_OR_RETURN(int64_t id, r.Int(e, "id", at));
    if (id < 0 || id >= kMaxId) return r.Err(at + ".id", std::to_string(id) + " is out of range");
    t.id = static_cast<int>(id);
    VERITY_ASSIGN_OR_RETURN(t.special, r.Bool(e, "special", at, false));
    VERITY_ASSIGN_OR_RETURN(t.lstrip, r.Bool(e, "lstrip", at, false));
    VERITY_ASSIGN_OR_RETURN(t.rstrip, r.Bool(e, "rstrip", at, false));
    VERITY_ASSIGN_OR_RETURN(bool single_word, r.Bool(e, "single_word", at, false));
    if (single_word) return r.Err(at + ".single_word", "true is not supported");
    if (static_cast<size_t>(t.id) >= id_to_token_.size()) {
      id_to_token_.resize(static_cast<size_t>(t.id) + 1);
      has_token_.resize(id_to_token_.size(), false);
    }
    id_to_token_[t.id] = t.content;
    has_token_[t.id] = true;
    token_to_id_[t.content] = t.id;
    added_.push_back(std::move(t));
  }
  for (size_t i = 0; i < added_.size(); i++)
    added_by_first_[static_cast<unsigned char>(added_[i].content[0])].push_back(i);
  for (auto& [c, list] : added_by_first_)
    std::stable_sort(list.begin(), list.end(),
                     [this](size_t a, size_t b) { return added_[a].content.size() > added_[b].content.size(); });
  return OkStatus();
}

Status HfTokenizer::ParsePostProcessor(const json& o, const std::string& at, const Reader& r) {
  if (o.is_null()) return OkStatus();
  VERITY_ASSIGN_OR_RETURN(auto type, r.Type(o, at));
  if (type == "ByteLevel") return OkStatus();  // offsets only: adds no ids
  if (type == "Sequence") {
    auto it = o.find("processors");
    if (it == o.end() || !it->is_array()) return r.Err(at + ".processors", "must be an array");
    for (size_t i = 0; i < it->size(); i++)
      VERITY_RETURN_IF_ERROR(ParsePostProcessor((*it)[i], at + ".processors[" + std::to_string(i) + "]", r));
    return OkStatus();
  }
  if (type != "TemplateProcessing")
    return r.Err(
        at + ".type",
        "'" + type + "' is not a supported post_processor (supported: TemplateProcessing, ByteLevel, Sequence)");
  auto single = o.find("single");
  if (single == o.end() || !single->is_array()) return r.Err(at + ".single", "must be an array");
  auto specials = o.find("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); i++) {
    const json& piece = (*single)[i];
    const std::string pat = at + ".single[" + std::to_string(i) + "]";
    if (piece.is_object() && piece.contains("Sequence")) {
      if (seen_sequence) return r.Err(pat, "repeats the sequence");
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object())
      return r.Err(pat, "must be a SpecialToken or a Sequence");
    VERITY_ASSIGN_OR_RETURN(auto name, r.Str(piece["SpecialToken"], "id", pat + ".SpecialToken"));
    std::vector<int> ids;
    if (specials != o.end() && specials->is_object() && specials->contains(name)) {
      const json& entry = (*specials)[name];
      auto ids_it = entry.is_object() ? entry.find("ids") : entry.end();
      if (!entry.is_object() || ids_it == entry.end() || !ids_it->is_array())
        return r.Err(at + ".special_tokens." + name + ".ids", "must be an array");
      for (const json& v : *ids_it) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            v.get<int64_t>() >= static_cast<int64_t>(id_to_token_.size()))
          return r.Err(at + ".special_tokens." + name + ".ids", "holds an id outside the vocabulary");
        ids.push_back(v.get<int>());
      }
    } else {
      return r.Err(pat, "names special token \"" + name + "\" that " + at + ".special_tokens does not define");
    }
    auto& dst = seen_sequence ? suffix_ : prefix_;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
  if (!seen_sequence) return r.Err(at + ".single", "has no Sequence");
  return OkStatus();
}

// tokenizer_config.json: bos_token / eos_token (a string or an AddedToken
// object) and add_bos_token / add_eos_token, which override the template.
Status HfTokenizer::ParseConfig(const json& cfg, const Reader& r) {
  if (!prefix_.empty()) bos_ = prefix_.front();
  if (!suffix_.empty()) eos_ = suffix_.back();
  if (cfg.is_null()) return OkStatus();
  if (!cfg.is_object()) return r.Err("(top level)", "must be an object");
  auto token_id = [&](const char* key, int* id) -> Status {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return OkStatus();
    std::string name;
    if (it->is_string()) {
      name = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      name = (*it)["content"].get<std::string>();
    } else {
      return r.Err(key, "must be a string or an object with \"content\"");
    }
    auto found = token_to_id_.find(name);
    if (found == token_to_id_.end()) return r.Err(key, "\"" + name + "\" is not a token of the tokenizer");
    *id = found->second;
    return OkStatus();
  };
  VERITY_RETURN_IF_ERROR(token_id("bos_token", &bos_));
  VERITY_RETURN_IF_ERROR(token_id("eos_token", &eos_));
  if (cfg.contains("add_bos_token")) {
    VERITY_ASSIGN_OR_RETURN(bool add, r.Bool(cfg, "add_bos_token", "(config)", false));
    if (add && bos_ < 0) return r.Err("add_bos_token", "is true but no bos_token is defined");
    prefix_.clear();
    if (add) prefix_.push_back(bos_);
  }
  if (cfg.contains("add_eos_token")) {
    VERITY_ASSIGN_OR_RETURN(bool add, r.Bool(cfg, "add_eos_token", "(config)", false));
    if (add && eos_ < 0) return r.Err("add_eos_token", "is true but no eos_token is defined");
    suffix_.clear();
    if (add) suffix_.push_back(eos_);
  }
  return OkStatus();
}

Result<std::unique_ptr<TextTokenizer>> HfTokenizer::Parse(const json& tj, const json& cfg, const Reader& r,
                                                          const Reader& cr) {
  if (!tj.is_object()) return r.Err("(top level)", "must be a JSON object");
  auto t = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  t->where_ = r.file;
  auto model = tj.find("model");
  if (model == tj.end()) return r.Err("model", "is missing");
  VERITY_RETURN_IF_ERROR(t->ParseModel(*model, r));
  VERITY_RETURN_IF_ERROR(t->ParseAddedTokens(tj, r));
  auto part = [&tj](const char* key) -> const json& {
    static const json kNull;
    auto it = tj.find(key);
    return it == tj.end() ? kNull : *it;
  };
  VERITY_RETURN_IF_ERROR(ParseNormalizer(r, part("normalizer"), "normalizer", &t->norm_));
  VERITY_RETURN_IF_ERROR(ParsePreTokenizer(r, part("pre_tokenizer"), "pre_tokenizer", &t->pre_));
  VERITY_RETURN_IF_ERROR(ParseDecoder(r, part("decoder"), "decoder", &t->dec_));
  VERITY_RETURN_IF_ERROR(t->ParsePostProcessor(part("post_processor"), "post_processor", r));
  VERITY_RETURN_IF_ERROR(t->ParseConfig(cfg, cr));
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

std::vector<std::pair<std::string, int>> HfTokenizer::SplitAdded(const std::string& text) const {
  std::vector<std::pair<std::string, int>> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    auto it = added_by_first_.find(static_cast<unsigned char>(text[i]));
    if (it != added_by_first_.end()) {
      for (size_t k : it->second) {  // longest first
        if (text.compare(i, added_[k].content.size(), added_[k].content) == 0) {
          hit = &added_[k];
          break;
        }
      }
    }
    if (hit == nullptr) {
      i++;
      continue;
    }
    if (i > start) out.emplace_back(text.substr(start, i - start), -1);
    out.emplace_back(hit->content, static_cast<int>(hit - added_.data()));
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) out.emplace_back(text.substr(start), -1);
  return out;
}

namespace {
// Unicode canonical composition (NFC), as the tokenizers library's NFC
// normalizer does, by utf8proc. Encode has refused text that is not valid
// UTF-8 already ("input text is not valid UTF-8"); utf8proc's own error is
// kept for anything it still refuses.
Result<std::string> Nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return Status::Error(std::string("NFC normalizer: ") + utf8proc_errmsg(n));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}
}  // namespace

Result<std::string> HfTokenizer::Normalize(std::string s) const {
  for (const NormStep& n : norm_) {
    if (n.kind == NormStep::kPrepend) {
      if (!s.empty()) s = n.text + s;
    } else if (n.kind == NormStep::kNfc) {
      VERITY_ASSIGN_OR_RETURN(s, Nfc(s));
    } else {
      VERITY_ASSIGN_OR_RETURN(s, ReplacePattern(n.pattern, s, n.text));
    }
  }
  return s;
}

// Split: the text between matches, and each match as its behaviour says:
// its own piece, dropped, the end of the piece before it ("a-b-" -> "a-",
// "b-") or the start of the piece after it ("a-b" -> "a", "-b").
Status SplitStep(const PreStep& p, const std::string& piece, std::vector<std::string>* next) {
  using B = PreStep::Behavior;
  VERITY_ASSIGN_OR_RETURN(auto hits, p.pattern.FindAll(piece));
  size_t at = 0;
  for (auto [b, e] : hits) {
    if (p.behavior == B::kMergedWithPrevious) {
      next->push_back(piece.substr(at, e - at));
      at = e;
      continue;
    }
    if (b > at) next->push_back(piece.substr(at, b - at));
    if (p.behavior == B::kIsolated) next->push_back(piece.substr(b, e - b));
    at = p.behavior == B::kMergedWithNext ? b : e;
  }
  if (at < piece.size()) next->push_back(piece.substr(at));
  return OkStatus();
}

// ByteLevel: optionally the GPT-2 split, then every byte as its character.
Status ByteLevelStep(const PreStep& p, std::string piece, std::vector<std::string>* next) {
  if (p.add_prefix_space && piece.rfind(' ', 0) != 0) piece = " " + piece;
  std::vector<std::string> words;
  if (p.use_regex) {
    VERITY_ASSIGN_OR_RETURN(auto hits, p.pattern.FindAll(piece));
    for (auto [b, e] : hits) words.push_back(piece.substr(b, e - b));
  } else {
    words.push_back(std::move(piece));
  }
  for (const std::string& w : words) {
    std::string mapped;
    for (unsigned char c : w) mapped += ByteLevel().to_char[c];
    next->push_back(std::move(mapped));
  }
  return OkStatus();
}

// Metaspace: spaces become the replacement, prepended as the scheme says;
// with `split`, each replacement starts a new piece (Hugging Face's rule).
void MetaspaceStep(const PreStep& p, std::string piece, size_t section, std::vector<std::string>* next) {
  ReplaceAll(piece, " ", p.replacement);
  const bool prepend = p.prepend == PrependScheme::kAlways || (p.prepend == PrependScheme::kFirst && section == 0);
  if (prepend && piece.rfind(p.replacement, 0) != 0) piece = p.replacement + piece;
  if (!p.split) {
    next->push_back(std::move(piece));
    return;
  }
  size_t at = 0;
  for (size_t hit = piece.find(p.replacement, 1); hit != std::string::npos;
       hit = piece.find(p.replacement, hit + p.replacement.size())) {
    if (hit > at) next->push_back(piece.substr(at, hit - at));
    at = hit;
  }
  if (at < piece.size()) next->push_back(piece.substr(at));
}

Result<std::vector<std::string>> HfTokenizer::PreTokenize(const std::string& s, size_t section) const {
  std::vector<std::string> pieces{s};
  for (const PreStep& p : pre_) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      switch (p.kind) {
        case PreStep::kSplit: VERITY_RETURN_IF_ERROR(SplitStep(p, piece, &next)); break;
        case PreStep::kByteLevel: VERITY_RETURN_IF_ERROR(ByteLevelStep(p, std::move(piece), &next)); break;
        case PreStep::kMetaspace: MetaspaceStep(p, std::move(piece), section, &next); break;
      }
    }
    pieces = std::move(next);
  }
  std::erase_if(pieces, [](const std::string& x) { return x.empty(); });
  return pieces;
}

// Merges by rank, the lowest first and, among equal ranks, the leftmost.
Status HfTokenizer::Bpe(const std::string& word, std::vector<int>* out) const {
  if (ignore_merges_) {
    auto it = token_to_id_.find(word);
    if (it != token_to_id_.end()) return out->push_back(it->second), OkStatus();
  }
  struct Sym {
    int id;
    size_t begin, end;  // bytes of `word`
    int prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(LeadLength(static_cast<unsigned char>(word[i])), word.size() - i);
    auto it = token_to_id_.find(word.substr(i, n));
    const int k = static_cast<int>(syms.size());
    syms.push_back({it == token_to_id_.end() ? -1 : it->second, i, i + n, k - 1, k + 1, true});
    i += n;
  }
  if (syms.empty()) return OkStatus();
  syms.back().next = -1;
  struct Cand {
    int rank, left, right, left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto consider = [&](int l) {
    if (l < 0 || syms[l].next < 0) return;
    const int r = syms[l].next;
    if (syms[l].id < 0 || syms[r].id < 0) return;
    auto it = merges_.find((static_cast<uint64_t>(syms[l].id) << 32) | static_cast<uint32_t>(syms[r].id));
    if (it != merges_.end()) queue.push({it->second.first, l, r, syms[l].id, syms[r].id});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); i++) consider(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = syms[c.left];
    if (!l.alive || l.next != c.right || l.id != c.left_id || syms[c.right].id != c.right_id) continue;
    Sym& r = syms[c.right];
    l.id = merges_.at((static_cast<uint64_t>(c.left_id) << 32) | static_cast<uint32_t>(c.right_id)).second;
    l.end = r.end;
    l.next = r.next;
    r.alive = false;
    if (r.next >= 0) syms[r.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  const size_t first = out->size();
  for (int i = 0; i >= 0; i = syms[i].next) {
    const Sym& s = syms[i];
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    bool bytes_ok = byte_fallback_;
    for (size_t b = s.begin; bytes_ok && b < s.end; b++) bytes_ok = byte_ids_[static_cast<unsigned char>(word[b])] >= 0;
    if (bytes_ok) {
      for (size_t b = s.begin; b < s.end; b++) out->push_back(byte_ids_[static_cast<unsigned char>(word[b])]);
    } else if (unk_ >= 0) {
      if (!(fuse_unk_ && out->size() > first && out->back() == unk_)) out->push_back(unk_);
    } else {
      return Status::Error(where_ + ": \"" + word.substr(s.begin, s.end - s.begin) +
                           "\" has no token, no byte fallback and model.unk_token is null");
    }
  }
  return OkStatus();
}

Result<std::vector<int>> HfTokenizer::Encode(const std::string& text, bool add_special) const {
  if (!utf8::IsValid(text)) return Status::Error("input text is not valid UTF-8");
  auto sections = SplitAdded(text);
  for (size_t i = 0; i < sections.size(); i++) {
    if (sections[i].second < 0) continue;
    const AddedToken& t = added_[sections[i].second];
    if (t.lstrip && i > 0 && sections[i - 1].second < 0) sections[i - 1].first = TrimEndJs(sections[i - 1].first);
    if (t.rstrip && i + 1 < sections.size() && sections[i + 1].second < 0)
      sections[i + 1].first = TrimStartJs(sections[i + 1].first);
  }
  std::vector<int> ids;
  if (add_special) ids = prefix_;
  for (size_t i = 0; i < sections.size(); i++) {
    const auto& [s, added] = sections[i];
    if (added >= 0) {
      ids.push_back(added_[added].id);
      continue;
    }
    if (s.empty()) continue;
    VERITY_ASSIGN_OR_RETURN(auto normalized, Normalize(s));
    if (normalized.empty()) continue;
    VERITY_ASSIGN_OR_RETURN(auto pieces, PreTokenize(normalized, i));
    const size_t first = ids.size();
    for (const std::string& p : pieces) VERITY_RETURN_IF_ERROR(Bpe(p, &ids));
    if (fuse_unk_ && unk_ >= 0) {  // one <unk> per run within the section
      auto end = std::unique(ids.begin() + static_cast<long>(first), ids.end(),
                             [this](int a, int b) { return a == unk_ && b == unk_; });
      ids.erase(end, ids.end());
    }
  }
  if (add_special) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

// "<0xNN>" -> NN, or -1.
int ByteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// ByteFallback: runs of <0xNN> tokens become their bytes, decoded together
// (ill-formed bytes as U+FFFD, as @lenml's TextDecoder).
std::vector<std::string> ByteFallbackDecode(const std::vector<std::string>& tokens) {
  std::vector<std::string> next;
  std::string run;
  bool in_run = false;
  for (const auto& t : tokens) {
    const int b = ByteToken(t);
    if (b >= 0) {
      run += static_cast<char>(b);
      in_run = true;
      continue;
    }
    if (in_run) next.push_back(utf8::Lossy(run)), run.clear(), in_run = false;
    next.push_back(t);
  }
  if (in_run) next.push_back(utf8::Lossy(run));
  return next;
}

// Strip: up to `start` leading and `stop` trailing `content` characters per token.
std::vector<std::string> StripDecode(const DecStep& d, std::vector<std::string> tokens) {
  const std::string& c = d.text;
  for (std::string& t : tokens) {
    for (int64_t k = 0; k < d.start && t.rfind(c, 0) == 0; k++) t.erase(0, c.size());
    for (int64_t k = 0; k < d.stop && t.size() >= c.size() && t.compare(t.size() - c.size(), c.size(), c) == 0; k++)
      t.erase(t.size() - c.size());
  }
  return tokens;
}

// ByteLevel: every character back to its byte (a token with a character
// outside the map keeps its own bytes), then UTF-8 with U+FFFD for bad bytes.
std::vector<std::string> ByteLevelDecode(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const auto& t : tokens) {
    std::string mapped;
    bool all = true;
    for (size_t i = 0; i < t.size() && all;) {
      const size_t n = std::min(LeadLength(static_cast<unsigned char>(t[i])), t.size() - i);
      auto it = ByteLevel().to_byte.find(t.substr(i, n));
      if (it == ByteLevel().to_byte.end()) {
        all = false;
      } else {
        mapped += static_cast<char>(it->second);
      }
      i += n;
    }
    bytes += all ? mapped : t;
  }
  return {utf8::Lossy(bytes)};
}

// Metaspace: the replacement back to spaces; the first token loses the space
// the pre-tokenizer prepended.
std::vector<std::string> MetaspaceDecode(const DecStep& d, std::vector<std::string> tokens) {
  for (size_t i = 0; i < tokens.size(); i++) {
    ReplaceAll(tokens[i], d.text, " ");
    if (i == 0 && d.prepend != PrependScheme::kNever && tokens[i].rfind(' ', 0) == 0) tokens[i].erase(0, 1);
  }
  return tokens;
}

Result<std::vector<std::string>> HfTokenizer::RunDecoders(std::vector<std::string> tokens) const {
  for (const DecStep& d : dec_) {
    switch (d.kind) {
      case DecStep::kReplace:
        for (auto& t : tokens) {
          VERITY_ASSIGN_OR_RETURN(t, ReplacePattern(d.pattern, t, d.text));
        }
        break;
      case DecStep::kByteFallback: tokens = ByteFallbackDecode(tokens); break;
      case DecStep::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens = {all};
        break;
      }
      case DecStep::kStrip: tokens = StripDecode(d, std::move(tokens)); break;
      case DecStep::kByteLevel: tokens = ByteLevelDecode(tokens); break;
      case DecStep::kMetaspace: tokens = MetaspaceDecode(d, std::move(tokens)); break;
    }
  }
  return tokens;
}

Result<std::string> HfTokenizer::Decode(const std::vector<int>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); i++) {
    const int id = ids[i];
    if (id < 0 || id >= vocab_size() || !has_token_[id])
      return Status::Error("id " + std::to_string(id) + " (position " + std::to_string(i) + ") is not a token of " +
                           where_);
    tokens.push_back(id_to_token_[id]);
  }
  if (dec_.empty()) {  // no decoder: tokens joined by spaces, as Hugging Face does
    std::string s;
    for (size_t i = 0; i < tokens.size(); i++) {
      if (i) s += ' ';
      s += tokens[i];
    }
    return s;
  }
  VERITY_ASSIGN_OR_RETURN(auto out, RunDecoders(std::move(tokens)));
  std::string s;
  for (const auto& t : out) s += t;
  return s;
}

}  // namespace

Result<std::unique_ptr<TextTokenizer>> ParseHfTokenizer(const std::string& tokenizer_json,
                                                        const std::string& config_json, const std::string& where) {
  json tj = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tj.is_discarded()) return Status::Error(where + ": not valid JSON");
  json cfg;  // null when there is no tokenizer_config.json
  const std::string cfg_where = where.substr(0, where.find_last_of('/') + 1) + "tokenizer_config.json";
  if (!config_json.empty()) {
    cfg = json::parse(config_json, nullptr, false);
    if (cfg.is_discarded()) return Status::Error(cfg_where + ": not valid JSON");
  }
  return HfTokenizer::Parse(tj, cfg, Reader{where}, Reader{cfg_where});
}

}  // namespace verity
