// A bench adapter over plain text: an engine that prints its speed as a line
// of text (llama2.c's run prints `achieved tok/s: 51.2` on stderr) is read
// through a regular expression per metric, so its runs can be scored without
// changing the engine. `verity adapt` (cli/ledger/adapt_command.cc) runs such a
// command and prints the verity.bench/1 record. docs/bench.md, "Text adapters".
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace verity::measure {

// One metric the adapter fills: its name and an ECMAScript regular expression
// whose first capture group is the number.
struct TextMetric {
  std::string name, pattern;
};

// Parses "NAME=REGEX" (the flag's form): NAME letters, digits and '_', REGEX a
// valid expression with at least one capture group. Errors name the flag value.
[[nodiscard]] Result<TextMetric> ParseTextMetric(const std::string& spec);

// The number `m.pattern` captures in `text`: it must match exactly once (two
// matches are ambiguous, none is absence), and its first group must be a
// whole positive finite decimal number. Errors start with `what`, name the
// metric and the pattern, and quote the text's tail when nothing matched.
[[nodiscard]] Result<double> ExtractMetric(const std::string& text, const TextMetric& m, const std::string& what);

}  // namespace verity::measure
