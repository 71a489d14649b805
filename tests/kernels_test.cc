// The fast path's thread pool covers every index exactly once, job after job,
// and the fast kernels agree with the reference ones.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/kernels.h"

namespace verity::kernels {
namespace {

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
      for (int i = 0; i < n; i++) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " job " << job << " index " << i;
    }
  }
}

TEST(Kernels, FastAgreesWithReference) {
  auto ref = MakeBackend("reference");
  auto fast = MakeBackend("fast");
  ASSERT_TRUE(ref.ok() && fast.ok());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [n, d] : {std::pair{7, 3}, {64, 64}, {256, 688}, {1000, 513}}) {
    std::vector<float> w(static_cast<size_t>(n) * d), x(n), a(d), b(d);
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    (*ref)->Matmul(a.data(), x.data(), w.data(), n, d);
    (*fast)->Matmul(b.data(), x.data(), w.data(), n, d);
    for (int i = 0; i < d; i++) ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::fabs(a[i]))) << n << "x" << d << " row " << i;
  }
  // RoPE and SwiGLU are bit-identical (same arithmetic, reordered loops only).
  std::vector<float> q1(64), q2(64), h1(40), h2(40), g(40);
  for (auto& v : q1) v = u(rng);
  for (auto& v : h1) v = u(rng);
  for (auto& v : g) v = u(rng);
  q2 = q1;
  h2 = h1;
  for (bool interleaved : {true, false}) {
    (*ref)->Rope(q1.data(), 64, 16, 37, 10000.0f, interleaved);
    (*fast)->Rope(q2.data(), 64, 16, 37, 10000.0f, interleaved);
    EXPECT_EQ(q1, q2);
  }
  (*ref)->SwiGLU(h1.data(), g.data(), 40);
  (*fast)->SwiGLU(h2.data(), g.data(), 40);
  EXPECT_EQ(h1, h2);
  EXPECT_FALSE(MakeBackend("turbo").ok());
}

}  // namespace
}  // namespace verity::kernels
