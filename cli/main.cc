// The one `verity` binary: CLI11 subcommands wiring the libraries together.
// Each Register* function adds one subcommand; the work lives in the libraries.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "base/build_info.h"
#include "cli/commands.h"
#include "kernels/cpu/simd.h"

namespace {
// One line for a CI log: which release, which commit (with -dirty if the tree
// had changes), which bytes, and which kernels this CPU gets.
std::string VersionLine() {
  std::string line = std::string("verity ") + verity::Version() + " build " + verity::BuildId() +
                     " artifact-sha256 " + verity::ArtifactSha256() + " simd " +
                     verity::kernels::simd::TargetName();
  if (*verity::CorruptionName() != '\0') line += std::string(" corruption ") + verity::CorruptionName();
  return line;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "verity: an LLM inference engine and the ledger that keeps its performance claims honest.\n"
      "Engine: generate, logits, bench, adapt, roofline, synth, convert, audit, probe, preflight, parity, sweep, tokenize. Serving: serve, loadgen. Ledger: submit, show, frontier, history, remeasure,\n"
      "confirm, revert, reapply, retract, ledger verify|migrate, report. Run `verity <command> --help`."};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine,
                       "print the version, the commit built, the executable's sha256 and the SIMD target, and exit");
  verity::cli::Registry reg;
  verity::cli::RegisterEngineCommands(app, reg);
  verity::cli::RegisterBenchCommand(app, reg);
  verity::cli::RegisterRooflineCommand(app, reg);
  verity::cli::RegisterGbenchCommand(app, reg);
  verity::cli::RegisterAdaptCommand(app, reg);
  verity::cli::RegisterCheckpointCommands(app, reg);
  verity::cli::RegisterTokenizeCommand(app, reg);
  verity::cli::RegisterParityCommand(app, reg);
  verity::cli::RegisterExternalParityCommands(app, reg);
  verity::cli::RegisterLedgerCommands(app, reg);
  verity::cli::RegisterQueryCommands(app, reg);
  verity::cli::RegisterLedgerAdminCommands(app, reg);
  verity::cli::RegisterReportCommand(app, reg);
  verity::cli::RegisterServeCommand(app, reg);
  verity::cli::RegisterLoadgenCommand(app, reg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (exit 0) prints as CLI11 does. Any other parse error is a usage
    // error: one line naming the flag or value, and exit 2 (CLI11's own codes,
    // 100-120, say nothing to a script beyond "not 0").
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const auto subs = app.get_subcommands();
    const std::string help = subs.empty() ? "verity --help" : "verity " + subs.front()->get_name() + " --help";
    std::fprintf(stderr, "verity: error: %s (usage: `%s`)\n", e.what(), help.c_str());
    return 2;
  }
  return reg.Run();
}
