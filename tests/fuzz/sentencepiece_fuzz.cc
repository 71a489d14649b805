// libFuzzer target: the SentencePiece model loader (libsentencepiece behind
// verity's interface) must reject any input with a Status, never crash; an
// accepted model must encode and decode without crashing, ids in range.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string proto(reinterpret_cast<const char*>(data), size);
  auto t = verity::ParseSentencePiece(proto, "fuzz/tokenizer.model");
  if (!t.ok()) return 0;
  auto ids = (*t)->Encode("The little boat, caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD 123", true);
  if (!ids.ok()) return 0;
  for (int id : *ids)
    if (id < 0 || id >= (*t)->vocab_size()) __builtin_trap();
  (void)(*t)->Decode(*ids);
  return 0;
}
