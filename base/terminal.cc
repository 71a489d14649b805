#include "base/terminal.h"

#include <cstdio>

#include "base/utf8.h"

namespace verity::terminal {

bool IsControl(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029) return true;
  // General category Cf (Unicode 15), and the characters that render as nothing.
  static constexpr char32_t kRanges[][2] = {
      {0x00AD, 0x00AD},   {0x034F, 0x034F},   {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},
      {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x115F, 0x1160},   {0x17B4, 0x17B5},
      {0x180B, 0x180F},   {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x206F},   {0x3164, 0x3164},
      {0xFEFF, 0xFEFF},   {0xFFA0, 0xFFA0},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
      {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF}};
  for (const auto& r : kRanges)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}

std::string FirstInvisible(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Char u = utf8::Decode(s, i);
    char buf[64];
    if (u.length == 0) {
      std::snprintf(buf, sizeof buf, "byte 0x%02x (not UTF-8) at byte %zu", static_cast<unsigned char>(s[i]), i);
      return buf;
    }
    if (IsControl(u.code)) {
      std::snprintf(buf, sizeof buf, "U+%04X at byte %zu", static_cast<unsigned>(u.code), i);
      return buf;
    }
    i += u.length;
  }
  return "";
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
    const utf8::Char u = utf8::Decode(s, i);
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
