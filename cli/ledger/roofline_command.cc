// verity roofline: this box's read bandwidth and FMA throughput, measured once
// and cached per box fingerprint (VERITY_CACHE_DIR); --refresh re-measures and
// keeps the higher best per point, --replace starts over, --probe measures
// without touching the cache (the bandwidth of this minute, to set beside a
// run taken in the same minute on a shared box). --backend cuda measures the
// GPU instead, through the engine's measurement (cli/engine/device_roofline.cc:
// `verity` passes it in, `verity-ledger` has none), cached as box
// "<fingerprint>-cuda0".
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "cli/ledger/commands.h"
#include "measure/box_lock.h"
#include "measure/measure.h"
#include "measure/roofline.h"

namespace verity::cli {
namespace {

struct RooflineFlags {
  bool json = false, refresh = false, replace = false, probe = false;
  int buffer_mb = 0, repetitions = 20;  // buffer_mb 0: 1024 for the CPU, 4096 for a GPU
  std::string backend = "cpu";
};

std::string Points(const std::vector<measure::RooflinePoint>& pts, const char* unit) {
  std::string s;
  for (const auto& p : pts) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s%d thread%s %.2f %s (median %.2f)", s.empty() ? "" : "; ", p.threads,
                  p.threads == 1 ? "" : "s", p.best, unit, p.median);
    s += buf;
  }
  return s;
}

// Fills in the default buffer size and refuses flags out of range or at odds.
Status CheckRooflineFlags(RooflineFlags& f, bool can_measure_device) {
  if (f.buffer_mb == 0) f.buffer_mb = f.backend == "cuda" ? 4096 : 1024;
  if (f.buffer_mb < 1 || f.buffer_mb > 65536)
    return Status::Error("--buffer-mb " + std::to_string(f.buffer_mb) + " is outside [1, 65536]");
  if (f.repetitions < 1 || f.repetitions > 1000)
    return Status::Error("--repetitions " + std::to_string(f.repetitions) + " is outside [1, 1000]");
  if (f.probe && (f.refresh || f.replace))
    return Status::Error(
        "--probe measures without touching the cache; it cannot be combined with --refresh or "
        "--replace");
  if (f.backend != "cpu" && f.backend != "cuda") return Status::Error("--backend " + f.backend + " is not cpu or cuda");
  if (f.backend == "cuda" && !can_measure_device)
    return Status::Error(
        "--backend cuda: verity-ledger measures this box's CPU and memory alone; a GPU's "
        "roofline is measured by `verity roofline --backend cuda` (the same cache)");
  return OkStatus();
}

// What is measured and where its figures are cached.
struct RooflineTarget {
  bool device = false;  // GPU 0 rather than this box's CPU and memory
  std::string dir;      // VERITY_CACHE_DIR
  measure::Box box;
  std::string fingerprint, path;  // the cache's box (the device's for a GPU) and its file
};

RooflineTarget ThisTarget(bool device) {
  RooflineTarget t;
  t.device = device;
  t.dir = env::CacheDir();
  t.box = measure::ThisBox();
  t.fingerprint = device ? measure::DeviceRooflineFingerprint(t.box.fingerprint) : t.box.fingerprint;
  t.path = measure::RooflineCachePath(t.dir, t.fingerprint);
  return t;
}

// The cached roofline into `r`, if there is one; with --refresh a cache that
// cannot be read is noted and left to be measured afresh.
Status ReadCachedRoofline(const RooflineFlags& f, const RooflineTarget& t, std::optional<measure::Roofline>& r) {
  auto cached = measure::CachedRoofline(t.dir, t.fingerprint);
  if (cached.ok()) {
    r = std::move(cached.value());
  } else if (f.refresh) {  // a cache that cannot be read is replaced, not merged
    std::fprintf(stderr, "verity: note: %s; measuring afresh\n", cached.status().message().c_str());
  } else {
    return cached.status();
  }
  return OkStatus();
}

// Measures (the box lock held by the caller), keeps the higher best of each
// point over `earlier` (--refresh) and, unless probing, caches the result.
Result<measure::Roofline> MeasureAndCache(const RooflineFlags& f, const RooflineTarget& t,
                                          const MeasureDeviceRoofline& measure_device,
                                          const std::optional<measure::Roofline>& earlier) {
  measure::RooflineOptions o;
  o.buffer_bytes = static_cast<uint64_t>(f.buffer_mb) << 20;
  o.repetitions = f.repetitions;
  std::fprintf(stderr, "verity: measuring the roofline of %s %s (%d MiB read buffer, %d passes per point)...\n",
               t.device ? "device 0 of box" : "box", t.box.fingerprint.c_str(), f.buffer_mb, f.repetitions);
  auto m = t.device ? measure_device(f.buffer_mb, f.repetitions, t.fingerprint) : measure::MeasureRoofline(o);
  if (!m.ok()) return m.status();
  if (earlier)
    for (const std::string& line : measure::KeepHigherBests(*earlier, &m.value()))
      std::fprintf(stderr, "verity: %s\n", line.c_str());
  if (!f.probe) {
    Status s = measure::SaveRoofline(t.dir, m.value());
    if (!s.ok()) return s;
    std::fprintf(stderr, "verity: cached in %s\n", t.path.c_str());
  }
  return m;
}

// A busy box shows as passes far slower than the best one. The best is what
// is kept (the ledger's physical ceiling uses it), so say when to distrust it.
void NoteBusyPasses(const measure::Roofline& r, bool device) {
  for (const auto* pts : {&r.read, &r.fma})
    for (const auto& p : *pts)
      if (p.median < 0.8 * p.best)
        std::fprintf(stderr,
                     "verity: note: %s at %d thread%s: the median pass is %.0f%% below the best; the box looks busy "
                     "(run `verity roofline%s --refresh` again when it is idle)\n",
                     pts == &r.read ? "read bandwidth" : "FMA throughput", p.threads, p.threads == 1 ? "" : "s",
                     100.0 * (1.0 - p.median / p.best), device ? " --backend cuda" : "");
}

void PrintRooflineJson(const measure::Roofline& r, const RooflineFlags& f, const RooflineTarget& t,
                       const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(measure::RooflineJson(r));
  j["source"] = source;
  if (!f.probe) j["cache_file"] = t.path;
  std::printf("%s\n", JsonLine(j).c_str());
}

void PrintRooflineText(const measure::Roofline& r, const RooflineFlags& f, const RooflineTarget& t,
                       const std::string& source) {
  nlohmann::json d = nlohmann::json::parse(r.box_detail.empty() ? "{}" : r.box_detail, nullptr, false);
  std::string cpu = d.is_object() && d.contains("cpu") && d["cpu"].is_string() ? d["cpu"].get<std::string>() : "?";
  std::string cores = d.is_object() && d.contains("cores") ? d["cores"].dump() + " cores" : "? cores";
  if (t.device && d.is_object() && d.contains("device") && d["device"].is_string())  // a GPU: its name and SMs
    cpu = d["device"].get<std::string>(), cores = (d.contains("sms") ? d["sms"].dump() : "?") + " SMs";
  std::printf(
      "roofline of box %s (%s, %s), measured %s with %s loops over a %llu MiB buffer, %d passes per "
      "point; %s\n",
      r.fingerprint.c_str(), cpu.c_str(), cores.c_str(), r.measured_at.c_str(), r.isa.c_str(),
      static_cast<unsigned long long>(r.buffer_bytes >> 20), r.repetitions,
      f.probe ? "a probe, not cached"
              : (std::string(source == "cache" ? "from the cache " : "cached in ") + t.path).c_str());
  std::printf("  read bandwidth: %s\n", Points(r.read, "GB/s").c_str());
  std::printf("  %s: %s\n", t.device ? "bf16 tensor-core throughput" : "FMA throughput",
              Points(r.fma, "GFLOP/s").c_str());
}

int RunRoofline(RooflineFlags f, const MeasureDeviceRoofline& measure_device) {
  if (Status s = CheckRooflineFlags(f, static_cast<bool>(measure_device)); !s.ok()) return Fail(s);
  const RooflineTarget t = ThisTarget(f.backend == "cuda");
  std::optional<measure::Roofline> r, earlier;
  std::string source = "cache";
  if (!f.replace && !f.probe)
    if (Status s = ReadCachedRoofline(f, t, r); !s.ok()) return Fail(s);
  if (f.refresh) earlier = std::move(r), r.reset();
  if (!r) {
    source = f.probe ? "probe" : "measured";
    // The ledger's per-box measurement lock: a roofline measured while a
    // submission times its rounds would disturb both.
    auto lock = measure::BoxLock::Acquire(env::LockDir(), t.box.fingerprint, [](const std::string& msg) {
      std::fprintf(stderr, "verity: %s\n", msg.c_str());
    });
    if (!lock.ok()) return Fail(lock.status());
    auto m = MeasureAndCache(f, t, measure_device, earlier);
    if (!m.ok()) return Fail(m.status());
    r = std::move(m.value());
    NoteBusyPasses(*r, t.device);
  }
  if (f.json) PrintRooflineJson(*r, f, t, source);
  else PrintRooflineText(*r, f, t, source);
  return 0;
}

}  // namespace

void RegisterRooflineCommand(CLI::App& app, Registry& reg, MeasureDeviceRoofline measure_device) {
  auto* sub = app.add_subcommand(
      "roofline",
      "This box's read bandwidth (GB/s) and FMA throughput (GFLOP/s) at 1 thread and every core: measured once, "
      "cached per box fingerprint in VERITY_CACHE_DIR (default ~/.cache/verity).");
  auto f = std::make_shared<RooflineFlags>();
  sub->add_flag("--json", f->json, "print one verity.roofline/1 JSON object");
  sub->add_flag("--refresh", f->refresh,
                "measure again; per point the higher best of this pass and the cached one is kept (a busy box only "
                "ever measures low)");
  sub->add_flag("--replace", f->replace, "measure again and discard the cached figures");
  sub->add_flag("--probe", f->probe,
                "measure now and print, leaving the cache as it is: this minute's bandwidth, to compare with a run "
                "taken beside it on a shared box");
  sub->add_option("--backend", f->backend,
                  "cpu: this box's memory and cores; cuda: GPU 0's memory (a streaming kernel) and bf16 tensor cores "
                  "(cuBLAS GEMMs), cached as box <fingerprint>-cuda0")
      ->capture_default_str();
  sub->add_option("--buffer-mb", f->buffer_mb,
                  "read buffer in MiB when measuring (default 1024; 4096 with --backend cuda)");
  sub->add_option("--repetitions", f->repetitions, "timed passes per point when measuring (best and median reported)")
      ->capture_default_str();
  reg.On(sub, [=] { return RunRoofline(*f, measure_device); });
}

}  // namespace verity::cli
