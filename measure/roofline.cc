// The roofline: a streaming read over a buffer far larger than the caches and
// a loop of independent FMAs, at 1 thread and at every core, each thread
// pinned to its own CPU. The loops are probe/probe.h's, dispatched at run time
// to the best instruction set the CPU has, so the figures are what this box
// can do, not what the compiler's baseline target can.
#include "measure/roofline.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/huge_pages.h"
#include "measure/measure.h"
#include "probe/probe.h"

namespace verity::measure {
namespace {

using Clock = std::chrono::steady_clock;

// The loops are probe/'s (Highway, dispatched to the best instruction set
// the CPU runs): the kernel benchmarks measure with the same ones.

std::atomic<uint64_t> g_sink{0};  // keeps every loop's result alive

// ---- running threads together ----------------------------------------------

// Runs fn(t) for t in [0, threads) on `threads` threads (the caller is t = 0),
// thread t pinned to cpus[t] when there is one. Returns the seconds from the
// moment every thread was ready to the last one's finish.
double RunTogether(int threads, const std::vector<int>& cpus, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Clock::time_point> end(threads);
  auto body = [&](int t) {
    if (t < static_cast<int>(cpus.size())) PinThisThread(cpus[t]);
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    fn(t);
    end[t] = Clock::now();
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; t++) workers.emplace_back(body, t);
  if (!cpus.empty()) PinThisThread(cpus[0]);
  ready.fetch_add(1);
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  fn(0);
  end[0] = Clock::now();
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - start).count();
}

RooflinePoint Summarize(int threads, std::vector<double> rates) {
  std::sort(rates.begin(), rates.end());
  RooflinePoint p;
  p.threads = threads;
  p.best = rates.back();
  const size_t n = rates.size();
  p.median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
  return p;
}

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// An anonymous mapping (page aligned), released on scope exit.
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

nlohmann::json PointsJson(const std::vector<RooflinePoint>& pts) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : pts) a.push_back({{"threads", p.threads}, {"best", p.best}, {"median", p.median}});
  return a;
}

std::optional<double> BestAt(const std::vector<RooflinePoint>& pts, int threads) {
  for (const auto& p : pts)
    if (p.threads == threads) return p.best;
  return std::nullopt;
}

}  // namespace

std::optional<double> Roofline::ReadGbS(int threads) const { return BestAt(read, threads); }
std::optional<double> Roofline::FmaGflops(int threads) const { return BestAt(fma, threads); }

std::vector<int> DefaultRooflineThreads() {
  std::vector<int> cpus = AllowedCpus();
  int n = cpus.empty() ? static_cast<int>(std::thread::hardware_concurrency()) : static_cast<int>(cpus.size());
  n = std::max(n, 1);
  std::vector<int> t;
  for (int k = 1; k < n; k *= 2) t.push_back(k);
  t.push_back(n);
  return t;
}

namespace {

// The thread counts to measure at, sorted and distinct, each in [1, 1024].
Result<std::vector<int>> RooflineThreads(const RooflineOptions& o) {
  std::vector<int> threads = o.threads.empty() ? DefaultRooflineThreads() : o.threads;
  for (int t : threads)
    if (t < 1 || t > 1024)
      return Status::Error("roofline: thread count " + std::to_string(t) + " is outside [1, 1024]");
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  return threads;
}

// What one measurement shares: the points to take, where each thread runs,
// the read buffer.
struct Bench {
  std::vector<int> threads;
  int max_threads = 1;
  std::vector<int> cpus;
  int repetitions = 1;
  uint64_t buffer_bytes = 0;
  char* base = nullptr;

  // Pins thread t of a point to its own CPU when there are enough of them.
  std::vector<int> Placement(int t) const { return static_cast<int>(cpus.size()) >= t ? cpus : std::vector<int>{}; }
};

// Every page written once (by the threads that will read it at the widest
// point), so reads hit real memory, not the shared zero page.
void TouchEveryPage(const Bench& b) {
  RunTogether(b.max_threads, b.Placement(b.max_threads), [&](int t) {
    const uint64_t slice = b.buffer_bytes / b.max_threads;
    std::memset(b.base + t * slice, 0x5a + t, slice);
  });
}

std::vector<RooflinePoint> ReadPoints(const Bench& b) {
  std::vector<RooflinePoint> points;
  for (int t : b.threads) {
    const uint64_t slice = b.buffer_bytes / t;
    std::vector<double> rates;
    for (int rep = 0; rep < b.repetitions; rep++) {
      const double s = RunTogether(t, b.Placement(t), [&](int k) {
        g_sink.fetch_xor(probe::StreamRead(b.base + k * slice, slice), std::memory_order_relaxed);
      });
      rates.push_back(static_cast<double>(b.buffer_bytes) / std::max(s, 1e-9) / 1e9);
    }
    points.push_back(Summarize(t, std::move(rates)));
  }
  return points;
}

// FMA steps for one pass of about 50 ms on one thread.
int64_t FmaItersFor50Ms() {
  int64_t iters = 1 << 16;
  for (;;) {
    auto t0 = Clock::now();
    g_sink.fetch_xor(static_cast<uint64_t>(probe::FmaChains(iters)), std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= 0.01 || iters >= (int64_t{1} << 36))
      return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * 0.05 / std::max(s, 1e-9)));
    iters *= 4;
  }
}

std::vector<RooflinePoint> FmaPoints(const Bench& b) {
  const int64_t iters = FmaItersFor50Ms();
  const double flops_per_thread = static_cast<double>(iters) * probe::kFmaChains * probe::FmaLanes() * 2.0;
  std::vector<RooflinePoint> points;
  for (int t : b.threads) {
    std::vector<double> rates;
    for (int rep = 0; rep < b.repetitions; rep++) {
      const double s = RunTogether(t, b.Placement(t), [&](int) {
        g_sink.fetch_xor(static_cast<uint64_t>(probe::FmaChains(iters)), std::memory_order_relaxed);
      });
      rates.push_back(flops_per_thread * t / std::max(s, 1e-9) / 1e9);
    }
    points.push_back(Summarize(t, std::move(rates)));
  }
  return points;
}

}  // namespace

Result<Roofline> MeasureRoofline(const RooflineOptions& o) {
  if (o.repetitions < 1) return Status::Error("roofline: repetitions must be at least 1");
  const uint64_t kGrain = 1 << 16;  // every thread's slice is a multiple of this
  if (o.buffer_bytes < kGrain * 16)
    return Status::Error("roofline: buffer of " + std::to_string(o.buffer_bytes) +
                         " bytes is too small (at least 1 MiB)");
  Bench b;
  VERITY_ASSIGN_OR_RETURN(b.threads, RooflineThreads(o));
  b.max_threads = b.threads.back();
  b.cpus = AllowedCpus();
  b.repetitions = o.repetitions;
  cpu_set_t original;
  const bool have_mask = sched_getaffinity(0, sizeof(original), &original) == 0;

  Roofline r;
  Box box = ThisBox();
  r.fingerprint = box.fingerprint;
  r.box_detail = box.detail;
  r.isa = probe::ProbeTarget();
  r.repetitions = o.repetitions;
  r.buffer_bytes = o.buffer_bytes / (kGrain * b.max_threads) * (kGrain * b.max_threads);
  if (r.buffer_bytes == 0) r.buffer_bytes = kGrain * b.max_threads;
  b.buffer_bytes = r.buffer_bytes;

  // On huge pages where the kernel allows, as the engine streams its weights.
  std::unique_ptr<char, FreeDeleter> buf;
  try {
    buf.reset(static_cast<char*>(AllocateStreamed(r.buffer_bytes)));
  } catch (const std::bad_alloc&) {
    return Status::Error("roofline: cannot allocate a read buffer of " + std::to_string(r.buffer_bytes) + " bytes");
  }
  b.base = buf.get();
  TouchEveryPage(b);
  r.read = ReadPoints(b);
  r.fma = FmaPoints(b);
  if (have_mask) sched_setaffinity(0, sizeof(original), &original);  // the caller's placement back
  r.measured_at = UtcNow();
  return r;
}

std::string RooflineJson(const Roofline& r, int indent) {
  nlohmann::json detail = nlohmann::json::parse(r.box_detail.empty() ? "{}" : r.box_detail, nullptr, false);
  if (detail.is_discarded()) detail = r.box_detail;
  nlohmann::json j = {{"schema", "verity.roofline/1"},   {"box", {{"fingerprint", r.fingerprint}, {"detail", detail}}},
                      {"measured_at", r.measured_at},    {"isa", r.isa},
                      {"buffer_bytes", r.buffer_bytes},  {"repetitions", r.repetitions},
                      {"read_gb_s", PointsJson(r.read)}, {"fma_gflops", PointsJson(r.fma)}};
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<Roofline> ParseRoofline(const std::string& text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Error(what + ": not a JSON object");
  if (!j.contains("schema") || j["schema"] != "verity.roofline/1")
    return Status::Error(what + ": schema is not verity.roofline/1");
  auto str = [&](const nlohmann::json& o, const char* key, std::string* out) -> Status {
    if (!o.contains(key) || !o[key].is_string())
      return Status::Error(what + ": '" + key + "' is missing or not a string");
    *out = o[key].get<std::string>();
    return OkStatus();
  };
  Roofline r;
  if (!j.contains("box") || !j["box"].is_object()) return Status::Error(what + ": 'box' is missing or not an object");
  VERITY_RETURN_IF_ERROR(str(j["box"], "fingerprint", &r.fingerprint));
  if (j["box"].contains("detail")) r.box_detail = j["box"]["detail"].dump();
  VERITY_RETURN_IF_ERROR(str(j, "measured_at", &r.measured_at));
  VERITY_RETURN_IF_ERROR(str(j, "isa", &r.isa));
  if (!j.contains("buffer_bytes") || !j["buffer_bytes"].is_number_unsigned() || j["buffer_bytes"].get<uint64_t>() == 0)
    return Status::Error(what + ": 'buffer_bytes' is missing or not a positive integer");
  r.buffer_bytes = j["buffer_bytes"].get<uint64_t>();
  if (!j.contains("repetitions") || !j["repetitions"].is_number_integer() || j["repetitions"].get<int>() < 1)
    return Status::Error(what + ": 'repetitions' is missing or not a positive integer");
  r.repetitions = j["repetitions"].get<int>();
  auto points = [&](const char* key, std::vector<RooflinePoint>* out) -> Status {
    if (!j.contains(key) || !j[key].is_array() || j[key].empty())
      return Status::Error(what + ": '" + key + "' is missing or not a non-empty array");
    for (size_t i = 0; i < j[key].size(); i++) {
      const auto& e = j[key][i];
      const std::string at = what + ": " + key + "[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("threads") || !e["threads"].is_number_integer() || e["threads"].get<int>() < 1)
        return Status::Error(at + ".threads is missing or not a positive integer");
      RooflinePoint p;
      p.threads = e["threads"].get<int>();
      for (auto [name, dst] : {std::pair<const char*, double*>{"best", &p.best}, {"median", &p.median}}) {
        if (!e.contains(name) || !e[name].is_number() || !std::isfinite(e[name].get<double>()) ||
            e[name].get<double>() <= 0.0)
          return Status::Error(at + "." + name + " is missing or not a positive finite number");
        *dst = e[name].get<double>();
      }
      out->push_back(p);
    }
    return OkStatus();
  };
  VERITY_RETURN_IF_ERROR(points("read_gb_s", &r.read));
  VERITY_RETURN_IF_ERROR(points("fma_gflops", &r.fma));
  return r;
}

std::vector<std::string> KeepHigherBests(const Roofline& earlier, Roofline* fresh) {
  std::vector<std::string> kept;
  auto merge = [&](const std::vector<RooflinePoint>& old, std::vector<RooflinePoint>* now, const char* what) {
    for (RooflinePoint& p : *now)
      for (const RooflinePoint& o : old)
        if (o.threads == p.threads && o.best > p.best) {
          char line[200];
          std::snprintf(line, sizeof(line), "%s at %d thread%s: kept the earlier best %.2f (this pass: %.2f)", what,
                        p.threads, p.threads == 1 ? "" : "s", o.best, p.best);
          kept.emplace_back(line);
          p.best = o.best;
          p.median = std::min(p.median, p.best);
        }
  };
  merge(earlier.read, &fresh->read, "read bandwidth");
  merge(earlier.fma, &fresh->fma, "FMA throughput");
  return kept;
}

constexpr std::string_view kDeviceSuffix = "-cuda0";  // GPU 0 of a box

std::string DeviceRooflineFingerprint(const std::string& box_fingerprint) {
  return box_fingerprint + std::string(kDeviceSuffix);
}

Roofline DeviceRooflineRecord(const std::string& fingerprint, const std::string& detail_json, const std::string& isa,
                              uint64_t buffer_bytes, int repetitions, std::vector<double> read_gb_s,
                              std::vector<double> gflops) {
  Roofline r;
  r.fingerprint = fingerprint;
  r.box_detail = detail_json;
  r.measured_at = UtcNow();
  r.isa = isa;
  r.buffer_bytes = buffer_bytes;
  r.repetitions = repetitions;
  r.read = {Summarize(1, std::move(read_gb_s))};
  r.fma = {Summarize(1, std::move(gflops))};
  return r;
}

std::string RooflineCachePath(const std::string& cache_dir, const std::string& fingerprint) {
  return cache_dir + "/roofline-" + fingerprint + ".json";
}

Result<std::optional<Roofline>> CachedRoofline(const std::string& cache_dir, const std::string& fingerprint) {
  const std::string path = RooflineCachePath(cache_dir, fingerprint);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Roofline>();
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  // A device entry is refreshed with --backend cuda.
  const bool device = fingerprint.size() > kDeviceSuffix.size() &&
                      std::string_view(fingerprint).substr(fingerprint.size() - kDeviceSuffix.size()) == kDeviceSuffix;
  const std::string hint =
      device ? " (run `verity roofline --backend cuda --refresh`)" : " (run `verity roofline --refresh`)";
  if (!f) return Status::Error("roofline cache " + path + ": cannot be read" + hint);
  auto r = ParseRoofline(ss.str(), "roofline cache " + path);
  if (!r.ok()) return Status::Error(r.status().message() + hint);
  if (r->fingerprint != fingerprint)
    return Status::Error("roofline cache " + path + ": measured on box " + r->fingerprint + ", not " + fingerprint +
                         hint);
  return std::optional<Roofline>(std::move(r.value()));
}

Status SaveRoofline(const std::string& cache_dir, const Roofline& r) {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) return Status::Error("roofline cache " + cache_dir + ": cannot create the directory: " + ec.message());
  const std::string path = RooflineCachePath(cache_dir, r.fingerprint);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << RooflineJson(r, 2) << "\n";
    f.close();
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return Status::Error("roofline cache " + tmp + ": cannot write");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::Error("roofline cache " + path + ": cannot rename into place: " + ec.message());
  }
  return OkStatus();
}

std::vector<int> AllowedCpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::vector<int> ChooseCpus(int n) {
  std::vector<int> allowed = AllowedCpus();
  if (static_cast<int>(allowed.size()) < n || n < 1) return {};
  auto it = std::find(allowed.begin(), allowed.end(), sched_getcpu());
  if (it != allowed.end()) std::rotate(allowed.begin(), it, allowed.end());
  allowed.resize(n);
  return allowed;
}

bool PinThisThread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;  // 0: the calling thread
}

std::vector<int> ThreadIds() {
  std::vector<int> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) ids.push_back(std::stoi(name));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool PinEveryThread(const std::vector<int>& cpus) {
  std::vector<int> ids = ThreadIds();
  if (ids.empty() || ids.size() > cpus.size()) return false;
  const int main_tid = static_cast<int>(getpid());
  auto it = std::find(ids.begin(), ids.end(), main_tid);
  if (it != ids.end()) std::rotate(ids.begin(), it, it + 1);  // the main thread first
  for (size_t i = 0; i < ids.size(); i++) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[i], &set);
    if (sched_setaffinity(ids[i], sizeof(set), &set) != 0) return false;
  }
  return true;
}

}  // namespace verity::measure
