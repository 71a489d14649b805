// The helpers of tests/test_util.h that need no binary (verity_test_files).
#include "tests/test_util.h"

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

std::string TempRootDir() { return Root().root.string(); }

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
