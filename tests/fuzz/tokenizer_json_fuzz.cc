// libFuzzer target: the tokenizer.json parser (and the tokenizer it builds)
// must reject any input cleanly (a Status), never crash, hang or read out of
// bounds; an accepted tokenizer must encode and decode without crashing and
// only ever produce ids inside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/tokenizer.h"

namespace {
void Exercise(const verity::TextTokenizer& t, const std::string& text) {
  for (bool special : {false, true}) {
    auto ids = t.Encode(text, special);
    if (!ids.ok()) continue;
    for (int id : *ids)
      if (id < 0 || id >= t.vocab_size()) __builtin_trap();
    (void)t.Decode(*ids);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input is the tokenizer.json; a second part after a NUL byte, when
  // present, is the tokenizer_config.json.
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string tok = all.substr(0, nul);
  const std::string cfg = nul == std::string::npos ? std::string() : all.substr(nul + 1);
  auto t = verity::ParseHfTokenizer(tok, cfg, "fuzz/tokenizer.json");
  if (!t.ok()) return 0;
  Exercise(**t, "ab a\xC3\xA9 <s> x  y\n\tz 123 I'M don't \xF0\x9F\x98\x80");
  Exercise(**t, tok.substr(0, 64));
  std::vector<int> ids;
  for (int i = 0; i < 40 && i < (*t)->vocab_size(); i++) ids.push_back(i);
  (void)(*t)->Decode(ids);
  return 0;
}
