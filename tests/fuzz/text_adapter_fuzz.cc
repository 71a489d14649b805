// libFuzzer target: `verity adapt`'s text extraction (measure/text_adapter.h)
// over any text another engine might print, with llama2.c's pattern. Each
// input is either a named error or exactly one match whose number is a
// positive finite decimal.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "measure/text_adapter.h"

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto metric = verity::measure::ParseTextMetric("decode_tok_s=achieved tok/s: ([0-9.]+)");
  Check(metric.ok());
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto v = verity::measure::ExtractMetric(text, metric.value(), "fuzz run");
  if (!v.ok()) {
    Check(v.status().message().rfind("fuzz run: metric decode_tok_s", 0) == 0);
    return 0;
  }
  Check(std::isfinite(*v) && *v > 0);
  Check(text.find("achieved tok/s: ") != std::string::npos);
  return 0;
}
