// File checks shared by every loader (a file of their own so that the
// tokenizer's fuzz target links without the whole engine).
#include <filesystem>

#include "engine/engine.h"

namespace verity {

Status CheckRegularFile(const std::string& path, const char* what) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return Status::Error(path + ": " + what + " does not exist");
  if (!std::filesystem::is_regular_file(st)) return Status::Error(path + ": " + what + " is not a regular file");
  return OkStatus();
}

}  // namespace verity
