// How the ledger half writes numbers (notes, progress lines, the CLI's
// summaries, the changelog, the dashboard and its charts), in one place:
// each site picks a rule here rather than writing its own snprintf.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

namespace verity::ledger {

// Returns a fraction as a signed percentage with two decimals: 0.0235 -> "+2.35%".
inline std::string PctText(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", 100.0 * fraction);
  return b;
}

// Returns a fraction as an unsigned percentage with two decimals: 0.0235 -> "2.35%".
inline std::string PctUnsignedText(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", 100.0 * fraction);
  return b;
}

// Returns `v` with `digits` significant digits: 1070.84 -> "1071" at 4.
inline std::string NumText(double v, int digits = 4) {
  char b[40];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

// Returns `v` printed with a printf format of one double ("%.2f", "%+.2f%%
// step"): the pages and charts, whose precision is the site's own.
inline std::string FormatText(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// Returns text(*v), or `missing` when v is absent ("n/a" in the CLI and PR
// comments, an em dash on the changelog and the dashboard).
template <class Text>
std::string OrMissing(const std::optional<double>& v, Text text, const char* missing) {
  return v ? text(*v) : missing;
}

}  // namespace verity::ledger
