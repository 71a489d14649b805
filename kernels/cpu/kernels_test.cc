// The fast path's thread pool covers every index exactly once, job after job,
// and the fast kernels agree with the reference ones in every weight dtype.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/backends.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/kernels.h"

namespace verity::kernels {
namespace {

// Keeps this thread busy (not asleep) for `us` microseconds: work a chunk does.
void BusyFor(long us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(ThreadPool, EveryIndexExactlyOnceAcrossManyJobs) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    std::mt19937 rng(threads);
    for (int job = 0; job < 3000; job++) {
      const int n = 1 + static_cast<int>(rng() % 700);
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int b, int e) {
        ASSERT_LE(0, b);
        ASSERT_LE(e, n);
        for (int i = b; i < e; i++) hits[i].fetch_add(1);
      });
      for (int i = 0; i < n; i++)
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " job " << job << " index " << i;
    }
  }
}

TEST(ThreadPool, EveryIndexExactlyOnceWhenWorkersSleep) {
  // spin_us 0: workers go straight to the futex between jobs, so every job
  // exercises the wake-up path (and the caller's sleep while a worker finishes).
  ThreadPool pool(3, /*spin_us=*/0);
  std::mt19937 rng(5);
  for (int job = 0; job < 400; job++) {
    const int n = 1 + static_cast<int>(rng() % 300);
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int b, int e) {
      BusyFor(job % 4 == 0 ? 40 : 0);  // enough work per chunk that the caller wakes the sleepers
      for (int i = b; i < e; i++) hits[i].fetch_add(1);
    });
    for (int i = 0; i < n; i++) ASSERT_EQ(hits[i].load(), 1) << "job " << job << " index " << i;
  }
  const ThreadPool::Stats s = pool.stats();
  std::printf("pool (spin 0): %llu jobs, %llu inline, %llu chunks by workers, %llu wakes, %llu sleeps\n",
              static_cast<unsigned long long>(s.jobs), static_cast<unsigned long long>(s.inline_jobs),
              static_cast<unsigned long long>(s.worker_chunks), static_cast<unsigned long long>(s.wakes),
              static_cast<unsigned long long>(s.sleeps));
}

TEST(ThreadPool, GrainBoundsChunksAndSmallJobsRunOnTheCaller) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  for (int grain : {1, 7, 64, 1000}) {
    for (int n : {1, 5, 63, 64, 65, 999, 1000, 1001, 5000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<bool> short_chunk{false}, off_caller{false};
      pool.ParallelFor(
          n,
          [&](int b, int e) {
            if ((e - b) % grain != 0 && e != n) short_chunk = true;
            if (b % grain != 0) short_chunk = true;
            if (std::this_thread::get_id() != caller) off_caller = true;
            for (int i = b; i < e; i++) hits[i].fetch_add(1);
          },
          grain);
      for (int i = 0; i < n; i++) ASSERT_EQ(hits[i].load(), 1) << "grain " << grain << " n " << n;
      EXPECT_FALSE(short_chunk.load()) << "a range other than the last is not a multiple of grain " << grain << ", n "
                                       << n;
      if (n < 2 * grain) {
        EXPECT_FALSE(off_caller.load()) << "n " << n << " < 2 * grain " << grain << " left the caller";
      }
    }
  }
  // One thread: always inline.
  ThreadPool one(1);
  bool ran_here = false;
  one.ParallelFor(100000,
                  [&](int b, int e) { ran_here = (b == 0 && e == 100000 && std::this_thread::get_id() == caller); });
  EXPECT_TRUE(ran_here);
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(pool.size(), 2);
  pool.ParallelFor(0, [&](int, int) { ADD_FAILURE() << "n = 0 runs nothing"; });
}

TEST(ThreadPool, NestedAndConcurrentCallsRunInline) {
  ThreadPool pool(2);
  // Nested: the inner ParallelFor runs on the thread of the outer chunk.
  std::vector<std::atomic<int>> hits(64 * 50);
  pool.ParallelFor(64, [&](int b, int e) {
    for (int i = b; i < e; i++) {
      const auto outer = std::this_thread::get_id();
      pool.ParallelFor(50, [&](int ib, int ie) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        for (int k = ib; k < ie; k++) hits[i * 50 + k].fetch_add(1);
      });
    }
  });
  for (size_t i = 0; i < hits.size(); i++) ASSERT_EQ(hits[i].load(), 1) << i;
  // Two external threads share one pool: each job still covers its range once.
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 2; c++)
    callers.emplace_back([&, c] {
      std::mt19937 rng(c);
      for (int job = 0; job < 500; job++) {
        const int n = 1 + static_cast<int>(rng() % 500);
        std::vector<std::atomic<int>> h(n);
        pool.ParallelFor(n, [&](int b, int e) {
          for (int i = b; i < e; i++) h[i].fetch_add(1);
        });
        for (int i = 0; i < n; i++)
          if (h[i].load() != 1) bad++;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// A clock that moves only when a test moves it, on which no thread ever
// waits for a CPU: the pool's stall, backoff and contention rules then see
// exactly the times a test sets, however slowly this machine runs its threads.
class TestClock : public PoolClock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns_.load()));
  }
  int64_t RunDelayNs() const override { return 0; }
  void Advance(std::chrono::nanoseconds d) { ns_ += d.count(); }

 private:
  std::atomic<int64_t> ns_{int64_t{1} << 40};
};

// Polls until done(). The bound only turns a hang into a failure: nothing
// that works takes a minute, and no verdict rests on it.
template <class Done>
bool WaitUntil(const Done& done, const char* what) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "waited a minute for " << what;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// One 8-chunk job on a 2-thread pool with spin_us 0 whose clock only the job
// moves. Each chunk the caller runs takes 10 us; the worker takes exactly one
// chunk and finishes it `hold` after the caller went to sleep waiting for it.
// (The caller's second chunk waits until the worker holds a chunk, and the
// worker's chunk waits until the pool counts the caller asleep.) So the caller
// works 70 us, its pace predicts 80 us alone, and the job takes 70 us + hold.
// Returns whether the job ran so (not on the caller alone).
[[nodiscard]] bool JobWithAWorkerHolding(ThreadPool& pool, TestClock& clock, std::chrono::nanoseconds hold) {
  const auto caller = std::this_thread::get_id();
  const uint64_t caller_sleeps = pool.stats().caller_sleeps, worker_chunks = pool.stats().worker_chunks;
  std::atomic<bool> worker_in{false};
  std::atomic<int> caller_chunks{0}, covered{0};
  pool.ParallelFor(8, [&](int b, int e) {
    if (std::this_thread::get_id() == caller) {
      clock.Advance(std::chrono::microseconds(10));
      if (caller_chunks++ == 1) WaitUntil([&] { return worker_in.load(); }, "the worker to take a chunk");
    } else {
      worker_in = true;
      WaitUntil([&] { return pool.stats().caller_sleeps > caller_sleeps; }, "the caller to wait for the worker");
      clock.Advance(hold);
    }
    covered += e - b;
  });
  EXPECT_EQ(covered.load(), 8);
  if (caller_chunks.load() != 7) {
    ADD_FAILURE() << "the caller ran " << caller_chunks.load() << " chunks, not 7 with the worker holding one";
    return false;
  }
  // The worker counts its chunk after the job has returned here.
  return WaitUntil([&] { return pool.stats().worker_chunks == worker_chunks + 1; },
                   "the pool to count the worker's chunk");
}

// Jobs of 64 items that each take 10 us on the test clock; returns how many
// items ran off the calling thread.
int JobsOnTheCaller(ThreadPool& pool, TestClock& clock, int jobs) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  for (int job = 0; job < jobs; job++)
    pool.ParallelFor(64, [&](int b, int e) {
      if (std::this_thread::get_id() != caller) elsewhere += e - b;
      clock.Advance(std::chrono::microseconds(10));
    });
  return elsewhere.load();
}

TEST(ThreadPool, StalledWorkersSendJobsToTheCaller) {
  // A worker that sits on its chunk (as one descheduled by another process
  // would) makes the job slower than the caller alone after a long wait for
  // it: the pool then runs jobs on the caller only, for 5 ms, then 10 ms.
  TestClock clock;
  ThreadPool pool(2, /*spin_us=*/0, &clock);
  ASSERT_TRUE(JobWithAWorkerHolding(pool, clock, std::chrono::milliseconds(10)));
  ThreadPool::Stats s = pool.stats();
  EXPECT_EQ(s.jobs, 1u);
  EXPECT_EQ(s.stalls, 1u) << "the caller waited 10 ms on a job it does alone in 80 us";
  // 40 jobs of 10 us: the 5 ms backoff covers all of them.
  EXPECT_EQ(JobsOnTheCaller(pool, clock, 40), 0);
  s = pool.stats();
  EXPECT_EQ(s.solo_jobs, 40u);
  EXPECT_EQ(s.jobs, 1u);
  // Past the backoff, jobs are shared again; a worker that keeps the caller
  // waiting no time at all is no stall.
  clock.Advance(std::chrono::milliseconds(5));
  ASSERT_TRUE(JobWithAWorkerHolding(pool, clock, std::chrono::nanoseconds(0)));
  s = pool.stats();
  EXPECT_EQ(s.jobs, 2u);
  EXPECT_EQ(s.stalls, 1u);
  // A second stall soon after doubles the backoff: 6 ms later jobs still run alone.
  ASSERT_TRUE(JobWithAWorkerHolding(pool, clock, std::chrono::milliseconds(10)));
  clock.Advance(std::chrono::milliseconds(6));
  EXPECT_EQ(JobsOnTheCaller(pool, clock, 10), 0);
  s = pool.stats();
  EXPECT_EQ(s.stalls, 2u);
  EXPECT_EQ(s.solo_jobs, 50u);
  std::printf("stalling workers: %llu split, %llu stalls, %llu solo, %llu chunks by workers\n",
              static_cast<unsigned long long>(s.jobs), static_cast<unsigned long long>(s.stalls),
              static_cast<unsigned long long>(s.solo_jobs), static_cast<unsigned long long>(s.worker_chunks));
}

TEST(ThreadPool, AWorkerThatIsLateByMicrosecondsIsNotAStall) {
  // The caller does its 7 chunks in 70 us and then waits 100 us for the
  // worker's one: the job takes 2x what the caller's pace predicts (80 us),
  // but the wait is far under a time slice, so the worker was slow, not
  // descheduled. Before kStallWait each such job was a stall, and the
  // backoffs it started sent nearly every job to the caller alone.
  TestClock clock;
  ThreadPool pool(2, /*spin_us=*/0, &clock);
  for (int job = 0; job < 20; job++)
    ASSERT_TRUE(JobWithAWorkerHolding(pool, clock, std::chrono::microseconds(100))) << "job " << job;
  ThreadPool::Stats s = pool.stats();
  EXPECT_EQ(s.jobs, 20u) << s.solo_jobs << " jobs ran solo";
  EXPECT_EQ(s.stalls, 0u);
  // The same job with a wait past kStallWait (200 us) is a stall.
  ASSERT_TRUE(JobWithAWorkerHolding(pool, clock, std::chrono::microseconds(300)));
  EXPECT_EQ(pool.stats().stalls, 1u) << "a 300 us wait for the worker";
  std::printf("late workers: %llu split, %llu stalls, %llu solo, %llu chunks by workers\n",
              static_cast<unsigned long long>(s.jobs), static_cast<unsigned long long>(s.stalls),
              static_cast<unsigned long long>(s.solo_jobs), static_cast<unsigned long long>(s.worker_chunks));
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(ThreadPool, IdleWorkersDoNotBurnACore) {
  // After a burst of jobs, an idle pool's workers spin for a bounded time and
  // then sleep: the pool counts all 3 asleep, none wakes without a job, and
  // over 300 ms of idling they use far less than a core. (CPU time, not wall
  // time: a sleeping worker uses none however loaded the machine is.)
  ThreadPool pool(4);
  std::atomic<long> sink{0};
  for (int job = 0; job < 200; job++) pool.ParallelFor(64, [&](int b, int e) { sink += e - b; });
  ASSERT_EQ(sink.load(), 200 * 64);
  // A worker the last job woke is still counted asleep until it runs again
  // (then it finds nothing and sleeps once more): on a loaded machine that
  // can take a while, so the baseline is taken when the count of sleeps has
  // held still for 20 ms with all 3 asleep.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const ThreadPool::Stats a = pool.stats();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const ThreadPool::Stats b = pool.stats();
        return a.asleep == 3 && b.asleep == 3 && a.sleeps == b.sleeps;
      },
      "all 3 workers to sleep and stay asleep"));
  const uint64_t sleeps = pool.stats().sleeps;
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = ProcessCpuSeconds() - before;
  std::printf("idle pool of 4: 3 workers asleep, %.2f ms of CPU in 300 ms\n", used * 1e3);
  EXPECT_EQ(pool.stats().asleep, 3u);
  EXPECT_EQ(pool.stats().sleeps, sleeps) << "a worker woke with no job";
  EXPECT_LT(used, 0.05) << "idle workers used " << used * 1e3 << " ms of CPU in 300 ms";
}

// A random [d x n] f32 matrix and its bf16 and q8_0 encodings.
struct TestMatrix {
  int n, d;
  std::vector<float> f32;
  std::vector<unsigned char> bf16, q8;
  Weights View(DType t) const {
    const void* p = t == DType::kF32    ? static_cast<const void*>(f32.data())
                    : t == DType::kBF16 ? static_cast<const void*>(bf16.data())
                                        : static_cast<const void*>(q8.data());
    return {t, p, d, n};
  }
};

TestMatrix RandomMatrix(int n, int d, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  TestMatrix m{n, d, std::vector<float>(static_cast<size_t>(n) * d), {}, {}};
  for (auto& v : m.f32) v = u(rng);
  m.bf16.resize(RowBytes(DType::kBF16, n) * d);
  EncodeF32(DType::kBF16, m.f32.data(), d, n, m.bf16.data());
  if (n % kQ8_0BlockSize == 0) {
    m.q8.resize(RowBytes(DType::kQ8_0, n) * d);
    EncodeF32(DType::kQ8_0, m.f32.data(), d, n, m.q8.data());
  }
  return m;
}

// A job too small to be worth a helper runs on the calling thread: the
// fast backend's pool splits no matmul under 1 << 16 multiply-adds (so a
// small model decodes at 2 threads exactly as at 1) and splits one at it.
// The forward's steps between the products, as every CPU backend runs them
// (Backend's host defaults): the arithmetic the engine ran itself before
// they moved behind the seam.
TEST(Kernels, TheForwardsStepsBetweenProductsOnEveryCpuBackend) {
  for (const char* name : {"reference", "fast"}) {
    SCOPED_TRACE(name);
    auto made = MakeBackend(name);
    ASSERT_TRUE(made.ok());
    Backend& k = **made;
    const int dim = 5;
    std::vector<float> table(4 * dim);
    for (size_t i = 0; i < table.size(); i++) table[i] = 0.25f * static_cast<float>(i) - 1.0f;
    const int tokens[] = {3, 0, 3};
    std::vector<float> x(3 * dim, -7.0f);
    k.Embed(x.data(), table.data(), static_cast<int>(table.size()) / dim, dim, tokens, 3);
    for (int t = 0; t < 3; t++)
      for (int j = 0; j < dim; j++) EXPECT_EQ(x[t * dim + j], table[tokens[t] * dim + j]);

    const float weight[] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f};
    std::vector<float> normed(3 * dim), one(dim);
    k.RmsnormRows(normed.data(), x.data(), weight, dim, 3, 1e-5f);
    for (int t = 0; t < 3; t++) {
      Rmsnorm(one.data(), x.data() + t * dim, weight, dim, 1e-5f);
      for (int j = 0; j < dim; j++) EXPECT_EQ(normed[t * dim + j], one[j]) << "row " << t;
    }

    std::vector<float> y = {1.0f, 2.0f, 3.0f};
    const float z[] = {0.5f, -2.0f, 1e-8f};
    k.AddInPlace(y.data(), z, 3);
    EXPECT_EQ(y, (std::vector<float>{1.5f, 0.0f, 3.0f + 1e-8f}));
    k.Axpy(y.data(), 2.0f, z, 3);
    EXPECT_EQ(y, (std::vector<float>{2.5f, -4.0f, (3.0f + 1e-8f) + 2.0f * 1e-8f}));
    k.Zero(y.data(), 2);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_NE(y[2], 0.0f);

    std::vector<float> cache(12, 9.0f);
    const float row[] = {1.0f, 2.0f, 3.0f};
    k.WriteCache(cache.data(), 6, row, 3);
    EXPECT_EQ(cache, (std::vector<float>{9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9}));

    // Top 3 of 6 in order, a tie going to the lower index; softmax over the 3.
    const float router[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.25f};
    int chosen[3];
    float w[3];
    k.RouteTopK(router, 6, 3, chosen, w);
    EXPECT_EQ(chosen[0], 1);
    EXPECT_EQ(chosen[1], 3);
    EXPECT_EQ(chosen[2], 4);
    const float e1 = expf(-1.0f), sum = 1.0f + 1.0f + e1;
    EXPECT_EQ(w[0], 1.0f / sum);
    EXPECT_EQ(w[1], 1.0f / sum);
    EXPECT_EQ(w[2], e1 / sum);
  }
}

TEST(Kernels, FastSplitsOnlyMatmulsWorthAHelper) {
  auto fast = MakeFast(2);
  std::mt19937 rng(11);
  const TestMatrix small = RandomMatrix(64, 512, rng), large = RandomMatrix(64, 1024, rng);  // 32K and 64K MACs
  std::vector<float> x(64, 0.5f), out(1024);
  fast->Matmul(out.data(), x.data(), small.View(DType::kF32));
  auto c = fast->pool_counters();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->split_jobs, 0u) << "stories260K's classifier (512 x 64) was split";
  EXPECT_EQ(c->caller_jobs, 1u);
  fast->Matmul(out.data(), x.data(), large.View(DType::kF32));
  c = fast->pool_counters();
  EXPECT_EQ(c->split_jobs, 1u) << "a 1024 x 64 matmul ran on one thread";
}

TEST(Kernels, FastAgreesWithReference) {
  auto ref = MakeBackend("reference");
  auto fast = MakeBackend("fast");
  ASSERT_TRUE(ref.ok() && fast.ok());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [n, d] : {std::pair{7, 3}, {64, 64}, {256, 688}, {1000, 513}, {96, 2000}}) {
    const TestMatrix m = RandomMatrix(n, d, rng);
    std::vector<float> x(n), a(d), b(d);
    for (auto& v : x) v = u(rng);
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
      if (t == DType::kQ8_0 && n % kQ8_0BlockSize != 0) continue;
      (*ref)->Matmul(a.data(), x.data(), m.View(t));
      (*fast)->Matmul(b.data(), x.data(), m.View(t));
      for (int i = 0; i < d; i++) {
        // q8_0's fast kernel also rounds x to 8 bits per block of 32 (simd.h):
        // each x[j] moves by at most half its block's step, max|x| / 254.
        double bound = 0.0;
        if (t == DType::kQ8_0) {
          std::vector<float> row(n);
          DecodeRow(m.View(t), i, row.data());
          for (int b0 = 0; b0 < n; b0 += 32) {
            float amax = 0.0f;
            for (int j = b0; j < b0 + 32; j++) amax = std::max(amax, std::fabs(x[j]));
            for (int j = b0; j < b0 + 32; j++) bound += std::fabs(row[j]) * amax / 254.0 * (1 + 1e-5);
          }
        }
        ASSERT_NEAR(a[i], b[i], bound + 1e-4f * (1.0f + std::fabs(a[i])))
            << DTypeName(t) << " " << n << "x" << d << " row " << i;
      }
    }
  }
  // RoPE and SwiGLU are bit-identical (same arithmetic, reordered loops only).
  std::vector<float> q1(64), q2(64), h1(40), h2(40), g(40);
  for (auto& v : q1) v = u(rng);
  for (auto& v : h1) v = u(rng);
  for (auto& v : g) v = u(rng);
  q2 = q1;
  h2 = h1;
  float inv_freq[8];
  RopeBaseInverseFrequencies(10000.0f, 16, inv_freq);
  EXPECT_EQ(inv_freq[0], 1.0f);
  EXPECT_EQ(inv_freq[1], 1.0f / powf(10000.0f, 2.0f / 16.0f)) << "run.c's float arithmetic";
  for (bool interleaved : {true, false}) {
    (*ref)->Rope(q1.data(), 64, 16, 37, inv_freq, interleaved);
    (*fast)->Rope(q2.data(), 64, 16, 37, inv_freq, interleaved);
    EXPECT_EQ(q1, q2);
  }
  // A scaled table (every other pair slowed 8x) is rotated alike on both.
  for (int i = 0; i < 8; i += 2) inv_freq[i] /= 8.0f;
  (*ref)->Rope(q1.data(), 64, 16, 1234, inv_freq, false);
  (*fast)->Rope(q2.data(), 64, 16, 1234, inv_freq, false);
  EXPECT_EQ(q1, q2);
  (*ref)->SwiGLU(h1.data(), g.data(), 40);
  (*fast)->SwiGLU(h2.data(), g.data(), 40);
  EXPECT_EQ(h1, h2);
  EXPECT_FALSE(MakeBackend("turbo").ok());
}

// Batched products equal T single products: bit for bit on the reference,
// to float rounding on the fast path (and bit for bit there when T = 1).
TEST(Kernels, MatmulBatchAgreesWithMatmul) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const char* name : {"reference", "fast"}) {
    auto k = MakeBackend(name);
    ASSERT_TRUE(k.ok());
    for (auto [n, d] : {std::pair{64, 64}, {256, 688}, {96, 1000}}) {
      const TestMatrix m = RandomMatrix(n, d, rng);
      for (int T : {1, 3, 64, 70}) {
        std::vector<float> x(static_cast<size_t>(T) * n), batch(static_cast<size_t>(T) * d), one(d);
        for (auto& v : x) v = u(rng);
        for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
          (*k)->MatmulBatch(batch.data(), x.data(), m.View(t), T);
          for (int r = 0; r < T; r++) {
            (*k)->Matmul(one.data(), x.data() + static_cast<size_t>(r) * n, m.View(t));
            const float* got = batch.data() + static_cast<size_t>(r) * d;
            if (std::string(name) == "reference" || T == 1) {
              ASSERT_EQ(0, std::memcmp(got, one.data(), d * sizeof(float)))
                  << name << " " << DTypeName(t) << " T=" << T;
            } else {
              for (int i = 0; i < d; i++)
                ASSERT_NEAR(got[i], one[i], 1e-4f * (1.0f + std::fabs(one[i])))
                    << name << " " << DTypeName(t) << " T=" << T << " vector " << r << " row " << i;
            }
          }
        }
      }
    }
  }
}

// MatmulShared (q/k/v, gate/up) gives each matrix exactly what MatmulBatch
// does: in decode the fast backend runs all their rows (768 + 256 + 256) as
// one job. With 64 columns its chunks of 256 rows end on the matrices'
// boundaries; with 96, chunks of 340 rows straddle both.
TEST(Kernels, MatmulSharedEqualsMatmulBatchPerMatrix) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fast = MakeFast(2);
  auto reference = MakeBackend("reference");
  ASSERT_TRUE(reference.ok());
  for (Backend* k : {fast.get(), reference->get()}) {
    for (int cols : {64, 96}) {
      const TestMatrix ms[3] = {RandomMatrix(cols, 768, rng), RandomMatrix(cols, 256, rng),
                                RandomMatrix(cols, 256, rng)};
      for (int T : {1, 3}) {
        std::vector<float> x(static_cast<size_t>(T) * cols);
        for (auto& v : x) v = u(rng);
        for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
          Weights w[3];
          std::vector<float> shared[3], alone(static_cast<size_t>(T) * 768);
          Backend::MatmulTarget targets[3];
          for (int i = 0; i < 3; i++) {
            w[i] = ms[i].View(t);
            shared[i].assign(static_cast<size_t>(T) * w[i].rows, -1.0f);
            targets[i] = {shared[i].data(), &w[i]};
          }
          k->MatmulShared(x.data(), T, targets, 3);
          for (int i = 0; i < 3; i++) {
            k->MatmulBatch(alone.data(), x.data(), w[i], T);
            ASSERT_EQ(0, std::memcmp(shared[i].data(), alone.data(), shared[i].size() * sizeof(float)))
                << k->name() << " " << DTypeName(t) << " cols " << cols << " T=" << T << " matrix " << i;
          }
        }
      }
    }
  }
}

// MatmulRows (a decode step of n sequences) is n calls of Matmul bit for bit
// on every backend, dtype and thread count: shapes with cols off the vector
// widths (f32, bf16), q8_0 rows with plain tail blocks, row counts that no
// thread split divides evenly, and n around the kernel's vector groups.
TEST(Kernels, MatmulRowsIsMatmulPerVectorBitForBit) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto reference = MakeBackend("reference");
  ASSERT_TRUE(reference.ok());
  auto one_thread = MakeFast(1), two_threads = MakeFast(2), three_threads = MakeFast(3);
  for (Backend* k : {reference->get(), one_thread.get(), two_threads.get(), three_threads.get()}) {
    for (auto [cols, rows] : {std::pair{64, 64}, {800, 1001}, {775, 333}, {33, 2049}, {256, 3}}) {
      const TestMatrix m = RandomMatrix(cols, rows, rng);
      for (int n : {1, 2, 3, 4, 7, 8, 16}) {
        std::vector<float> x(static_cast<size_t>(n) * cols), got(static_cast<size_t>(n) * rows, -1.0f), one(rows);
        for (auto& v : x) v = u(rng);
        for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
          if (t == DType::kQ8_0 && cols % kQ8_0BlockSize != 0) continue;
          k->MatmulRows(got.data(), x.data(), m.View(t), n);
          for (int r = 0; r < n; r++) {
            k->Matmul(one.data(), x.data() + static_cast<size_t>(r) * cols, m.View(t));
            ASSERT_EQ(0, std::memcmp(got.data() + static_cast<size_t>(r) * rows, one.data(), rows * sizeof(float)))
                << k->name() << " " << DTypeName(t) << " " << rows << "x" << cols << " n=" << n << " vector " << r;
          }
        }
      }
    }
  }
}

// MatmulSharedRows gives each matrix exactly MatmulRows (q/k/v and gate/up of
// a step as one job; with 96 columns the chunks straddle the matrices).
TEST(Kernels, MatmulSharedRowsEqualsMatmulRowsPerMatrix) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fast = MakeFast(2);
  auto reference = MakeBackend("reference");
  ASSERT_TRUE(reference.ok());
  for (Backend* k : {fast.get(), reference->get()}) {
    for (int cols : {64, 96}) {
      const TestMatrix ms[3] = {RandomMatrix(cols, 768, rng), RandomMatrix(cols, 256, rng),
                                RandomMatrix(cols, 256, rng)};
      for (int n : {1, 5, 16}) {
        std::vector<float> x(static_cast<size_t>(n) * cols);
        for (auto& v : x) v = u(rng);
        for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
          Weights w[3];
          std::vector<float> shared[3], alone(static_cast<size_t>(n) * 768);
          Backend::MatmulTarget targets[3];
          for (int i = 0; i < 3; i++) {
            w[i] = ms[i].View(t);
            shared[i].assign(static_cast<size_t>(n) * w[i].rows, -1.0f);
            targets[i] = {shared[i].data(), &w[i]};
          }
          k->MatmulSharedRows(x.data(), n, targets, 3);
          for (int i = 0; i < 3; i++) {
            k->MatmulRows(alone.data(), x.data(), w[i], n);
            ASSERT_EQ(0, std::memcmp(shared[i].data(), alone.data(), shared[i].size() * sizeof(float)))
                << k->name() << " " << DTypeName(t) << " cols " << cols << " n=" << n << " matrix " << i;
          }
        }
      }
    }
  }
}

// The encodings are what kernels.h says: bf16 is the rounded top half, q8_0
// blocks of 32 with one scale (36 bytes) dequantize within half a step.
TEST(Kernels, WeightEncodingsRoundTrip) {
  EXPECT_EQ(RowBytes(DType::kF32, 64), 256u);
  EXPECT_EQ(RowBytes(DType::kBF16, 64), 128u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 72u);
  std::mt19937 rng(9);
  const TestMatrix m = RandomMatrix(128, 4, rng);
  std::vector<float> row(128);
  for (int i = 0; i < 4; i++) {
    const float* want = m.f32.data() + i * 128;
    DecodeRow(m.View(DType::kBF16), i, row.data());
    for (int j = 0; j < 128; j++) EXPECT_NEAR(row[j], want[j], std::fabs(want[j]) / 256.0f);
    DecodeRow(m.View(DType::kQ8_0), i, row.data());
    for (int b = 0; b < 4; b++) {
      float amax = 0.0f;
      for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(want[b * 32 + j]));
      for (int j = 0; j < 32; j++) EXPECT_NEAR(row[b * 32 + j], want[b * 32 + j], amax / 127.0f * 0.5f + 1e-6f);
    }
  }
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
    auto back = DTypeFromName(DTypeName(t));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t);
  }
  auto bad = DTypeFromName("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fp8'"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace verity::kernels
