// Escaping for the terminal: every string a submitter, a bench or a parity
// command wrote is data, never terminal control. A raw CR, ESC or backspace
// could overwrite a printed line ("score: accepted"), a bidi control could
// reorder one, so each is shown as a visible escape instead.
#pragma once

#include <string>
#include <string_view>

namespace verity::terminal {

// `s` with every control shown visibly: `\n` `\r` `\t` `\b` `\e`, other C0
// and DEL as `\xNN`, C1 controls, bidi controls and U+2028/U+2029 as
// `\uNNNN`, bytes that are not UTF-8 as `\xNN`, and `\` itself as `\\` (so an
// escape can never be mistaken for a string that reads like one). Printable
// text, UTF-8 included, passes unchanged.
std::string Visible(std::string_view s);

// A code point no output may show raw: C0 (tab, LF and CR included), DEL, C1,
// the bidi embeddings, overrides, isolates and marks, the line and paragraph
// separators, and (issue 41, finding 9) every other format character
// (general category Cf: U+200B, U+2060, U+FEFF, the tags, ...) and the fillers
// that render as nothing (U+034F, U+115F, U+1160, U+3164, U+FFA0, ...): a key
// holding one printed exactly like its twin.
bool IsControl(char32_t c);

// "" when every character of `s` prints as itself (well-formed UTF-8, no
// IsControl code point), else the first that does not, named ("U+2060 at byte 1").
std::string FirstInvisible(std::string_view s);

// The visible form of one control or undecodable byte ("\x1b", "\u202e").
std::string EscapeOf(char32_t c, bool raw_byte);

}  // namespace verity::terminal
