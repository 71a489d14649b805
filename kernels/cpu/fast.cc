// The fast backend: rows of a matmul (and heads of attention) spread over a
// thread pool, and each dot product summed in 8 independent lanes so the
// compiler can vectorize it. The lane split changes rounding slightly; parity
// with the reference is a tested property, not an assumption.
#include <algorithm>

#include "kernels/cpu/backends.h"
#include "kernels/cpu/thread_pool.h"

namespace verity::kernels {
namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking
// the pool costs more than the work.
constexpr long kParallelThreshold = 1 << 15;

float Dot(const float* a, const float* b, int n) {
  constexpr int kLanes = 8;
  float acc[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; l++) acc[l] += a[j + l] * b[j + l];
  float tail = 0.0f;
  for (; j < n; j++) tail += a[j] * b[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

class Fast final : public Backend {
 public:
  explicit Fast(int threads) : pool_(threads) {}
  const char* name() const override { return "fast"; }

  void Matmul(float* out, const float* x, const float* w, int n, int d) override {
    auto rows = [&](int begin, int end) {
      for (int i = begin; i < end; i++) out[i] = Dot(w + static_cast<long>(i) * n, x, n);
    };
    if (static_cast<long>(n) * d < kParallelThreshold) {
      rows(0, d);
    } else {
      pool_.ParallelFor(d, rows);
    }
  }

  void Attention(const AttentionArgs& a) override {
    auto heads = [&](int begin, int end) {
      for (int h = begin; h < end; h++) AttendOneHead(a, h);
    };
    if (static_cast<long>(a.pos + 1) * a.n_heads * a.head_size < kParallelThreshold) {
      heads(0, a.n_heads);
    } else {
      pool_.ParallelFor(a.n_heads, heads);
    }
  }

 private:
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> MakeFast(int threads) { return std::make_unique<Fast>(std::max(1, threads)); }

}  // namespace verity::kernels
