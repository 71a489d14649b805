#include "base/terminal.h"

#include <cstdio>

namespace verity::terminal {

Utf8Char DecodeUtf8(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return {c, 1};
  size_t n = 0;
  char32_t code = 0, min = 0;
  if ((c & 0xE0) == 0xC0) n = 2, code = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) n = 3, code = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) n = 4, code = c & 0x07, min = 0x10000;
  else return {};
  if (i + n > s.size()) return {};
  for (size_t k = 1; k < n; k++) {
    if ((b(i + k) & 0xC0) != 0x80) return {};
    code = (code << 6) | (b(i + k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {code, n};
}

bool IsControl(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029;
}

std::string EscapeOf(char32_t c, bool raw_byte) {
  switch (raw_byte ? 0xFFFFFFFF : c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case 0x1B: return "\\e";
  }
  char buf[16];
  if (raw_byte || c < 0x80) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
  else std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  return buf;
}

std::string Visible(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = DecodeUtf8(s, i);
    if (u.length == 0) {
      o += EscapeOf(static_cast<unsigned char>(s[i]), true);
      i++;
      continue;
    }
    if (u.code == '\\') o += "\\\\";
    else if (IsControl(u.code)) o += EscapeOf(u.code, false);
    else o.append(s.substr(i, u.length));
    i += u.length;
  }
  return o;
}

}  // namespace verity::terminal
