// Small string rules the house used to write again in each file: trailing
// whitespace off a command's output, a suffix test. Header-only.
#pragma once

#include <string>
#include <string_view>

namespace verity {

// s without its trailing spaces, tabs, carriage returns and newlines (a
// shell command's output: `git rev-parse`, a build log's last line).
inline std::string TrimRight(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

// Whether s ends with tail.
inline bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace verity
