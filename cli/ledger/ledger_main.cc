// `verity-ledger`: the ledger alone, for a team that scores its own engine.
// Built from cli/ledger/ and the ledger's libraries; it contains no engine
// (cli/CMakeLists.txt refuses the link), and its commands are the very ones
// `verity` has.
#include <CLI/CLI.hpp>

#include <string>

#include "base/build_info.h"
#include "cli/ledger/commands.h"
#include "cli/registry.h"

int main(int argc, char** argv) {
  CLI::App app{
      "verity-ledger: the benchmark-and-regression ledger of verity, without its engine. It scores any engine whose "
      "commands print verity.bench/1 and verity.parity/1 records (protocol/README.md).\n"
      "Commands: submit, calibrate, show, frontier, history, remeasure, confirm, revert, reapply, retract, ledger "
      "verify|migrate|copy, report, roofline (this box's CPU), adapt, gbench. Run `verity-ledger <command> --help`."};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version",
      [] {
        std::string line = std::string("verity-ledger ") + verity::Version() + " build " + verity::BuildId() +
                           " artifact-sha256 " + verity::ArtifactSha256();
        if (*verity::CorruptionName() != '\0') line += std::string(" corruption ") + verity::CorruptionName();
        return line;
      },
      "print the version, the commit built and the executable's sha256, and exit");
  verity::cli::Registry reg;
  verity::cli::RegisterAllLedgerCommands(app, reg);
  return verity::cli::ParseAndRun(app, reg, "verity-ledger", argc, argv);
}
