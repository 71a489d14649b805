// Subcommand registration. A subcommand's callback stores its exit code in the
// registry; main returns it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace verity::cli {

class Registry {
 public:
  // Runs `fn` when `sub` was chosen on the command line.
  void On(CLI::App* sub, std::function<int()> fn) {
    sub->callback([this, fn] { code_ = fn(); });
  }
  int Run() const { return code_; }

 private:
  int code_ = 0;
};

// Prints "verity: error: <message>" on stderr and returns exit code 1.
int Fail(const Status& s);
// One JSON object as one line. Recorded command output may hold any bytes:
// invalid UTF-8 is printed as U+FFFD rather than aborting the program.
std::string JsonLine(const nlohmann::json& j);

void RegisterEngineCommands(CLI::App& app, Registry& reg);
// bench (cli/bench_command.cc) and roofline (cli/roofline_command.cc).
void RegisterBenchCommand(CLI::App& app, Registry& reg);
void RegisterRooflineCommand(CLI::App& app, Registry& reg);
void RegisterGbenchCommand(CLI::App& app, Registry& reg);
void RegisterLedgerCommands(CLI::App& app, Registry& reg);
// show, frontier, history: printers over the ledger's read model.
void RegisterQueryCommands(CLI::App& app, Registry& reg);
// `ledger verify` (read-only, --expect-tip) and `ledger migrate`.
void RegisterLedgerAdminCommands(CLI::App& app, Registry& reg);
void RegisterParityCommand(CLI::App& app, Registry& reg);
void RegisterReportCommand(CLI::App& app, Registry& reg);
void RegisterCheckpointCommands(CLI::App& app, Registry& reg);
// tokenize (cli/tokenize_command.cc): any tokenizer file, encode or --decode.
void RegisterTokenizeCommand(CLI::App& app, Registry& reg);

}  // namespace verity::cli
