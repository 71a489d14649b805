// `verity bench`'s own verity.bench/1 record: the envelope every bench
// prints (bench_record.h) plus what verity says about how it measured
// (spread, roofline, memory, placement, the thread pool, the kernels). Every
// --output format prints this one struct; --from-json reads it back.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::protocol {

// How the timed window's jobs were shared out among the compute threads.
struct PoolCounts {
  uint64_t split_jobs = 0;         // jobs shared with other threads
  uint64_t caller_jobs = 0;        // jobs run on the calling thread alone (too small, or in a backoff)
  uint64_t backoff_jobs = 0;       // of those, the ones a backoff sent there
  uint64_t stalls = 0;             // split jobs a late worker made slower than one thread
  uint64_t contended_windows = 0;  // windows in which a pool thread waited for a CPU > 5% of the time
};

// The cuda backend's speed switches (base/env.h); the defaults are a build's
// when nothing is set.
struct CudaSwitches {
  bool flash_prefill = false;    // VERITY_CUDA_FLASH_PREFILL=1
  bool q8_int16 = false;         // VERITY_CUDA_Q8_INT16=1
  bool norm_fused = false;       // VERITY_CUDA_NORM_FUSED=1
  bool dependent_launch = true;  // VERITY_CUDA_PDL=0 turns it off
  bool l2_whole_rows = true;     // VERITY_CUDA_L2_PREFETCH=0: 2 KB a row instead
  // Positions per prefill pass (VERITY_CUDA_PREFILL_BLOCK; 512 in records
  // written before 2026-12-07, which did not name it).
  int prefill_block = 512;
};
// "VERITY_CUDA_Q8_INT16=1 VERITY_CUDA_PDL=0": the variables set away from
// their defaults, in the field order above; "defaults" when none is.
std::string CudaSwitchesSet(const CudaSwitches& s);

// Where a bench process's wall time went, in seconds, phase by phase: making
// the backend (a plugin's libraries and device), loading the model (mapping,
// converting), making the decoder (its state and caches), the first prompt
// (a device backend's uploads and first recordings happen there), the rest
// of the warm-up, and the timed generations. A ledger round runs each
// command four times, so these say what a round costs beyond its timed
// window (docs/bench.md).
struct RunPhases {
  double backend_s = 0.0, load_s = 0.0, decoder_s = 0.0, first_prompt_s = 0.0, warmup_s = 0.0, timed_s = 0.0;
};
// "backend 0.41 s, model load 1.02 s, decoder 0.00 s, first prompt 0.90 s,
// warm-up 1.20 s, timed 1.50 s (5.03 s in all)".
std::string RunPhasesLine(const RunPhases& p);

struct VerityBenchRecord {
  std::string build_id, artifact_sha256;
  std::string model, backend, dtype = "f32";
  int threads = 1;  // compute threads (the reference backend runs on 1)
  int prompt_tokens = 0, gen_tokens = 0, warmup_tokens = 0;
  // Sequences decoded together (--batch): each decode step runs one position
  // of each, and decode_tok_s counts them all. 1 in records written before it existed.
  int batch = 1;
  int generations = 0;  // timed generations run
  double min_seconds = 0.0;
  // metrics: the ledger guards every one of these, oriented by name
  double decode_tok_s = 0.0, prefill_tok_s = 0.0, prefill_gflops = 0.0;
  std::optional<double> peak_rss_mb;  // VmHWM in MiB; absent where /proc does not say
  // memory: the model's resident weights and its KV cache (MiB), and the bound
  // they imply on what the model adds to the process's resident set; absent
  // in records from before they were reported
  std::optional<double> weights_mb, kv_cache_mb, rss_limit_mb;
  // VmRSS just before the model was loaded: peak_rss_mb less this is what the
  // bound judges; absent in older records
  std::optional<double> baseline_rss_mb;
  // spread
  double decode_mad_pct = 0.0;  // median absolute deviation of decode token times, % of the median
  int samples = 0;              // decode token times behind decode_tok_s
  // the same about each decode position's median over generations (null below 3 generations)
  std::optional<double> decode_position_mad_pct;
  // % of the timed window the compute threads spent ready but waiting for a
  // CPU (other work on the box); null where the kernel does not say
  std::optional<double> runqueue_wait_pct;
  // roofline
  double bytes_per_token = 0.0, achieved_gb_s = 0.0;
  std::optional<double> read_gb_s, fraction;  // null: the box's roofline is not cached
  // The KV cache a timed decoded token reads on average, and the traffic and
  // fraction with it (null in records written before they existed; the
  // fraction also without a roofline).
  std::optional<double> kv_bytes_per_token, achieved_gb_s_with_kv, fraction_with_kv;
  // placement
  std::vector<int> cpus;           // the CPUs the process was confined to; empty = not pinned
  bool per_thread = false;         // each compute thread on its own CPU of `cpus`
  std::string box;                 // the box's fingerprint
  std::optional<PoolCounts> pool;  // null on one thread
  // Which variant of the fast kernels ran (null for the other backends, and
  // in records written before it existed): the SIMD target and whether
  // bf16/q8_0 prefetched their weights ahead, with which hint ("nta", "t0",
  // "off"; absent in records written before it existed).
  std::optional<std::string> simd_target;
  std::optional<bool> stream_prefetch;
  std::optional<std::string> stream_prefetch_hint;
  // The cuda backend's variant (null for the others, and in records written
  // before it existed): whether a batched step's bf16 and q8_0 products ran on tensor
  // cores (VERITY_CUDA_BATCH_MMA=1), which changes their bits (docs/cuda.md).
  std::optional<bool> cuda_batch_mma;
  // The cuda backend's other switches as the run had them (null for the
  // other backends, and in records written before 2026-12-07): each
  // VERITY_CUDA_* variable that picks a kernel (docs/cuda.md). flash_prefill
  // and q8_int16 change bits, as batch_mma does; the others change none.
  std::optional<CudaSwitches> cuda_switches;
  // Where the process's time went (absent in records written before
  // 2026-12-07).
  std::optional<RunPhases> phases;
};

// The record as `verity bench` prints it: the envelope (bench_record.h's
// ToJson) with verity's detail beside it.
nlohmann::json ToJson(const VerityBenchRecord& r);

// Reads back every field ToJson writes (fields added later may be absent, as
// in records written before them); errors name the field and `what`.
[[nodiscard]] Result<VerityBenchRecord> VerityBenchFromJson(const nlohmann::json& j, const std::string& what);

}  // namespace verity::protocol
