// verity gbench -- CMD [ARGS]: runs a Google Benchmark binary with
// --benchmark_format=json and prints its results as one verity.bench/1
// record (measure/gbench.h), so `verity submit` can score it like any bench.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "base/env.h"
#include "base/sha256.h"
#include "cli/ledger/commands.h"
#include "measure/gbench.h"
#include "measure/measure.h"

namespace verity::cli {
namespace {

int RunGbench(const std::vector<std::string>& args) {
  const std::string binary = measure::ResolveOnPath(args[0]);
  auto sha = Sha256File(binary);
  if (!sha.ok()) return Fail(Status::Error("gbench: " + args[0] + ": " + sha.status().message()));
  std::string cmd, shown;
  for (size_t i = 0; i < args.size(); i++) {
    cmd += (i ? " " : "") + measure::ShellQuote(i == 0 ? binary : args[i]);
    if (i) shown += " " + args[i];
  }
  measure::CommandOutput out = measure::RunCommand(cmd + " --benchmark_format=json", env::CommandTimeoutSeconds());
  if (out.exit_code != 0)
    return Fail(Status::Error("gbench: " + args[0] + " exited " + std::to_string(out.exit_code) + ": " +
                              out.err.substr(out.err.size() > 400 ? out.err.size() - 400 : 0)));
  nlohmann::json report = nlohmann::json::parse(out.out, nullptr, false);
  if (report.is_discarded()) return Fail(Status::Error("gbench: " + args[0] + " printed no JSON on stdout"));
  // The record names this verity build: the benchmark binary is built from the
  // same tree, so parity evidence from this build's `verity parity` binds to it.
  const nlohmann::json build = {{"id", BuildId()}, {"artifact_sha256", ArtifactSha256()}};
  const std::string workload = "gbench " + std::filesystem::path(binary).filename().string() + shown;
  auto rec = measure::GbenchToBench(report, build, binary, *sha, workload, "gbench: " + args[0]);
  if (!rec.ok()) return Fail(rec.status());
  std::printf("%s\n", JsonLine(*rec).c_str());
  return 0;
}

}  // namespace

void RegisterGbenchCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "gbench",
      "Run a Google Benchmark binary (`verity gbench -- BINARY [ARGS]`) and print its results as one "
      "verity.bench/1 record: each benchmark's real time in ns as metric <name>_ns (lower is better).");
  auto args = std::make_shared<std::vector<std::string>>();
  sub->add_option("command", *args, "the benchmark binary and its arguments (after --)")->required();
  reg.On(sub, [=] { return RunGbench(*args); });
}

}  // namespace verity::cli
