// `verity`: both products in one binary, the engine's commands and the
// ledger's. The work lives in the libraries; cli/engine/ and cli/ledger/ wire
// them to subcommands, and `verity-ledger` (ledger_main.cc) is the second alone.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "base/build_info.h"
#include "cli/engine/commands.h"
#include "cli/ledger/commands.h"
#include "cli/registry.h"
#include "kernels/cpu/simd.h"

namespace {
// One line for a CI log: which release, which commit (with -dirty if the tree
// had changes), which bytes, and which kernels this CPU gets.
std::string VersionLine() {
  std::string line = std::string("verity ") + verity::Version() + " build " + verity::BuildId() + " artifact-sha256 " +
                     verity::ArtifactSha256() + " simd " + verity::kernels::simd::TargetName();
  if (*verity::CorruptionName() != '\0') line += std::string(" corruption ") + verity::CorruptionName();
  return line;
}
}  // namespace

int main(int argc, char** argv) {
  // A VERITY_SIMD_TARGET this build does not hold is a usage error (exit 2),
  // said here: the cap itself is applied before main(), where nothing may exit.
  if (const std::string cap = verity::kernels::simd::CapError(); !cap.empty()) {
    std::fprintf(stderr, "verity: %s\n", cap.c_str());
    return 2;
  }
  CLI::App app{
      "verity: an LLM inference engine and the ledger that keeps its performance claims honest.\n"
      "Engine: generate, logits, bench, synth, convert, audit, probe, preflight, parity, parity-tokens, parity-logits, "
      "sweep, tokenize. Serving: serve, loadgen.\n"
      "Ledger: submit, show, frontier, history, remeasure, confirm, revert, reapply, retract, ledger verify|migrate, "
      "report, roofline, adapt, gbench.\n"
      "Run `verity <command> --help`; `verity-ledger` has the ledger's commands alone."};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine,
                       "print the version, the commit built, the executable's sha256 and the SIMD target, and exit");
  verity::cli::Registry reg;
  verity::cli::RegisterAllEngineCommands(app, reg);
  verity::cli::RegisterAllLedgerCommands(app, reg, verity::cli::MeasureCudaRooflineRecord);
  return verity::cli::ParseAndRun(app, reg, "verity", argc, argv);
}
