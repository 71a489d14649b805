#include "cli/commands.h"
namespace verity::cli {
void RegisterLedgerCommands(CLI::App&, Registry&) {}
}  // namespace verity::cli
