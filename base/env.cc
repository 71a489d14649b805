#include "base/env.h"

#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

namespace verity::env {
namespace {
// Returns the variable's value, or an empty string when unset.
std::string Get(const char* name) {
  const char* v = std::getenv(name);  // the only getenv in the project
  return v ? std::string(v) : std::string();
}
int GetInt(const char* name, int fallback, int lo, int hi) {
  std::string v = Get(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < lo || n > hi) return fallback;
  return static_cast<int>(n);
}
}  // namespace

int Threads() {
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  return GetInt("VERITY_THREADS", hw > 0 ? hw : 1, 1, 1024);
}
bool ParityDeep() { return Get("VERITY_PARITY_MODE") == "deep"; }
std::string LedgerPath() {
  std::string v = Get("VERITY_LEDGER");
  return v.empty() ? "verity.db" : v;
}
int CommandTimeoutSeconds() { return GetInt("VERITY_BENCH_TIMEOUT_S", 600, 1, 86400); }
std::string WorktreeCache(const std::string& repo_root) {
  std::string v = Get("VERITY_WORKTREES");
  return v.empty() ? repo_root + "/.verity/worktrees" : v;
}

std::string LedgerKey() {
  static std::mutex mu;
  static std::string key;
  std::lock_guard<std::mutex> lock(mu);
  std::string v = Get("VERITY_LEDGER_KEY");
  if (!v.empty()) {
    key = std::move(v);
    unsetenv("VERITY_LEDGER_KEY");  // child processes (the code being measured) must not see it
  }
  return key;
}

std::string LockDir() {
  std::string v = Get("VERITY_LOCK_DIR");
  return v.empty() ? "/tmp" : v;
}

std::string BoxLabel() { return Get("VERITY_BOX_LABEL"); }
std::string CacheDir() {
  std::string v = Get("VERITY_CACHE_DIR");
  if (!v.empty()) return v;
  std::string home = Get("HOME");
  return home.empty() ? "/tmp/verity-cache" : home + "/.cache/verity";
}

std::string PluginDir() { return Get("VERITY_PLUGIN_DIR"); }

std::string ExecutableSearchPath() { return Get("PATH"); }
int BenchChunkMacs() { return GetInt("VERITY_BENCH_CHUNK_MACS", 16384, 1, 1 << 30); }
bool CudaDependentLaunch() { return Get("VERITY_CUDA_PDL") != "0"; }
bool CudaL2Prefetch() { return Get("VERITY_CUDA_L2_PREFETCH") != "0"; }
bool CudaProfile() { return Get("VERITY_CUDA_PROFILE") == "1"; }
bool CudaNormFused() { return Get("VERITY_CUDA_NORM_FUSED") == "1"; }
bool CudaFlashPrefill() { return Get("VERITY_CUDA_FLASH_PREFILL") == "1"; }
bool CudaBatchMma() { return Get("VERITY_CUDA_BATCH_MMA") == "1"; }
bool CudaQ8Int16() { return Get("VERITY_CUDA_Q8_INT16") == "1"; }
std::string CudaPrefillBlock() { return Get("VERITY_CUDA_PREFILL_BLOCK"); }
std::string SimdTarget() { return Get("VERITY_SIMD_TARGET"); }
std::string StreamPrefetch() { return Get("VERITY_STREAM_PREFETCH"); }

MpiLauncher MpiLauncherWorld() {
  MpiLauncher l;
  for (auto [size, rank] :
       {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    l.value = Get(size);
    if (l.value.empty()) continue;
    l.variable = size;
    l.size = GetInt(size, -1, 1, 1 << 24);
    l.rank = GetInt(rank, 0, 0, 1 << 24);
    return l;
  }
  return MpiLauncher{};
}

}  // namespace verity::env
