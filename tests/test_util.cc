#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace verity::test {
namespace fs = std::filesystem;

namespace {
struct TempRoot {
  fs::path root;
  TempRoot() {
    char tmpl[] = "/tmp/verity-test-XXXXXX";
    root = mkdtemp(tmpl);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};
TempRoot& Root() {
  static TempRoot r;
  return r;
}
}  // namespace

CommandResult Shell(const std::string& command) {
  static int counter = 0;
  fs::path base = Root().root / ("cmd" + std::to_string(counter++));
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
// $VERITY_SOURCE_DIR first: a test binary carried to another machine (the
// GPU box's --prebuilt run) finds the models and sources where they are now,
// not where it was built.
std::string SourceDir() {
  const char* env = std::getenv("VERITY_SOURCE_DIR");
  return env && *env ? env : VERITY_SOURCE_DIR;
}
std::string Model(const std::string& name) { return SourceDir() + "/models/" + name; }

std::string TempDir(const std::string& tag) {
  static int counter = 0;
  fs::path p = Root().root / (tag + std::to_string(counter++));
  fs::create_directories(p);
  return p.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

}  // namespace verity::test
