#include "base/utf8.h"

namespace verity::utf8 {
namespace {

// The bytes a well-formed character may start with, and the range its second
// byte must lie in (Unicode's Table 3-7): what rules out overlong forms,
// surrogates and code points past U+10FFFF without decoding. `extra` is the
// number of continuation bytes; 0 means the byte starts no character.
struct Lead {
  size_t extra = 0;
  unsigned char lo = 0x80, hi = 0xBF;
};
Lead LeadOf(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return {1};
  if (c == 0xE0) return {2, 0xA0, 0xBF};
  if (c == 0xED) return {2, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {2};
  if (c == 0xF0) return {3, 0x90, 0xBF};
  if (c == 0xF4) return {3, 0x80, 0x8F};
  if (c >= 0xF1 && c <= 0xF3) return {3};
  return {};
}

// The longest prefix of s[i..] that could begin the character `lead` starts
// (the lead byte included): lead.extra + 1 when the character is whole.
size_t ValidPrefix(std::string_view s, size_t i, const Lead& lead) {
  size_t k = 1;
  for (; k <= lead.extra && i + k < s.size(); k++) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if (d < (k == 1 ? lead.lo : 0x80) || d > (k == 1 ? lead.hi : 0xBF)) break;
  }
  return k;
}

}  // namespace

Char Decode(std::string_view s, size_t i) {
  if (i >= s.size()) return {};
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1};
  const Lead lead = LeadOf(c);
  if (lead.extra == 0 || ValidPrefix(s, i, lead) != lead.extra + 1) return {};
  char32_t code = c & (lead.extra == 1 ? 0x1F : lead.extra == 2 ? 0x0F : 0x07);
  for (size_t k = 1; k <= lead.extra; k++) code = (code << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {code, lead.extra + 1};
}

bool IsValid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Char c = Decode(s, i);
    if (c.length == 0) return false;
    i += c.length;
  }
  return true;
}

std::string Lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      i++;
      continue;
    }
    const Lead lead = LeadOf(c);
    const size_t k = lead.extra == 0 ? 1 : ValidPrefix(s, i, lead);
    if (lead.extra != 0 && k == lead.extra + 1) out.append(s.substr(i, k));
    else out += kReplacement;  // the maximal subpart, as one U+FFFD
    i += k;
  }
  return out;
}

std::string Encode(char32_t cp) {
  std::string o;
  if (cp < 0x80) {
    o += static_cast<char>(cp);
  } else if (cp < 0x800) {
    o += static_cast<char>(0xC0 | (cp >> 6));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o += static_cast<char>(0xE0 | (cp >> 12));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    o += static_cast<char>(0xF0 | (cp >> 18));
    o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return o;
}

size_t LeadLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

size_t IncompleteTail(std::string_view s, size_t end) {
  for (size_t k = 1; k <= 3 && k <= end; k++) {
    const unsigned char b = static_cast<unsigned char>(s[end - k]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    return LeadLength(b) > k ? k : 0;
  }
  return 0;
}

std::vector<std::string> SplitCodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) n++;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace verity::utf8
