// The ledger's subcommands (verity_cli_ledger): submit, calibrate, show,
// frontier, history, remeasure, confirm, revert, reapply, retract, ledger
// verify|migrate|copy, report, roofline; and the adapters that turn another engine's
// benchmark output into a verity.bench/1 record (adapt, gbench). They score
// any engine's records and never link the engine: `verity-ledger` is built
// from them alone (cli/CMakeLists.txt refuses a link to the engine).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "base/status.h"
#include "cli/registry.h"
#include "measure/roofline.h"

namespace verity::cli {

void RegisterLedgerCommands(CLI::App& app, Registry& reg);
// show, frontier, history: printers over the ledger's read model.
void RegisterQueryCommands(CLI::App& app, Registry& reg);
// `ledger verify` (read-only, --expect-tip) and `ledger migrate`.
void RegisterLedgerAdminCommands(CLI::App& app, Registry& reg);
void RegisterReportCommand(CLI::App& app, Registry& reg);
void RegisterGbenchCommand(CLI::App& app, Registry& reg);
void RegisterAdaptCommand(CLI::App& app, Registry& reg);
// roofline: this box's ceilings, which bound every speed the ledger believes.
// `measure_device` measures a GPU for --backend cuda (the engine's; absent in
// verity-ledger, which then says where to measure one).
using MeasureDeviceRoofline =
    std::function<Result<measure::Roofline>(int buffer_mb, int repetitions, const std::string& fingerprint)>;
void RegisterRooflineCommand(CLI::App& app, Registry& reg, MeasureDeviceRoofline measure_device);

// All of the above, in the order `--help` lists them.
inline void RegisterAllLedgerCommands(CLI::App& app, Registry& reg, MeasureDeviceRoofline measure_device = nullptr) {
  RegisterRooflineCommand(app, reg, std::move(measure_device));
  RegisterGbenchCommand(app, reg);
  RegisterAdaptCommand(app, reg);
  RegisterLedgerCommands(app, reg);
  RegisterQueryCommands(app, reg);
  RegisterLedgerAdminCommands(app, reg);
  RegisterReportCommand(app, reg);
}

}  // namespace verity::cli
