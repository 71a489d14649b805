// How the decode kernels prefetch their weight rows: the hint and distance
// StreamPrefetch() (simd.h) chose for this CPU, and the measurements behind
// them. Shared by simd_matvec.cc, simd_q8.cc and block_dot.cc; no instruction here needs more
// than the x86-64 baseline (prefetch hints are no-ops where unsupported).
#pragma once

#include <cstddef>

#include "kernels/cpu/simd.h"

namespace verity::kernels::simd {

// bf16, q8_0 and the block types' decode prefetch their weight stream ahead of
// their loads, with the hint and distance StreamPrefetch() chose for this CPU:
// - kNonTemporal, 8 KB ahead (x86 prefetchnta, Arm pldl1strm): on the Zen 5
//   box, one core, interleaved `verity bench` on the ~110M synth: decode +15%
//   (bf16) and +20% (q8_0) with 16-token prompts, +11% and +13% with 512; 4 KB
//   ahead gained less, 16 KB less again; prefetcht1 16 KB ahead for q8_0 had
//   gained nothing end to end (ledger change 23). The hint matters as much as
//   the distance: lines fetched non-temporally are not kept in L3 when they
//   leave L1/L2, so the weights, read once per token, stop flushing the KV
//   cache.
// - kT0, 1 KB ahead (prefetcht0): on a Zen 3 EPYC (2026-12-01), in a
//   stand-alone loop over 200 MB (768- and 2048-wide rows, six runs of 30-120
//   interleaved passes on a shared box), the bf16 dot read 0.75-0.87 of a
//   plain read with it against 0.66-0.80 with no prefetch and 0.73-0.81 with
//   the 8 KB non-temporal one; 512 B and 1.5-4 KB gained less, prefetcht1
//   2 KB and two hints at once lost. End to end, `verity bench` on the ~110M
//   synth at 1 thread, pp16: bf16 47-50 tok/s against 43-49 (nta), q8_0 80-86
//   against 70-83; ledger change 35 (bf16, pp512+tg512): +13.28%. Why Zen 3
//   differs from Zen 5 here is not established (without a prefetch, a
//   version with a third fewer instructions per line streamed no faster).
// - kOff: on an Intel Xeon (the 16-core machine lent with a GPU, 2026-11-30,
//   kernels_bench BM_DecodeVsStream, ABBA) the non-temporal prefetch cost q8_0
//   40% (6.5 against 10.9 GB/s from DRAM, one core) and bf16 13% (7.8 against
//   9.1): there prefetchnta fills L1 without training the L2 streamer.
// f32, already at ~93% of the probe, is left as is: the non-temporal prefetch
// issued per row cost it 7% (ledger change 28, branch exp-f32-nta), and
// prefetcht0 1 KB ahead cost it ~10% on the Zen 3 loop.
constexpr size_t kStreamAheadNonTemporal = 8192, kStreamAheadT0 = 1024;

// Prefetches the line kStreamAhead* bytes past p, with hint H.
template <StreamPrefetchHint H>
[[gnu::always_inline]] inline void PrefetchAhead(const void* p) {
  const char* c = static_cast<const char*>(p);
  if constexpr (H == StreamPrefetchHint::kNonTemporal) __builtin_prefetch(c + kStreamAheadNonTemporal, 0, 0);
  if constexpr (H == StreamPrefetchHint::kT0) __builtin_prefetch(c + kStreamAheadT0, 0, 3);
}

// Every line of a row of `bytes` bytes at p, ahead (once per row, before it is read).
[[gnu::always_inline]] inline void PrefetchRowAhead(StreamPrefetchHint h, const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  if (h == StreamPrefetchHint::kNonTemporal)
    for (size_t off = 0; off < bytes; off += 64) PrefetchAhead<StreamPrefetchHint::kNonTemporal>(c + off);
  if (h == StreamPrefetchHint::kT0)
    for (size_t off = 0; off < bytes; off += 64) PrefetchAhead<StreamPrefetchHint::kT0>(c + off);
}

}  // namespace verity::kernels::simd
