// libFuzzer target: a chat template from a tokenizer_config.json
// (serve/jinja.h). Every input is either refused by name at parse, or parses
// and then renders a fixed conversation to text or to a named error, within
// the renderer's bounds: never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "serve/jinja.h"

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using verity::serve::jinja::Template;
  using verity::serve::jinja::Value;
  const std::string src(reinterpret_cast<const char*>(data), size);
  auto t = Template::Parse(src);
  if (!t.ok()) {
    Check(t.status().message().rfind("chat template line ", 0) == 0);
    return 0;
  }
  auto msg = [](const char* role, const char* content) {
    return Value::MakeDict({{"role", Value::Str(role)}, {"content", Value::Str(content)}});
  };
  std::map<std::string, Value> vars = {
      {"messages", Value::MakeList({msg("system", "Be brief."), msg("user", "Hi \xc3\xa9"), msg("assistant", " ok ")})},
      {"bos_token", Value::Str("<s>")},
      {"eos_token", Value::Str("</s>")},
      {"add_generation_prompt", Value::Bool(true)},
      {"tools", Value::None()},
      {"documents", Value::None()}};
  auto r = (*t)->Render(vars);
  if (!r.ok()) {
    Check(r.status().message().rfind("chat template line ", 0) == 0);
    return 0;
  }
  Check(r->size() <= (17u << 20));
  return 0;
}
