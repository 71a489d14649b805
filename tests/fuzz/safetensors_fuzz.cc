// libFuzzer target: the safetensors header and index parsers must reject any
// input cleanly (a Status), never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  auto h = verity::ParseSafetensorsHeader(s, "fuzz");
  if (h.ok()) {
    // Accepted headers must be self-consistent.
    int64_t at = 0;
    for (const auto& [name, e] : h->tensors) at += e.end - e.begin;
    if (at != h->data_size) __builtin_trap();
  }
  (void)verity::ParseSafetensorsIndex(s, "fuzz");
  return 0;
}
