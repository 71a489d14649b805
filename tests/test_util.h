// Helpers shared by the tests: run the built `verity` binary, temp dirs, files.
#pragma once

#include <string>
#include <vector>

namespace verity::test {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `command` with sh -c, capturing stdout and stderr separately.
CommandResult Shell(const std::string& command);
// Absolute path of the built verity binary, and the repository root.
std::string VerityBin();
std::string SourceDir();
std::string Model(const std::string& name);  // SourceDir()/models/name
// A fresh empty directory, removed when the test binary exits.
std::string TempDir(const std::string& tag);
std::string TempRootDir();  // where every TempDir and Shell's output lives (removed at exit)
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

}  // namespace verity::test
