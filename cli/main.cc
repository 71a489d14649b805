// The one `verity` binary: CLI11 subcommands wiring the libraries together.
// Each Register* function adds one subcommand; the work lives in the libraries.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "verity: an LLM inference engine and the ledger that keeps its performance claims honest.\n"
      "Engine: generate, logits, bench, roofline, synth, convert, audit, probe, preflight, parity, sweep, tokenize. Ledger: submit, show, frontier, history, remeasure,\n"
      "confirm, revert, reapply, retract, ledger verify|migrate, report. Run `verity <command> --help`."};
  app.require_subcommand(1);
  verity::cli::Registry reg;
  verity::cli::RegisterEngineCommands(app, reg);
  verity::cli::RegisterBenchCommand(app, reg);
  verity::cli::RegisterRooflineCommand(app, reg);
  verity::cli::RegisterGbenchCommand(app, reg);
  verity::cli::RegisterCheckpointCommands(app, reg);
  verity::cli::RegisterTokenizeCommand(app, reg);
  verity::cli::RegisterParityCommand(app, reg);
  verity::cli::RegisterLedgerCommands(app, reg);
  verity::cli::RegisterQueryCommands(app, reg);
  verity::cli::RegisterLedgerAdminCommands(app, reg);
  verity::cli::RegisterReportCommand(app, reg);
  CLI11_PARSE(app, argc, argv);
  return reg.Run();
}
