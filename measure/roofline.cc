// The roofline: a streaming read over a buffer far larger than the caches and
// a loop of independent FMAs, at 1 thread and at every core, each thread
// pinned to its own CPU. The loops are written with intrinsics for each x86
// instruction set (chosen at run time from what the CPU has) and in plain C++
// elsewhere, so the figures are what this box can do, not what the compiler's
// baseline target can.
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

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VERITY_ROOFLINE_X86 1
#endif

namespace verity::measure {
namespace {

using Clock = std::chrono::steady_clock;

// ---- the loops -------------------------------------------------------------

// Each read loop XORs every 64-bit word of [p, p + bytes) into independent
// accumulators (bytes is a multiple of 512) and returns the folded result, so
// no load can be dropped.
#ifdef VERITY_ROOFLINE_X86
__attribute__((target("avx512f"))) uint64_t ReadAvx512(const char* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < bytes; i += 512) {
    const __m512i* q = reinterpret_cast<const __m512i*>(p + i);
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(q + 0));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(q + 1));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(q + 2));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(q + 3));
    a4 = _mm512_xor_si512(a4, _mm512_load_si512(q + 4));
    a5 = _mm512_xor_si512(a5, _mm512_load_si512(q + 5));
    a6 = _mm512_xor_si512(a6, _mm512_load_si512(q + 6));
    a7 = _mm512_xor_si512(a7, _mm512_load_si512(q + 7));
  }
  a0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)),
                        _mm512_xor_si512(_mm512_xor_si512(a4, a5), _mm512_xor_si512(a6, a7)));
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(reinterpret_cast<__m512i*>(lanes), a0);
  uint64_t r = 0;
  for (uint64_t v : lanes) r ^= v;
  return r;
}

__attribute__((target("avx2"))) uint64_t ReadAvx2(const char* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < bytes; i += 256) {
    const __m256i* q = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(q + 0));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(q + 1));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(q + 2));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(q + 3));
    a4 = _mm256_xor_si256(a4, _mm256_load_si256(q + 4));
    a5 = _mm256_xor_si256(a5, _mm256_load_si256(q + 5));
    a6 = _mm256_xor_si256(a6, _mm256_load_si256(q + 6));
    a7 = _mm256_xor_si256(a7, _mm256_load_si256(q + 7));
  }
  a0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)),
                        _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7)));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a0);
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
}

uint64_t ReadSse2(const char* p, size_t bytes) {
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < bytes; i += 128) {
    const __m128i* q = reinterpret_cast<const __m128i*>(p + i);
    a0 = _mm_xor_si128(a0, _mm_load_si128(q + 0));
    a1 = _mm_xor_si128(a1, _mm_load_si128(q + 1));
    a2 = _mm_xor_si128(a2, _mm_load_si128(q + 2));
    a3 = _mm_xor_si128(a3, _mm_load_si128(q + 3));
    a4 = _mm_xor_si128(a4, _mm_load_si128(q + 4));
    a5 = _mm_xor_si128(a5, _mm_load_si128(q + 5));
    a6 = _mm_xor_si128(a6, _mm_load_si128(q + 6));
    a7 = _mm_xor_si128(a7, _mm_load_si128(q + 7));
  }
  a0 = _mm_xor_si128(_mm_xor_si128(_mm_xor_si128(a0, a1), _mm_xor_si128(a2, a3)),
                     _mm_xor_si128(_mm_xor_si128(a4, a5), _mm_xor_si128(a6, a7)));
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), a0);
  return lanes[0] ^ lanes[1];
}
#endif

[[maybe_unused]] uint64_t ReadGeneric(const char* p, size_t bytes) {
  uint64_t a[8] = {};
  for (size_t i = 0; i < bytes; i += 64) {
    const uint64_t* q = reinterpret_cast<const uint64_t*>(p + i);
    for (int k = 0; k < 8; k++) a[k] ^= q[k];
  }
  uint64_t r = 0;
  for (uint64_t v : a) r ^= v;
  return r;
}

// Each FMA loop runs `iters` x 12 independent chains (enough to cover the FMA
// latency times the FMA ports of current cores) of acc = acc * m + c, which
// converges to c / (1 - m) without overflow or denormals. Returns a value
// depending on every chain, and the flops done.
constexpr int kChains = 12;
constexpr float kMul = 0.999999f, kAdd = 1e-6f;

#ifdef VERITY_ROOFLINE_X86
#define VERITY_FMA_CHAINS(T, SET1, OP)                                                                      \
  T m = SET1(kMul), c = SET1(kAdd);                                                                         \
  T a0 = SET1(0.1f), a1 = SET1(0.2f), a2 = SET1(0.3f), a3 = SET1(0.4f), a4 = SET1(0.5f), a5 = SET1(0.6f);   \
  T a6 = SET1(0.7f), a7 = SET1(0.8f), a8 = SET1(0.9f), a9 = SET1(1.0f), a10 = SET1(1.1f), a11 = SET1(1.2f); \
  for (int64_t i = 0; i < iters; i++) {                                                                     \
    a0 = OP(a0, m, c);                                                                                      \
    a1 = OP(a1, m, c);                                                                                      \
    a2 = OP(a2, m, c);                                                                                      \
    a3 = OP(a3, m, c);                                                                                      \
    a4 = OP(a4, m, c);                                                                                      \
    a5 = OP(a5, m, c);                                                                                      \
    a6 = OP(a6, m, c);                                                                                      \
    a7 = OP(a7, m, c);                                                                                      \
    a8 = OP(a8, m, c);                                                                                      \
    a9 = OP(a9, m, c);                                                                                      \
    a10 = OP(a10, m, c);                                                                                    \
    a11 = OP(a11, m, c);                                                                                    \
  }

__attribute__((target("avx512f"))) float FmaAvx512(int64_t iters) {
  VERITY_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps)
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

__attribute__((target("avx2,fma"))) float FmaAvx2(int64_t iters) {
  VERITY_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps)
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// SSE2 has no fused multiply-add: a multiply and an add (still 2 flops).
inline __m128 MulAdd128(__m128 a, __m128 m, __m128 c) { return _mm_add_ps(_mm_mul_ps(a, m), c); }
float FmaSse2(int64_t iters) {
  VERITY_FMA_CHAINS(__m128, _mm_set1_ps, MulAdd128)
  __m128 s = _mm_add_ps(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)),
                        _mm_add_ps(_mm_add_ps(a4, a5), _mm_add_ps(a6, a7)));
  s = _mm_add_ps(s, _mm_add_ps(_mm_add_ps(a8, a9), _mm_add_ps(a10, a11)));
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#undef VERITY_FMA_CHAINS
#endif

[[maybe_unused]] float FmaGeneric(int64_t iters) {
  float a[kChains][4];
  for (int k = 0; k < kChains; k++)
    for (int l = 0; l < 4; l++) a[k][l] = 0.1f * static_cast<float>(k + 1);
  for (int64_t i = 0; i < iters; i++)
    for (int k = 0; k < kChains; k++)
      for (int l = 0; l < 4; l++) a[k][l] = std::fma(a[k][l], kMul, kAdd);
  float r = 0;
  for (auto& row : a)
    for (float v : row) r += v;
  return r;
}

struct Isa {
  const char* name;
  uint64_t (*read)(const char*, size_t);
  float (*fma)(int64_t);
  int lanes;  // floats per FMA vector
};

Isa BestIsa() {
#ifdef VERITY_ROOFLINE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", ReadAvx512, FmaAvx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2", ReadAvx2, FmaAvx2, 8};
  return {"sse2", ReadSse2, FmaSse2, 4};
#else
  return {"generic", ReadGeneric, FmaGeneric, 4};
#endif
}

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

Result<Roofline> MeasureRoofline(const RooflineOptions& o) {
  if (o.repetitions < 1) return Status::Error("roofline: repetitions must be at least 1");
  const uint64_t kGrain = 1 << 16;  // every thread's slice is a multiple of this
  if (o.buffer_bytes < kGrain * 16)
    return Status::Error("roofline: buffer of " + std::to_string(o.buffer_bytes) +
                         " bytes is too small (at least 1 MiB)");
  std::vector<int> threads = o.threads.empty() ? DefaultRooflineThreads() : o.threads;
  for (int t : threads)
    if (t < 1 || t > 1024)
      return Status::Error("roofline: thread count " + std::to_string(t) + " is outside [1, 1024]");
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  const int max_threads = threads.back();

  const std::vector<int> cpus = AllowedCpus();
  cpu_set_t original;
  const bool have_mask = sched_getaffinity(0, sizeof(original), &original) == 0;

  const Isa isa = BestIsa();
  Roofline r;
  Box box = ThisBox();
  r.fingerprint = box.fingerprint;
  r.box_detail = box.detail;
  r.isa = isa.name;
  r.repetitions = o.repetitions;
  r.buffer_bytes = o.buffer_bytes / (kGrain * max_threads) * (kGrain * max_threads);
  if (r.buffer_bytes == 0) r.buffer_bytes = kGrain * max_threads;

  // On huge pages where the kernel allows, as the engine streams its weights.
  std::unique_ptr<char, FreeDeleter> buf;
  try {
    buf.reset(static_cast<char*>(AllocateStreamed(r.buffer_bytes)));
  } catch (const std::bad_alloc&) {
    return Status::Error("roofline: cannot allocate a read buffer of " + std::to_string(r.buffer_bytes) + " bytes");
  }
  char* base = buf.get();

  // Pins thread t of a point to its own CPU when there are enough of them.
  auto placement = [&](int t) { return static_cast<int>(cpus.size()) >= t ? cpus : std::vector<int>{}; };
  // Every page written once (by the threads that will read it at the widest
  // point), so reads hit real memory, not the shared zero page.
  RunTogether(max_threads, placement(max_threads), [&](int t) {
    const uint64_t slice = r.buffer_bytes / max_threads;
    std::memset(base + t * slice, 0x5a + t, slice);
  });

  for (int t : threads) {
    const uint64_t slice = r.buffer_bytes / t;
    std::vector<double> rates;
    for (int rep = 0; rep < o.repetitions; rep++) {
      const double s = RunTogether(t, placement(t), [&](int k) {
        g_sink.fetch_xor(isa.read(base + k * slice, slice), std::memory_order_relaxed);
      });
      rates.push_back(static_cast<double>(r.buffer_bytes) / std::max(s, 1e-9) / 1e9);
    }
    r.read.push_back(Summarize(t, std::move(rates)));
  }

  // FMA: size one pass to about 50 ms on one thread.
  int64_t iters = 1 << 16;
  for (;;) {
    auto t0 = Clock::now();
    g_sink.fetch_xor(static_cast<uint64_t>(isa.fma(iters)), std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= 0.01 || iters >= (int64_t{1} << 36)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * 0.05 / std::max(s, 1e-9)));
      break;
    }
    iters *= 4;
  }
  const double flops_per_thread = static_cast<double>(iters) * kChains * isa.lanes * 2.0;
  for (int t : threads) {
    std::vector<double> rates;
    for (int rep = 0; rep < o.repetitions; rep++) {
      const double s = RunTogether(t, placement(t), [&](int) {
        g_sink.fetch_xor(static_cast<uint64_t>(isa.fma(iters)), std::memory_order_relaxed);
      });
      rates.push_back(flops_per_thread * t / std::max(s, 1e-9) / 1e9);
    }
    r.fma.push_back(Summarize(t, std::move(rates)));
  }
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
