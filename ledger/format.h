// How the ledger writes numbers into notes and progress lines, in one place.
#pragma once

#include <cstdio>
#include <string>

namespace verity::ledger {

// Returns a fraction as a signed percentage with two decimals: 0.0235 -> "+2.35%".
inline std::string PctText(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", 100.0 * fraction);
  return b;
}

// Returns `v` with `digits` significant digits: 1070.84 -> "1071" at 4.
inline std::string NumText(double v, int digits = 4) {
  char b[40];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

}  // namespace verity::ledger
