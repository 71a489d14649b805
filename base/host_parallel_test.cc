#include "base/host_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace verity {
namespace {

// Every split of many (n, grain, threads): the ranges cover [0, n) once, start
// at multiples of grain, and all but the last are whole grains long.
TEST(HostParallel, RangesCoverEveryIndexOnceOnGrainBoundaries) {
  std::mt19937 rng(7);
  int splits = 0;
  for (int trial = 0; trial < 600; trial++) {
    const int64_t n = std::uniform_int_distribution<int64_t>(0, trial % 3 == 0 ? 40 : 5000)(rng);
    const int64_t grain = std::uniform_int_distribution<int64_t>(1, 300)(rng);
    const int threads = std::uniform_int_distribution<int>(0, 9)(rng);
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::set<std::thread::id> ran_on;
    ParallelRanges(n, grain, threads, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      ranges.emplace_back(b, e);
      ran_on.insert(std::this_thread::get_id());
    });
    std::sort(ranges.begin(), ranges.end());
    int64_t at = 0;
    for (size_t i = 0; i < ranges.size(); i++) {
      const auto [b, e] = ranges[i];
      ASSERT_EQ(b, at) << "n " << n << " grain " << grain << " threads " << threads;
      ASSERT_LT(b, e);
      ASSERT_EQ(b % grain, 0);
      if (i + 1 < ranges.size()) {
        ASSERT_EQ((e - b) % grain, 0);
      }
      at = e;
    }
    ASSERT_EQ(at, n) << "grain " << grain << " threads " << threads;
    ASSERT_LE(ran_on.size(), static_cast<size_t>(std::max(threads, 1)));
    if (n <= grain || threads <= 1) {
      ASSERT_LE(ranges.size(), 1u) << "n " << n << " grain " << grain << " threads " << threads;
      if (n > 0) {
        ASSERT_EQ(*ran_on.begin(), std::this_thread::get_id());
      }
    }
    splits += ranges.size() > 1;
  }
  EXPECT_GT(splits, 300);
  std::printf("host parallel: 600 splits checked, %d into several ranges\n", splits);
}

// Work is handed to other threads: each range waits (up to 10 s) until a
// second thread has entered one, which only a split that runs can satisfy.
TEST(HostParallel, RangesRunOnSeveralThreads) {
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  std::atomic<int> entered{0};
  ParallelRanges(64, 1, 4, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ran_on.insert(std::this_thread::get_id());
      entered = static_cast<int>(ran_on.size());
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  EXPECT_GE(ran_on.size(), 2u);
  EXPECT_LE(ran_on.size(), 4u);
}

}  // namespace
}  // namespace verity
