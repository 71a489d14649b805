// PCRE2 behind the tokenizer's pattern matching. The rewrites make PCRE2 agree
// with the ECMAScript semantics the independent implementation uses; see
// docs/tokenizers.md for what still differs (Unicode version of \p{..}).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <fstream>
#include <sys/stat.h>

#include "formats/tokenizer_internal.h"

namespace verity {
namespace {

// ECMAScript WhiteSpace + LineTerminator (ECMA-262 \s), as a class body.
constexpr const char kJsSpaceBody[] =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

bool IsAsciiLiteralAlternation(const std::string& body) {
  if (body.empty()) return false;
  for (char c : body) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '\'' || c == '|' || c == ' ' || c == '_' || c == '-')) return false;
  }
  return true;
}

}  // namespace

Result<std::string> RewriteForJsSemantics(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); i++) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kJsSpaceBody) : "[" + std::string(kJsSpaceBody) + "]";
      } else if (e == 'S') {
        if (in_class) return Status::Error("\\S inside a character class is not supported");
        out += "[^" + std::string(kJsSpaceBody) + "]";
      } else {
        out += c;
        out += e;
      }
      i++;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (p.compare(i, 4, "(?i:") == 0) {
      const size_t close = p.find(')', i + 4);
      if (close != std::string::npos && IsAsciiLiteralAlternation(p.substr(i + 4, close - i - 4))) {
        out += "(?:";
        for (size_t k = i + 4; k < close; k++) {
          const unsigned char u = static_cast<unsigned char>(p[k]);
          if (std::isalpha(u)) {
            out += '[';
            out += static_cast<char>(std::tolower(u));
            out += static_cast<char>(std::toupper(u));
            out += ']';
          } else {
            out += p[k];
          }
        }
        out += ')';
        i = close;
        continue;
      }
    }
    out += c;
  }
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::Compile(const std::string& pattern, const std::string& where) {
  auto rewritten = RewriteForJsSemantics(pattern);
  if (!rewritten.ok()) return Status::Error(where + ": " + rewritten.status().message());
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Status::Error(where + ": regex does not compile at offset " + std::to_string(at) + ": " +
                         reinterpret_cast<const char*>(msg));
  }
  std::shared_ptr<Regex> r(new Regex());
  r->code_ = code;
  r->where_ = where;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Result<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(const std::string& text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(code, nullptr),
                                                                    pcre2_match_data_free);
  if (!md) return Status::Error(where_ + ": out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  uint32_t options = 0;  // the text is checked once, on the first call
  while (pos <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, options, md.get(), nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return Status::Error(where_ + ": regex match failed: " + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one code point, as ECMAScript's `u` mode does.
      pos = b + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) pos++;
    }
  }
  return out;
}

Status CheckReadableFile(const std::string& path, const char* what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Error(path + ": " + what + " does not exist");
    return Status::Error(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  }
  if (!S_ISREG(st.st_mode)) return Status::Error(path + ": " + what + " is not a regular file");
  return OkStatus();
}

Result<std::string> ReadWholeFile(const std::string& path, const char* what) {
  VERITY_RETURN_IF_ERROR(CheckReadableFile(path, what));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status::Error(path + ": read error on " + what);
  return s;
}

}  // namespace verity
