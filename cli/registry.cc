#include "cli/registry.h"

#include <cstdio>

namespace verity::cli {

int Fail(const Status& s) {
  std::fprintf(stderr, "verity: error: %s\n", s.message().c_str());
  return 1;
}

std::string JsonLine(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int ParseAndRun(CLI::App& app, const Registry& reg, const std::string& program, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const auto subs = app.get_subcommands();
    const std::string help = subs.empty() ? program + " --help" : program + " " + subs.front()->get_name() + " --help";
    std::fprintf(stderr, "%s: error: %s (usage: `%s`)\n", program.c_str(), e.what(), help.c_str());
    return 2;
  }
  return reg.Run();
}

}  // namespace verity::cli
