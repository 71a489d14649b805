// The box fingerprint: what must be equal for two timings to be comparable.
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/env.h"
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

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Words joined by single spaces (GCC 12 warns, wrongly, on `a + " " + b`
// with a conditional separator).
void AppendWord(std::string* out, const std::string& word) {
  if (!out->empty()) out->push_back(' ');
  out->append(word);
}

// The value of the first "key : value" line of /proc/cpuinfo's text whose key
// is `key`; empty when there is none.
std::string CpuinfoField(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

// The instruction-set extensions a kernel may choose between, in this order
// (cpuinfo's names). Only these, not every flag: the rest (mitigations,
// hypervisor bits) change with the kernel, which the fingerprint names anyway.
const char* const kIsaFlags[] = {"sse4_2",      "avx",           "avx2",         "fma",         "f16c",
                                 "bmi2",        "avx512f",       "avx512dq",     "avx512bw",    "avx512vl",
                                 "avx512_vnni", "avx512vbmi",    "avx512_vbmi2", "avx512_bf16", "avx512_fp16",
                                 "avx_vnni",    "avx_vnni_int8", "amx_tile",     "amx_int8",    "amx_bf16",
                                 "asimd",       "sve",           "sve2",         "i8mm",        "bf16"};

}  // namespace

nlohmann::json CpuIdentity(const std::string& cpuinfo) {
  // The first processor's block says it all, and the box is re-read after
  // every sample: a key it lacks (Arm's on x86) need not scan every core's.
  const std::string first = cpuinfo.substr(0, cpuinfo.find("\n\n"));
  nlohmann::json d;
  // Hypervisors often hide the model name ("AMD EPYC" on both a Zen 3 and a
  // Zen 5); the vendor, family, model and stepping numbers and the extensions
  // still tell CPUs apart, and timings from two of them are not comparable.
  std::string model = CpuinfoField(first, "model name");
  d["cpu"] = model.empty() ? "unknown" : model;
  std::string id;
  for (const char* key :
       {"vendor_id", "cpu family", "model", "stepping", "CPU implementer", "CPU part", "CPU variant"}) {
    const std::string v = CpuinfoField(first, key);
    if (!v.empty()) AppendWord(&id, std::string(key) + " " + v);
  }
  if (!id.empty()) d["cpu_id"] = id;
  const std::string cache = CpuinfoField(first, "cache size");
  if (!cache.empty()) d["cpu_cache"] = cache;
  std::set<std::string> flags;
  std::istringstream words(CpuinfoField(first, "flags") + " " + CpuinfoField(first, "Features"));
  for (std::string w; words >> w;) flags.insert(w);
  std::string isa;
  for (const char* f : kIsaFlags)
    if (flags.count(f)) AppendWord(&isa, f);
  if (!isa.empty()) d["isa"] = isa;
  return d;
}

Box ThisBox() {
  nlohmann::json d = CpuIdentity(ReadAll("/proc/cpuinfo"));
  d["cores"] = static_cast<int>(std::thread::hardware_concurrency());
  utsname u{};
  d["kernel"] = uname(&u) == 0 ? std::string(u.release) : "unknown";
  std::string gov = FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  if (!gov.empty()) d["governor"] = gov;
  std::string nv = FirstLine("/proc/driver/nvidia/version");
  if (!nv.empty()) d["gpu_driver"] = nv;
  std::string gpu = FirstLine("/proc/driver/nvidia/gpus/0000:00:00.0/information");
  if (!gpu.empty()) d["gpu"] = gpu;
  const std::string label = env::BoxLabel();
  if (!label.empty()) d["label"] = label;
  Box b;
  b.detail = d.dump();
  b.fingerprint = Sha256Hex(b.detail).substr(0, 16);
  b.machine = MachineFingerprint(b.detail);
  return b;
}

std::string MachineFingerprint(const std::string& detail) {
  nlohmann::json d = nlohmann::json::parse(detail, nullptr, false);
  if (!d.is_object()) return "";
  d.erase("label");
  return Sha256Hex(d.dump()).substr(0, 16);
}

}  // namespace verity::measure
