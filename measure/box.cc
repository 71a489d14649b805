// The box fingerprint: what must be equal for two timings to be comparable.
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/sha256.h"
#include "measure/measure.h"

namespace verity::measure {
namespace {

std::string FirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

Box ThisBox() {
  nlohmann::json d;
  d["cpu"] = CpuModel();
  d["cores"] = static_cast<int>(std::thread::hardware_concurrency());
  utsname u{};
  d["kernel"] = uname(&u) == 0 ? std::string(u.release) : "unknown";
  std::string gov = FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  if (!gov.empty()) d["governor"] = gov;
  std::string nv = FirstLine("/proc/driver/nvidia/version");
  if (!nv.empty()) d["gpu_driver"] = nv;
  std::string gpu = FirstLine("/proc/driver/nvidia/gpus/0000:00:00.0/information");
  if (!gpu.empty()) d["gpu"] = gpu;
  Box b;
  b.detail = d.dump();
  b.fingerprint = Sha256Hex(b.detail).substr(0, 16);
  return b;
}

}  // namespace verity::measure
