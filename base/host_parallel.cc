// See host_parallel.h.
#include "base/host_parallel.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/huge_pages.h"

namespace verity {

void ParallelRanges(int64_t n, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;  // grains, the last maybe short
  const int workers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), units));
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  // About 4 chunks a thread: a thread the box delays holds back one small
  // chunk, not a quarter of the work.
  const int64_t per_chunk = std::max<int64_t>(1, units / (4 * int64_t{workers}));
  const int64_t chunks = (units + per_chunk - 1) / per_chunk;
  std::atomic<int64_t> next{0};
  auto run = [&] {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      const int64_t begin = c * per_chunk * grain;
      fn(begin, std::min(n, begin + per_chunk * grain));
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(workers - 1));
  for (int t = 1; t < workers; t++) {
    try {
      helpers.emplace_back(run);
    } catch (const std::system_error&) {
      break;  // no more threads to be had (a limit): those started and the caller finish the work
    }
  }
  run();
  for (std::thread& h : helpers) h.join();
}

int LoadThreads() { return env::Threads(); }

void ParallelBytes(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kSplitFrom = int64_t{8} << 20;
  ParallelRanges(n, static_cast<int64_t>(kHugePageBytes), n >= kSplitFrom ? LoadThreads() : 1, fn);
}

}  // namespace verity
