// The helpers of tests/test_util.h that run commands: Shell, and VerityBin
// (the binary this test library was built for: verity or verity-ledger).
#include "tests/test_util.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace verity::test {
namespace fs = std::filesystem;

CommandResult Shell(const std::string& command) {
  static int counter = 0;
  fs::path base = fs::path(TempRootDir()) / ("cmd" + std::to_string(counter++));
  std::string out = base.string() + ".out", err = base.string() + ".err";
  std::string full = "(" + command + ") >" + out + " 2>" + err;
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

std::string VerityBin() { return VERITY_BIN; }

}  // namespace verity::test
