// Escaping for markdown (GitHub-flavoured, as the changelog is read): every
// string a submitter, a bench or a parity command wrote is data, never
// markup. Used wherever such a string reaches a markdown file.
//
// The escapes are chosen so that benign text renders exactly as written and
// changes as little as possible in the source: a character is escaped where
// GFM could read it as markup, never elsewhere. Callers never put a string at
// the start of a line (a list marker, `>` or `=` is only markup there).
#pragma once

#include <string>
#include <string_view>

namespace verity::markdown {

// `s` as inline text in a heading, paragraph, list item or table cell.
// Escaped: `\` `` ` `` `*` `~` `|` always (code spans, emphasis,
// strikethrough, cells); `_` unless between two letters or digits (`q8_0` is
// not emphasis); `#`s that end the string (a heading's closing sequence); `<`
// before a letter, `/`, `!`, `?` or at the end (HTML, comments, autolinks);
// `]` before `(` or `[` or at the end (links, images); `&` before a letter,
// digit or `#` (entities); `:` before `//` and the `.` of `www.` (GFM's
// bare-URL autolinks); an `@` between an address's characters is set in a
// code span (GFM links bare e-mail addresses whatever is escaped). CR and LF
// become one space; every other control is shown as its escape (as
// terminal::Visible writes it, e.g. `\e`, `\u202e`), as is a byte that is
// not UTF-8.
std::string Text(std::string_view s);

// `s` inside a link's text or an image's alt text: Text, and every `[` and
// `]` escaped (one unmatched bracket would undo the link around it).
std::string LinkText(std::string_view s);

// `s` as a code span, fenced by more backticks than it contains. In a table
// cell (`in_table`), `|` is escaped as GFM's tables require. Controls as in
// Text.
std::string Code(std::string_view s, bool in_table);

}  // namespace verity::markdown
