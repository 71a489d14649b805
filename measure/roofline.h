// The roofline of this box: how fast it can read memory and how many FMAs it
// can issue, measured once and cached per box fingerprint, so that a bench can
// say what fraction of the physically possible it reached. Also the placement
// helpers (CPU affinity) that the roofline loops and `verity bench` share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::measure {

// One measured point: `repetitions` timed passes at `threads` threads.
struct RooflinePoint {
  int threads = 0;
  double best = 0.0;    // the fastest pass
  double median = 0.0;  // the median pass
};

// Schema "verity.roofline/1". Bandwidth in GB/s (1e9 bytes per second), FMA
// throughput in GFLOP/s (one fused multiply-add counts as 2 flops).
struct Roofline {
  std::string fingerprint;    // measure::ThisBox().fingerprint when measured
  std::string box_detail;     // measure::ThisBox().detail (canonical JSON)
  std::string measured_at;    // UTC, ISO 8601
  std::string isa;            // the instruction set the loops ran on: avx512f, avx2, sse2, generic
  uint64_t buffer_bytes = 0;  // the read buffer, shared by all threads of a point
  int repetitions = 0;
  std::vector<RooflinePoint> read;  // streaming read bandwidth, GB/s, ascending threads
  std::vector<RooflinePoint> fma;   // FMA throughput, GFLOP/s, ascending threads

  // The best read bandwidth measured at exactly `threads`; nullopt when that
  // thread count was not measured.
  std::optional<double> ReadGbS(int threads) const;
  std::optional<double> FmaGflops(int threads) const;
};

struct RooflineOptions {
  uint64_t buffer_bytes = uint64_t{1} << 30;  // 1 GiB: far beyond any cache
  int repetitions = 20;                       // short passes: the best of many finds a quiet moment on a shared box
  // Thread counts to measure; empty = 1, the powers of two below the number of
  // usable CPUs, and that number.
  std::vector<int> threads;
};

// The thread counts RooflineOptions{}.threads stands for on this box.
std::vector<int> DefaultRooflineThreads();

// Measures the roofline now (a few seconds: the buffer is allocated and
// touched once, then every point runs `repetitions` passes; each thread is
// pinned to its own CPU where the OS allows). Errors name what failed (e.g.
// the buffer could not be allocated).
Result<Roofline> MeasureRoofline(const RooflineOptions& options);

// The roofline as one verity.roofline/1 JSON object (indent < 0: one line).
std::string RooflineJson(const Roofline& r, int indent = -1);
// Parses a verity.roofline/1 object strictly (schema, every field typed, every
// figure positive and finite). `what` (e.g. the file) starts every error.
Result<Roofline> ParseRoofline(const std::string& text, const std::string& what);

// A fresh measurement merged with an earlier one of the same box: per point,
// the higher best is kept (a busy neighbour only ever slows a pass, so the
// fastest pass ever seen is the best estimate of what the box can do; a low
// ceiling would reject honest results as implausible), the median is the
// fresh one. Returns one line per point where the earlier best was kept.
std::vector<std::string> KeepHigherBests(const Roofline& earlier, Roofline* fresh);

// The cache name of GPU 0's roofline on box `box_fingerprint` (`verity roofline
// --backend cuda`): "<box_fingerprint>-cuda0". Its record has one point each:
// read_gb_s is HBM read bandwidth, fma_gflops bf16 tensor-core throughput.
std::string DeviceRooflineFingerprint(const std::string& box_fingerprint);
// That record, measured now: one point each at "threads" 1 (the device),
// summarising the read passes' GB/s and the GEMMs' GFLOP/s (each non-empty).
Roofline DeviceRooflineRecord(const std::string& fingerprint, const std::string& detail_json, const std::string& isa,
                              uint64_t buffer_bytes, int repetitions, std::vector<double> read_gb_s,
                              std::vector<double> gflops);

// <cache_dir>/roofline-<fingerprint>.json
std::string RooflineCachePath(const std::string& cache_dir, const std::string& fingerprint);
// The cached roofline of the box `fingerprint`: nullopt when none was cached.
// A cache file that cannot be read or parsed, or that names another box, is an
// error naming the file (run `verity roofline --refresh` to replace it).
Result<std::optional<Roofline>> CachedRoofline(const std::string& cache_dir, const std::string& fingerprint);
// Writes `r` to RooflineCachePath(cache_dir, r.fingerprint), creating the
// directory; atomic (a temporary file renamed into place).
Status SaveRoofline(const std::string& cache_dir, const Roofline& r);

// Placement. CPUs this process may run on (sched_getaffinity), ascending;
// empty where the OS does not say.
std::vector<int> AllowedCpus();
// The CPUs for `n` compute threads, as `verity bench` pins them: the one this
// thread runs on first (the OS put it where it is least busy), then the other
// allowed ones in order. Empty when there are fewer than n or the OS does not say.
std::vector<int> ChooseCpus(int n);
// Pins the calling thread to `cpu`. False where the OS refuses or has no affinity.
bool PinThisThread(int cpu);
// Pins every thread of this process, in thread-id order (the main thread
// first), each to its own CPU of `cpus`, in order. Needs at least as many CPUs
// as threads: false (nothing changed) otherwise, and false where the OS
// refuses (threads pinned before the refusal stay pinned).
bool PinEveryThread(const std::vector<int>& cpus);
// Thread ids of this process (Linux: /proc/self/task), ascending.
std::vector<int> ThreadIds();

}  // namespace verity::measure
