// What every subcommand of either product shares: the registry that carries
// a subcommand's exit code to main, the error line, the JSON line. CLI11,
// nlohmann and base only, so that neither product's commands need the other's.
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

// Parses argv into `app` and runs the chosen subcommand: --help exits 0 as
// CLI11 prints it; any other parse error is one line naming the flag or value
// and exit 2 (CLI11's own codes, 100-120, say nothing to a script beyond "not 0").
int ParseAndRun(CLI::App& app, const Registry& reg, const std::string& program, int argc, char** argv);

}  // namespace verity::cli
