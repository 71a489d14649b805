// UTF-8, once: decoding a character strictly, checking and repairing text,
// encoding a code point, and the byte-level questions a tokenizer and a
// streaming server ask. Strict means Unicode's definition (no overlong forms,
// no surrogates, nothing past U+10FFFF), which is also what JSON and Python
// accept.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace verity::utf8 {

inline constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// One character at s[i]: its code point and byte length, or length 0 when the
// bytes there are not well-formed UTF-8 (overlong, surrogate, truncated,
// beyond U+10FFFF, a stray continuation byte).
struct Char {
  char32_t code = 0;
  size_t length = 0;
};
Char Decode(std::string_view s, size_t i);

// Returns true iff every byte of `s` belongs to a well-formed character.
bool IsValid(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD, one per maximal
// subpart (Unicode's recommended practice; Rust's from_utf8_lossy and the
// WHATWG decoder do the same). Well-formed text comes back unchanged.
std::string Lossy(std::string_view s);

// The UTF-8 bytes of code point `cp` (which the caller keeps below U+110000).
std::string Encode(char32_t cp);

// The byte length a lead byte announces: 1 for ASCII, 2, 3 or 4 for the
// 110xxxxx, 1110xxxx and 11110xxx leads. Any other byte (a continuation byte,
// 0xF8-0xFF) reads 4, so a caller clamps to what remains of its string.
size_t LeadLength(unsigned char lead);

// How many bytes at the end of s[0, end) begin a character whose remaining
// bytes have not arrived (0 when the text ends on a whole character): what a
// stream must hold back.
size_t IncompleteTail(std::string_view s, size_t end);

// `s` cut into characters as Python's str sees them: each lead byte with the
// continuation bytes after it (a stray byte stands alone). Lossless: the
// pieces concatenate back to `s`.
std::vector<std::string> SplitCodePoints(std::string_view s);

}  // namespace verity::utf8
