// libFuzzer target: a repository's verity.toml (measure/project_config.h).
// Every input is either a named error that names the file, or a config whose
// required parts are all there.
#include <cstddef>
#include <cstdint>
#include <string>

#include "measure/project_config.h"

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = verity::measure::ParseProjectConfig(text, "fuzz.toml");
  if (!c.ok()) {
    Check(c.status().message().rfind("fuzz.toml", 0) == 0);
    return 0;
  }
  Check(!c->build_commands.empty() && !c->artifact.empty() && !c->workloads.empty());
  Check(c->Workload("").ok());
  for (const auto& w : c->workloads) Check(!w.bench.empty() && !w.metric.empty());
  return 0;
}
