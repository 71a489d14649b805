// libFuzzer target: llama-bench's -o json / -o jsonl records
// (measure/llama_bench.h), what a bench command of another engine prints. Any
// text must be rejected with a Status naming the bench, or accepted; an
// accepted report has a build commit, at least one metric, and every metric
// a *_tok_s name with a positive finite value.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/strings.h"
#include "measure/llama_bench.h"

namespace {
using verity::EndsWith;
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)verity::measure::LooksLikeLlamaBench(text);
  auto r = verity::measure::ParseLlamaBench(text, "fuzz bench");
  if (!r.ok()) {
    Check(r.status().message().rfind("fuzz bench", 0) == 0);
    return 0;
  }
  Check(!r->build_commit.empty());
  Check(!r->metrics.empty());
  for (const auto& [name, v] : r->metrics) {
    Check(EndsWith(name, "_tok_s"));
    Check(std::isfinite(v) && v > 0);
  }
  return 0;
}
