// One-off host work split over threads: converting and repacking weights as
// a model loads or uploads (a 7B model's bf16 to q8_0 is ~7e9 values; on one
// thread it cost ~18 s of a 16-core GPU box's bench, 2026-12-04). Each call
// starts its threads and joins them before it returns, so nothing lingers
// between loads; the forward pass keeps its own pool
// (kernels/cpu/thread_pool.h), which this never touches.
//
// The work must not depend on the split: each range's output is the same
// bits whichever thread runs it (base/host_parallel_test.cc checks the
// ranges; the loaders' tests compare 1 thread with several).
#pragma once

#include <cstdint>
#include <functional>

namespace verity {

// Calls fn(begin, end) over disjoint ranges covering [0, n) exactly once, on
// up to `threads` threads (the caller is one of them), and returns when all
// are done. Every range starts at a multiple of `grain` (>= 1) and all but
// the last are a multiple of it long; n <= grain or threads <= 1 runs
// fn(0, n) on the caller. fn must not throw.
void ParallelRanges(int64_t n, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& fn);

// The threads a load converts with: VERITY_THREADS, else the hardware's
// (base/env.h's Threads()).
int LoadThreads();

// Bytes [0, n) of one buffer (zeroing it, mapping its pages, copying it) on
// the load's threads: fn(begin, end) over 2 MB pieces (a huge page is one
// thread's) from 8 MB on; a smaller buffer is fn(0, n) on the caller.
void ParallelBytes(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace verity
