// libFuzzer target: the llama2.c tokenizer.bin parser. Any input must be
// rejected with a Status naming the file, or accepted; an accepted tokenizer
// must encode text of every kind (ASCII, multi-byte UTF-8, bytes that are not
// UTF-8, text that only byte fallback can encode) to ids inside its
// vocabulary, and decode every id without fault.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace {
const std::string kPath = "fuzz/tokenizer.bin";
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto t = verity::Tokenizer::Parse(bytes, kPath);
  if (!t.ok()) {
    Check(t.status().message().rfind(kPath + ": ", 0) == 0);  // errors name the file
    return 0;
  }
  const int vocab = t->vocab_size();
  Check(vocab > 0);
  for (const char* text :
       {"", "Once upon a time", "  two  spaces\n\ttab", "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80",
        "\x01\x7F\xFF\xC3", "<0x41><s></s>"}) {
    for (bool bos : {false, true}) {
      const std::vector<int> ids = t->Encode(text, bos, /*eos=*/bos);
      int prev = 0;
      for (int id : ids) {
        Check(id >= 0 && id < vocab);
        (void)t->Decode(prev, id);
        prev = id;
      }
    }
  }
  return 0;
}
