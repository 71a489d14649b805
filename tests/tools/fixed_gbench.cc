// A real Google Benchmark binary whose times are known, so a test can score
// gbench reports without timing this machine. A test copies it into one
// folder per side (base/, head/), as two builds of one benchmark would be, so
// both sides run the same file name with the same arguments; each copy reads
// its times from `times` beside it:
//   WORK_NS GUARD_NS NOISE SEED
// BM_Work reports WORK_NS (in ms, its time_unit) and BM_Guard GUARD_NS (in us;
// none when 0), by manual timing, each scaled by one draw from N(1, NOISE^2)
// per run, seeded from SEED and a run counter kept in `runs` beside it (so
// successive runs differ, reproducibly, as fake_bench's do).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

struct Times {
  double work_ns = 0, guard_ns = 0, noise = 0;
  unsigned long long seed = 0;
};

std::filesystem::path Beside(const char* name) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / name;
}

// This run's counter from `runs`, bumped for the next run.
long NextRun() {
  long counter = 0;
  const auto runs = Beside("runs");
  std::ifstream(runs) >> counter;
  std::ofstream(runs, std::ios::trunc) << counter + 1;
  return counter;
}

void Register(const char* name, double seconds, benchmark::TimeUnit unit) {
  benchmark::RegisterBenchmark(name,
                               [seconds](benchmark::State& st) {
                                 for (auto _ : st) st.SetIterationTime(seconds);
                               })
      ->UseManualTime()
      ->Unit(unit);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  Times t;
  const auto file = Beside("times");
  if (!(std::ifstream(file) >> t.work_ns >> t.guard_ns >> t.noise >> t.seed) || t.work_ns <= 0) {
    std::fprintf(stderr, "fixed_gbench: %s: want 'WORK_NS GUARD_NS NOISE SEED' with WORK_NS > 0\n", file.c_str());
    return 2;
  }
  std::mt19937_64 rng(t.seed * 1000003ULL + static_cast<unsigned long long>(NextRun()));
  std::normal_distribution<double> scale(1.0, t.noise);
  const double s = t.noise > 0 ? scale(rng) : 1.0;
  Register("BM_Work", t.work_ns * s * 1e-9, benchmark::kMillisecond);
  if (t.guard_ns > 0) Register("BM_Guard", t.guard_ns * s * 1e-9, benchmark::kMicrosecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
