// The bench's bound on memory (issue 10's weights + KV cache + 10%), applied
// to what the model adds to the process rather than to the whole process.
// Header-only so that tests can check the arithmetic with numbers.
#pragma once

#include <cstdio>
#include <string>

namespace verity::cli {

// Fixed room above weights + KV cache + 10% for what a process first touches
// only once a model runs, whatever its size: code pages of the loader and the
// kernels faulted in after the baseline (~0.8 MiB of file-backed pages on
// stories260K), page-granular edges of the copied tensors, the allocator's
// arenas and thread stacks, and the bench's own 8 bytes per timed token.
// stories260K needs 1.5-2.0 MiB of it (1 to 16 threads, --min-seconds 2); 4
// MiB is the ledger's memory floor too (policy v3), so both call the same
// amount noise.
constexpr double kRssSlackMiB = 4.0;

// The most the model may add to the resident set, in MiB.
inline double RssLimitMb(double weights_mb, double kv_cache_mb) {
  return (weights_mb + kv_cache_mb) * 1.1 + kRssSlackMiB;
}

// A bench's memory against the bound: the peak resident set (VmHWM) less the
// baseline (VmRSS just before the model was loaded: binary, libraries,
// allocator, the backend and its threads) is what the model added.
struct RssBound {
  double peak_mb = 0.0, baseline_mb = 0.0, weights_mb = 0.0, kv_cache_mb = 0.0;

  double added_mb() const { return peak_mb - baseline_mb; }
  double limit_mb() const { return RssLimitMb(weights_mb, kv_cache_mb); }
  bool within() const { return added_mb() <= limit_mb(); }
  // "peak RSS 14.2 MiB = baseline 10.9 MiB before the model + 3.3 MiB added:
  // within weights 1.0 MiB + KV cache 0.6 MiB + 10% + 4.0 MiB slack = 5.8 MiB"
  std::string Line() const {
    char b[320];
    std::snprintf(b, sizeof b,
                  "peak RSS %.1f MiB = baseline %.1f MiB before the model + %.1f MiB added: %s weights %.1f MiB + "
                  "KV cache %.1f MiB + 10%% + %.1f MiB slack = %.1f MiB",
                  peak_mb, baseline_mb, added_mb(), within() ? "within" : "ABOVE", weights_mb, kv_cache_mb,
                  kRssSlackMiB, limit_mb());
    return b;
  }
};

}  // namespace verity::cli
