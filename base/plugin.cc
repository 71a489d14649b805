#include "base/plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "base/env.h"

#ifndef VERITY_PLUGIN_BUILD_DIR
#define VERITY_PLUGIN_BUILD_DIR ""
#endif

namespace verity::plugin {
namespace {

// The directory of the running executable, or "" when /proc is unreadable.
std::string ExecutableDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Opens `file` from the first search directory holding it.
Result<void*> Open(const std::string& file) {
  const std::vector<std::string> dirs = SearchDirs();
  std::string tried;
  for (const std::string& dir : dirs) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (!std::filesystem::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the plugin's own copies of verity code stay its own.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return Status::Error("plugin " + file + ": dlopen(" + path + ") failed: " + (why ? why : "unknown error"));
    }
    return handle;
  }
  const std::string where = env::PluginDir().empty() ? "" : " (VERITY_PLUGIN_DIR=" + env::PluginDir() + ")";
  return Status::Error("plugin " + file + " not found" + where + ": tried " + (tried.empty() ? "no directory" : tried) +
                       " (is verity built with it? see docs/cuda.md)");
}

}  // namespace

std::vector<std::string> SearchDirs() {
  const std::string forced = env::PluginDir();
  if (!forced.empty()) return {forced};
  std::vector<std::string> dirs;
  for (const std::string& d : {ExecutableDir(), std::string(VERITY_PLUGIN_BUILD_DIR)}) {
    std::error_code ec;
    const std::string canonical = std::filesystem::weakly_canonical(d, ec).string();
    if (d.empty() || ec || std::find(dirs.begin(), dirs.end(), canonical) != dirs.end()) continue;
    dirs.push_back(canonical);  // verity in <build>/cli: both are the same directory
  }
  return dirs;
}

Result<void*> Symbol(const std::string& file, const std::string& symbol) {
  static std::mutex mu;
  static std::map<std::string, void*> opened;  // file -> handle, never closed
  std::lock_guard<std::mutex> lock(mu);
  void* handle = nullptr;
  if (auto it = opened.find(file); it != opened.end()) {
    handle = it->second;
  } else {
    VERITY_ASSIGN_OR_RETURN(handle, Open(file));
    opened[file] = handle;
  }
  dlerror();  // clear any earlier error
  void* sym = dlsym(handle, symbol.c_str());
  if (sym == nullptr) {
    const char* why = dlerror();
    return Status::Error("plugin " + file + ": dlsym(" + symbol + ") failed: " + (why ? why : "symbol is null"));
  }
  return sym;
}

}  // namespace verity::plugin
