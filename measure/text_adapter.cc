// Regular expressions over a command's text; see text_adapter.h.
#include "measure/text_adapter.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "measure/measure.h"

namespace verity::measure {
namespace {

bool ValidName(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

Result<TextMetric> ParseTextMetric(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return Status::Error("--metric '" + spec + "': expected NAME=REGEX, e.g. decode_tok_s='achieved tok/s: ([0-9.]+)'");
  TextMetric m{spec.substr(0, eq), spec.substr(eq + 1)};
  if (!ValidName(m.name))
    return Status::Error("--metric '" + spec + "': '" + m.name + "' is not a metric name (letters, digits, _)");
  try {
    const std::regex re(m.pattern, std::regex::ECMAScript);
    if (re.mark_count() < 1)
      return Status::Error("--metric '" + spec + "': the expression has no capture group for the number");
  } catch (const std::regex_error& e) {
    return Status::Error("--metric '" + spec + "': not a regular expression (" + e.what() + ")");
  }
  return m;
}

Result<double> ExtractMetric(const std::string& text, const TextMetric& m, const std::string& what) {
  const std::string which = what + ": metric " + m.name + " ('" + m.pattern + "')";
  std::regex re;
  try {
    re = std::regex(m.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::Error(which + ": not a regular expression (" + e.what() + ")");
  }
  std::smatch found;
  int matches = 0;
  try {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      if (++matches == 1) found = *it;
      if (matches > 1) break;
    }
  } catch (const std::regex_error& e) {  // e.g. error_complexity on a pathological input
    return Status::Error(which + ": the match gave up (" + e.what() + ")");
  }
  if (matches == 0) return Status::Error(which + " matched nothing in: '" + OutputTail(text, 200) + "'");
  if (matches > 1) return Status::Error(which + " matched more than once: which one counts? Anchor it to one line");
  const std::string number = found[1].str();
  // Decimal only: strtod would also take "0x1p3", "inf" and "nan".
  const bool decimal = !number.empty() && number.find_first_not_of("0123456789.eE+-") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (!decimal || end != number.c_str() + number.size() || errno == ERANGE || !std::isfinite(v) || v <= 0)
    return Status::Error(which + ": captured '" + number + "', not a positive finite number");
  return v;
}

}  // namespace verity::measure
