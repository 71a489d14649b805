#include "base/markdown.h"

#include <algorithm>
#include <cctype>

#include "base/terminal.h"
#include "base/utf8.h"

namespace verity::markdown {
namespace {

bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
char At(std::string_view s, size_t i) { return i < s.size() ? s[i] : '\0'; }
// A character of an e-mail address's local part, as GFM's autolinker reads it.
bool LocalChar(char c) { return Alnum(c) || c == '.' || c == '+' || c == '-' || c == '_'; }

bool StartsWww(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return false;
  for (size_t k = 0; k < 3; k++)
    if (std::tolower(static_cast<unsigned char>(s[i + k])) != 'w') return false;
  return s[i + 3] == '.';
}

// Only `#`s and spaces from s[i] to the end: a heading's closing sequence if
// the string ends a heading.
bool TrailingHashes(std::string_view s, size_t i) { return s.find_first_not_of("# \t", i) == std::string_view::npos; }

// The escape one ASCII character of Text needs at s[i] ("" = none).
std::string AsciiEscape(std::string_view s, size_t i, bool link_text) {
  const char c = s[i], prev = i ? s[i - 1] : '\0', next = At(s, i + 1);
  switch (c) {
    case '\\':
    case '`':
    case '*':
    case '~':
    case '|': return std::string("\\") + c;
    case '_': return Alnum(prev) && Alnum(next) ? "" : "\\_";
    case '#': return TrailingHashes(s, i) ? "\\#" : "";
    // A tag, comment, declaration or autolink starts `<` + letter, `/`, `!` or `?`.
    case '<':
      return std::isalpha(static_cast<unsigned char>(next)) || next == '/' || next == '!' || next == '?' || next == '\0'
                 ? "\\<"
                 : "";
    // Outside link text a bracket links only as `](` or `][`; inside, one
    // unmatched bracket would undo the link around it.
    case '[': return link_text ? "\\[" : "";
    case ']': return link_text || next == '(' || next == '[' || next == '\0' ? "\\]" : "";
    case '&': return Alnum(next) || next == '#' ? "\\&" : "";
    case ':': return next == '/' && At(s, i + 2) == '/' ? "\\:" : "";
    case '@': return LocalChar(prev) && Alnum(next) ? "`@`" : "";
  }
  return "";
}

// Appends the control or undecodable byte at s[i] the way `Text` shows it;
// returns the bytes consumed, or 0 when s[i] starts ordinary text.
size_t AppendControl(std::string_view s, size_t i, bool markdown_backslash, std::string& o) {
  const utf8::Char u = utf8::Decode(s, i);
  if (u.length == 0) {
    if (markdown_backslash) o += '\\';
    o += terminal::EscapeOf(static_cast<unsigned char>(s[i]), true);
    return 1;
  }
  if (!terminal::IsControl(u.code)) return 0;
  if (u.code == '\r' || u.code == '\n') {
    o += ' ';
    return u.code == '\r' && At(s, i + 1) == '\n' ? 2 : 1;  // CRLF is one line end
  }
  if (markdown_backslash) o += '\\';  // the escape's own `\` is text, not markdown's
  o += terminal::EscapeOf(u.code, false);
  return u.length;
}

// The length of the well-formed multi-byte UTF-8 character at s[i], or 0.
size_t MultiByte(std::string_view s, size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 0;
  const utf8::Char u = utf8::Decode(s, i);
  return u.length > 1 ? u.length : 0;
}

std::string Escaped(std::string_view s, bool link_text) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = AppendControl(s, i, true, o)) {
      i += n;
      continue;
    }
    // A multi-byte character is never markup: copied whole (issue 41, finding 7:
    // its continuation bytes were escaped one by one, `José` -> `Jos\xc3\\xa9`).
    if (const size_t n = MultiByte(s, i)) {
      o.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (StartsWww(s, i)) {
      o.append(s.substr(i, 3)).append("\\.");
      i += 4;
      continue;
    }
    const std::string e = AsciiEscape(s, i, link_text);
    if (e.empty()) o += s[i];
    else o += e;
    i++;
  }
  return o;
}

}  // namespace

std::string Text(std::string_view s) { return Escaped(s, false); }
std::string LinkText(std::string_view s) { return Escaped(s, true); }

std::string Code(std::string_view s, bool in_table) {
  std::string body;
  size_t run = 0, longest = 0;
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = AppendControl(s, i, false, body)) {
      i += n, run = 0;
      continue;
    }
    if (const size_t n = MultiByte(s, i)) {
      body.append(s.substr(i, n));
      i += n, run = 0;
      continue;
    }
    const char c = s[i++];
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    // In a table a `\` before `|` would escape the `\|` that keeps the cell
    // whole: show that backslash as its escape instead.
    if (in_table && c == '\\' && At(s, i) == '|') body += "\\x5c";
    else if (in_table && c == '|') body += "\\|";
    else body += c;
  }
  const std::string fence(longest + 1, '`');
  // A space keeps a backtick at either end out of the fence; CommonMark strips
  // one space from each end when both have one.
  const bool pad =
      body.empty() || body.front() == '`' || body.back() == '`' || (body.front() == ' ' && body.back() == ' ');
  return pad ? fence + " " + body + " " + fence : fence + body + fence;
}

}  // namespace verity::markdown
