// Helpers shared by the tokenizer implementations (not part of the public API).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace verity {

// OK iff `path` names a regular file that can be opened; the error names `what` and the path.
Status CheckReadableFile(const std::string& path, const char* what);
// The whole file, or an error naming it.
Result<std::string> ReadWholeFile(const std::string& path, const char* what);

// A compiled pre-tokenizer / normalizer pattern (PCRE2, UTF-8 + Unicode
// properties). Patterns are rewritten where PCRE2 and JavaScript's `u` mode
// (what @lenml/tokenizers and transformers.js run) disagree: \s and \S are the
// ECMAScript white-space set (with U+FEFF, without U+0085 and U+180E), and a
// case-insensitive group of ASCII literals `(?i:'s|'t)` folds ASCII only.
class Regex {
 public:
  // `where` names the file and field in errors.
  [[nodiscard]] static Result<std::shared_ptr<const Regex>> Compile(const std::string& pattern,
                                                                    const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every non-empty match, left to right, as [begin, end) byte offsets; the
  // text must be valid UTF-8. An empty match moves on by one code point.
  [[nodiscard]] Result<std::vector<std::pair<size_t, size_t>>> FindAll(const std::string& text) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8
  std::string where_;
};

// The pattern with the rewrites Regex::Compile applies (exposed for tests).
Result<std::string> RewriteForJsSemantics(const std::string& pattern);

}  // namespace verity
