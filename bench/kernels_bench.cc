// Google Benchmark: the SIMD kernels of kernels/cpu/simd.h on one thread, on the
// matrix shapes of a ~110M-parameter Llama (dim 768, hidden 2048, vocab 32000),
// against a plain streaming read of a 1 GiB buffer (this box's read bandwidth).
//   MatVec*: bytes_per_second = weight bytes streamed per second (decode is
//            memory-bound: compare with BM_StreamRead).
//   MatMul*: GFLOPs = 2*T*rows*cols per second, T = 64 (prefill; compute-bound).
// Run: build/bench/kernels_bench --benchmark_min_time=0.5
// VERITY_SIMD_TARGET=AVX2 caps the kernels at that instruction set (base/env.h),
// as in every binary.
// Each MatVec iteration walks a set of matrices totalling >= 256 MiB (several
// copies of the small ones), so the weights come from DRAM as in decode, not
// from the 32 MiB L3.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/huge_pages.h"
#include "base/median.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "probe/probe.h"

namespace verity::kernels::simd {
namespace {

constexpr size_t kColdBytes = size_t{256} << 20;

// Buffers as the engine holds weights and as `verity roofline` reads
// (base/huge_pages.h: huge pages where the kernel allows), so the cold rates
// are the ones decode sees. On 4 KB pages every stream stops at each page
// boundary for the hardware prefetchers and the TLB, and the q8_0 and bf16
// kernels lose more of their rate there than f32 does.
template <class T>
struct Aligned {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> p;
  size_t n = 0;
  explicit Aligned(size_t count)
      : p(static_cast<T*>(verity::AllocateStreamed(std::max<size_t>(1, count * sizeof(T))))), n(count) {}
  T* get() const { return p.get(); }
};

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = u(rng);
  return v;
}

// `copies` matrices of rows x cols in one buffer, in the given dtype.
struct Weights {
  int rows, cols, copies;
  size_t bytes_each;
  Aligned<float> f32{1};
  Aligned<uint16_t> bf16{1};
  Aligned<uint8_t> q8{1};
};

enum class Dtype { kF32, kBF16, kQ8 };

size_t BytesPerMatrix(Dtype t, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  switch (t) {
    case Dtype::kF32: return n * 4;
    case Dtype::kBF16: return n * 2;
    case Dtype::kQ8: return n / kQ8Block * sizeof(BlockQ8_0);
  }
  return 0;
}

Weights MakeWeights(Dtype t, int rows, int cols, size_t min_total_bytes) {
  Weights w{rows, cols, 1, BytesPerMatrix(t, rows, cols)};
  w.copies = static_cast<int>(std::max<size_t>(1, (min_total_bytes + w.bytes_each - 1) / w.bytes_each));
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> src = RandomFloats(n, 7);
  switch (t) {
    case Dtype::kF32:
      w.f32 = Aligned<float>(n * w.copies);
      for (int c = 0; c < w.copies; c++) std::memcpy(w.f32.get() + c * n, src.data(), n * 4);
      break;
    case Dtype::kBF16:
      w.bf16 = Aligned<uint16_t>(n * w.copies);
      ConvertF32ToBF16(src.data(), w.bf16.get(), n);
      for (int c = 1; c < w.copies; c++) std::memcpy(w.bf16.get() + c * n, w.bf16.get(), n * 2);
      break;
    case Dtype::kQ8:
      w.q8 = Aligned<uint8_t>(w.bytes_each * w.copies);
      for (int i = 0; i < rows; i++)
        QuantizeRowQ8_0(src.data() + static_cast<size_t>(i) * cols, cols, w.q8.get() + i * (w.bytes_each / rows));
      for (int c = 1; c < w.copies; c++) std::memcpy(w.q8.get() + c * w.bytes_each, w.q8.get(), w.bytes_each);
      break;
  }
  return w;
}

void RunMatVec(const Weights& w, Dtype t, const float* x, float* out, int copy) {
  const size_t n = static_cast<size_t>(w.rows) * w.cols;
  switch (t) {
    case Dtype::kF32: MatVecF32(w.f32.get() + copy * n, x, out, w.cols, 0, w.rows); break;
    case Dtype::kBF16: MatVecBF16(w.bf16.get() + copy * n, x, out, w.cols, 0, w.rows); break;
    case Dtype::kQ8: {
      // x is quantized per product, as the engine does (counted in the time).
      thread_local QuantizedX xq;
      QuantizeX(x, w.cols, &xq);
      MatVecQ8_0(w.q8.get() + copy * w.bytes_each, xq, out, 0, w.rows);
      break;
    }
  }
}

void BM_MatVec(benchmark::State& state, Dtype t) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  // range(2) == 1: one copy that stays in L2 (the kernel's compute ceiling).
  const bool hot = state.range(2) == 1;
  const Weights w = MakeWeights(t, rows, cols, hot ? 0 : kColdBytes);
  const std::vector<float> x = RandomFloats(cols, 11);
  std::vector<float> out(rows);
  for (auto _ : state) {
    for (int c = 0; c < w.copies; c++) RunMatVec(w, t, x.data(), out.data(), c);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.copies * w.bytes_each);
  state.counters["Gweights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * w.copies * rows * cols * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(TargetName());
}

void BM_MatMul(benchmark::State& state, Dtype t) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const int T = static_cast<int>(state.range(2));
  const Weights w = MakeWeights(t, rows, cols, 0);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(T) * cols, 13);
  std::vector<float> out(static_cast<size_t>(T) * rows);
  std::vector<QuantizedX> xq(static_cast<size_t>(T));
  for (auto _ : state) {
    switch (t) {
      case Dtype::kF32: MatMulF32(w.f32.get(), x.data(), out.data(), T, cols, rows, 0, rows); break;
      case Dtype::kBF16: MatMulBF16(w.bf16.get(), x.data(), out.data(), T, cols, rows, 0, rows); break;
      case Dtype::kQ8:
        for (int v = 0; v < T; v++) QuantizeX(x.data() + static_cast<size_t>(v) * cols, cols, &xq[v]);
        MatMulQ8_0(w.q8.get(), xq.data(), out.data(), T, rows, 0, rows);
        break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * T * rows * cols * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.bytes_each);
  state.SetLabel(TargetName());
}

// A continuous-batching step's kernel (MatRows*): n independent vectors
// against cold weights (>= 256 MiB, as BM_MatVec), each row streamed once for
// all n. bytes_per_second = weight bytes per second; "products/s" = matrix-
// vector products per second (n per matrix pass): at n = 1 it is BM_MatVec's
// rate, and its growth with n is what batching buys.
void BM_MatRows(benchmark::State& state, Dtype t) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const int n = static_cast<int>(state.range(2));
  const Weights w = MakeWeights(t, rows, cols, kColdBytes);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(n) * cols, 17);
  std::vector<float> out(static_cast<size_t>(n) * rows);
  std::vector<QuantizedX> xq(static_cast<size_t>(n));
  const size_t per_copy = static_cast<size_t>(rows) * cols;
  for (auto _ : state) {
    for (int c = 0; c < w.copies; c++) {
      switch (t) {
        case Dtype::kF32: MatRowsF32(w.f32.get() + c * per_copy, x.data(), n, out.data(), cols, rows, 0, rows); break;
        case Dtype::kBF16:
          MatRowsBF16(w.bf16.get() + c * per_copy, x.data(), n, out.data(), cols, rows, 0, rows);
          break;
        case Dtype::kQ8:  // x quantized per product, as the engine does (counted in the time)
          for (int v = 0; v < n; v++) QuantizeX(x.data() + static_cast<size_t>(v) * cols, cols, &xq[v]);
          MatRowsQ8_0(w.q8.get() + c * w.bytes_each, xq.data(), n, out.data(), rows, 0, rows);
          break;
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.copies * w.bytes_each);
  state.counters["products/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * w.copies * n, benchmark::Counter::kIsRate);
  state.SetLabel(TargetName());
}

// The reference: probe::StreamRead (the roofline's read loop) over a 1 GiB buffer (the widest loads, 4
// accumulators), touching every byte once per iteration.
void BM_StreamRead(benchmark::State& state) {
  const size_t bytes = size_t{1} << 30;
  Aligned<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < bytes / 8; i++) buf.get()[i] = i;
  for (auto _ : state) benchmark::DoNotOptimize(probe::StreamRead(buf.get(), bytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.SetLabel(probe::ProbeTarget());
}

// The same over `threads` threads of a ThreadPool (16 MiB pieces claimed
// dynamically): the box's read bandwidth at that many threads. Real time.
void BM_StreamReadThreads(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t bytes = size_t{1} << 30, piece = size_t{16} << 20;
  Aligned<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < bytes / 8; i++) buf.get()[i] = i;
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(bytes / piece);
  for (auto _ : state) {
    pool.ParallelFor(static_cast<int>(bytes / piece), [&](int b, int e) {
      for (int k = b; k < e; k++)
        sums[k] = probe::StreamRead(reinterpret_cast<const char*>(buf.get()) + k * piece, piece);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

// Decode as the engine runs it: rows split over a ThreadPool of `threads`
// (range(3)), each range one MatVec call, at least ~32K multiply-adds per
// chunk (smaller matrices run on the caller). Real time, weights cold; the
// small stories260K shapes (64x64, 512x64) show the pool's overhead.
void BM_MatVecThreads(benchmark::State& state, Dtype t) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const bool small = static_cast<size_t>(rows) * cols < 100000;
  const Weights w = MakeWeights(t, rows, cols, small ? 0 : kColdBytes);
  const std::vector<float> x = RandomFloats(cols, 11);
  std::vector<float> out(rows);
  ThreadPool pool(threads);
  const int grain = std::max(1, 32768 / cols);
  const size_t n = static_cast<size_t>(rows) * cols;
  QuantizedX xq;
  for (auto _ : state) {
    for (int c = 0; c < w.copies; c++) {
      if (t == Dtype::kQ8) QuantizeX(x.data(), cols, &xq);
      pool.ParallelFor(
          rows,
          [&](int b, int e) {
            switch (t) {
              case Dtype::kF32: MatVecF32(w.f32.get() + c * n, x.data(), out.data(), cols, b, e); break;
              case Dtype::kBF16: MatVecBF16(w.bf16.get() + c * n, x.data(), out.data(), cols, b, e); break;
              case Dtype::kQ8: MatVecQ8_0(w.q8.get() + c * w.bytes_each, xq, out.data(), b, e); break;
            }
          },
          grain);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.copies * w.bytes_each);
  state.counters["s/matvec"] = benchmark::Counter(static_cast<double>(state.iterations()) * w.copies,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (threads > 1) {
    const ThreadPool::Stats st = pool.stats();
    const double jobs = static_cast<double>(st.jobs + st.inline_jobs);
    state.counters["split"] = static_cast<double>(st.jobs) / std::max(1.0, jobs);
    state.counters["stalls"] = static_cast<double>(st.stalls) / std::max(1.0, jobs);
  }
}

// The matrices one decode token multiplies by, per model: rows, cols, count.
struct Shape {
  int rows, cols, count;
};
// ~110M (dim 768, hidden 2048, 12 layers, 12 heads, 4 KV heads, vocab 32000):
// wq, wo 768x768; wk, wv 256x768; w1, w3 2048x768; w2 768x2048; classifier.
const std::vector<Shape> k110M = {{768, 768, 24}, {256, 768, 24}, {2048, 768, 24}, {768, 2048, 12}, {32000, 768, 1}};
// stories260K (dim 64, hidden 172, 5 layers, 8 heads, 4 KV heads, vocab 512).
const std::vector<Shape> kStories260K = {{64, 64, 10}, {32, 64, 10}, {172, 64, 10}, {64, 172, 5}, {512, 64, 1}};

struct ModelMats {
  std::vector<Weights> mats;
  size_t bytes = 0;
};
ModelMats MakeModel(const std::vector<Shape>& shapes, Dtype t) {
  ModelMats m;
  for (const Shape& sh : shapes)
    for (int k = 0; k < sh.count; k++) {
      m.mats.push_back(MakeWeights(t, sh.rows, sh.cols, 0));
      m.bytes += m.mats.back().bytes_each;
    }
  return m;
}

// Multiply-adds per chunk at least, when rows are split over the pool: the
// engine's rule (kernels/cpu/fast.cc), or VERITY_BENCH_CHUNK_MACS to try another.
int ChunkMacs() {
  static const int macs = verity::env::BenchChunkMacs();
  return macs;
}

// One token's matrix-vector products as the engine runs them: rows split over
// the pool in chunks of at least ChunkMacs() multiply-adds (smaller matrices
// stay on the caller).
void DecodeToken(ThreadPool& pool, const ModelMats& m, Dtype t, const float* x, float* out) {
  const int chunk_macs = ChunkMacs();
  // Not thread_local: the pool's workers read the caller's quantized x.
  static QuantizedX xq;
  for (const Weights& w : m.mats) {
    if (t == Dtype::kQ8) QuantizeX(x, w.cols, &xq);
    pool.ParallelFor(
        w.rows,
        [&](int b, int e) {
          switch (t) {
            case Dtype::kF32: MatVecF32(w.f32.get(), x, out, w.cols, b, e); break;
            case Dtype::kBF16: MatVecBF16(w.bf16.get(), x, out, w.cols, b, e); break;
            case Dtype::kQ8: MatVecQ8_0(w.q8.get(), xq, out, b, e); break;
          }
        },
        std::max(1, chunk_macs / w.cols));
  }
  benchmark::DoNotOptimize(out);
}

// The same products with no hand-off between matrices: one pool job over
// every matrix's rows laid end to end (what the engine's MatmulShared does for
// q/k/v and gate/up), so the difference from DecodeToken is what the
// per-matrix jobs cost. `out` is not used: each matrix writes its own slice
// of one buffer of every row.
void DecodeTokenAsOneJob(ThreadPool& pool, const ModelMats& m, Dtype t, const float* x) {
  static QuantizedX xq[2];  // x quantized at 768 and at 2048 columns
  if (t == Dtype::kQ8) {
    QuantizeX(x, 768, &xq[0]);
    QuantizeX(x, 2048, &xq[1]);
  }
  static std::vector<int> first;  // first[i]: matrix i's first row in the concatenation
  static std::vector<float> all;
  first.assign(1, 0);
  for (const Weights& w : m.mats) first.push_back(first.back() + w.rows);
  all.resize(first.back());
  pool.ParallelFor(
      first.back(),
      [&](int b, int e) {
        for (size_t i = 0; i < m.mats.size(); i++) {
          const int lo = std::max(b, first[i]) - first[i], hi = std::min(e, first[i + 1]) - first[i];
          if (lo >= hi) continue;
          const Weights& w = m.mats[i];
          float* o = all.data() + first[i];
          switch (t) {
            case Dtype::kF32: MatVecF32(w.f32.get(), x, o, w.cols, lo, hi); break;
            case Dtype::kBF16: MatVecBF16(w.bf16.get(), x, o, w.cols, lo, hi); break;
            case Dtype::kQ8: MatVecQ8_0(w.q8.get(), xq[w.cols == 768 ? 0 : 1], o, lo, hi); break;
          }
        }
      },
      std::max(1, ChunkMacs() / 768));
}

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One decode token of the ~110M model (100M weights) in f32, bf16 and q8_0 on a
// pool of range(0) threads. Each iteration decodes one token in each dtype
// (rotating which goes first), so the three see the same machine; counters give
// each dtype's tokens/s and weight GB/s from the median token time, and the
// median per-iteration speedup over f32 (the bf16 >= 1.8x, q8_0 >= 3x).
void BM_DecodeToken110M(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const ModelMats mats[3] = {MakeModel(k110M, Dtype::kF32), MakeModel(k110M, Dtype::kBF16),
                             MakeModel(k110M, Dtype::kQ8)};
  const std::vector<float> x = RandomFloats(2048, 11);
  std::vector<float> out(32000);
  ThreadPool pool(threads);
  std::vector<double> secs[3], ratio_bf16, ratio_q8;
  int first = 0;
  for (auto _ : state) {
    double s[3];
    for (int k = 0; k < 3; k++) {
      const int t = (first + k) % 3;
      s[t] = Seconds([&] { DecodeToken(pool, mats[t], static_cast<Dtype>(t), x.data(), out.data()); });
      secs[t].push_back(s[t]);
    }
    ratio_bf16.push_back(s[0] / s[1]);
    ratio_q8.push_back(s[0] / s[2]);
    first = (first + 1) % 3;
  }
  const char* names[3] = {"f32", "bf16", "q8_0"};
  for (int t = 0; t < 3; t++) {
    const double m = Median(secs[t]);
    state.counters[std::string(names[t]) + "_tok/s"] = 1.0 / m;
    state.counters[std::string(names[t]) + "_GB/s"] = static_cast<double>(mats[t].bytes) / m * 1e-9;
  }
  state.counters["bf16_x"] = Median(ratio_bf16);
  state.counters["q8_0_x"] = Median(ratio_q8);
}

// One ~110M token's matrix-vector work (dtype range(1)) against a plain read
// of as many bytes (16 MiB pieces claimed dynamically, as BM_StreamReadThreads),
// alternating every iteration on the same pool of range(0) threads, so that a
// neighbour arriving on the shared box slows both alike. `fraction` is the
// median per-iteration ratio of the two GB/s: the share of the read bandwidth
// available at that moment that decode's kernels and pool reach (issue 10's
// f32 target, without the engine's per-token work around the products).
void BM_DecodeVsStream(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const Dtype t = static_cast<Dtype>(state.range(1));
  const bool one_job = state.range(2) == 1;
  const ModelMats m = MakeModel(k110M, t);
  const size_t piece = size_t{16} << 20, pieces = (m.bytes + piece - 1) / piece, bytes = pieces * piece;
  Aligned<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < bytes / 8; i++) buf.get()[i] = i;
  const std::vector<float> x = RandomFloats(2048, 11);
  std::vector<float> out(32000);
  std::vector<uint64_t> sums(pieces);
  ThreadPool pool(threads);
  std::vector<double> decode_gbs, read_gbs, fraction;
  for (auto _ : state) {
    const double d = Seconds([&] {
      if (one_job) DecodeTokenAsOneJob(pool, m, t, x.data());
      else DecodeToken(pool, m, t, x.data(), out.data());
    });
    const double r = Seconds([&] {
      pool.ParallelFor(static_cast<int>(pieces), [&](int b, int e) {
        for (int k = b; k < e; k++)
          sums[k] = probe::StreamRead(reinterpret_cast<const char*>(buf.get()) + k * piece, piece);
      });
    });
    benchmark::DoNotOptimize(sums.data());
    decode_gbs.push_back(static_cast<double>(m.bytes) / d * 1e-9);
    read_gbs.push_back(static_cast<double>(bytes) / r * 1e-9);
    fraction.push_back(decode_gbs.back() / read_gbs.back());
  }
  state.counters["decode_GB/s"] = Median(decode_gbs);
  state.counters["read_GB/s"] = Median(read_gbs);
  state.counters["fraction"] = Median(fraction);
  state.SetLabel(std::string(t == Dtype::kF32    ? "f32"
                             : t == Dtype::kBF16 ? "bf16"
                                                 : "q8_0") +
                 (one_job ? ", one job per token" : ", one job per matrix"));
}

// Decode attention of one ~110M token at context range(0): 12 layers, 12 query
// heads sharing 4 KV heads of 64, the caches laid out as the engine keeps them
// (position-major: position t of a layer at t * 256 floats), all 12 layers'
// caches in one buffer (15.7 MB at 640 positions: past L2, as in decode). Each
// phase is timed separately; kv_GB/s = key and value bytes per second.
void BM_Attention110M(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0)), layers = 12, heads = 12, kv_heads = 4, hs = 64;
  const int group = heads / kv_heads;  // query heads per KV head, served together as in the engine
  const long stride = kv_heads * hs;
  const size_t layer_floats = static_cast<size_t>(count) * stride;
  const std::vector<float> keys = RandomFloats(layer_floats * layers, 3),
                           values = RandomFloats(layer_floats * layers, 4);
  const std::vector<float> q = RandomFloats(static_cast<size_t>(heads) * hs, 5);
  std::vector<float> scores(static_cast<size_t>(heads) * count), out(static_cast<size_t>(heads) * hs);
  double t_scores = 0, t_softmax = 0, t_values = 0;
  for (auto _ : state) {
    for (int l = 0; l < layers; l++) {
      const float* k = keys.data() + l * layer_floats;
      const float* v = values.data() + l * layer_floats;
      t_scores += Seconds([&] {
        for (int kv = 0; kv < kv_heads; kv++)
          AttentionScores(q.data() + kv * group * hs, group, k + kv * hs, stride, hs, count,
                          scores.data() + kv * group * count, count, std::sqrt(static_cast<float>(hs)));
      });
      t_softmax += Seconds([&] {
        for (int h = 0; h < heads; h++) {
          float* att = scores.data() + h * count;
          DivideBy(att, count, ExpShiftedSum(att, count, MaxOf(att, count), 0.0f));
        }
      });
      t_values += Seconds([&] {
        for (int kv = 0; kv < kv_heads; kv++)
          WeightedSum(scores.data() + kv * group * count, count, group, v + kv * hs, stride, hs, count,
                      out.data() + kv * group * hs);
      });
    }
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["scores_us"] = t_scores / iters * 1e6;
  state.counters["softmax_us"] = t_softmax / iters * 1e6;
  state.counters["values_us"] = t_values / iters * 1e6;
  state.counters["kv_GB/s"] = 2.0 * layer_floats * layers * 4 * iters / (t_scores + t_softmax + t_values) * 1e-9;
}

// 2 threads against 1, interleaved: each iteration decodes `reps` tokens (the
// matrix-vector part) on a 1-thread pool and on a 2-thread pool, alternating
// which goes first. range(0): 0 = stories260K, 1 = ~110M; range(1): dtype.
// Counters: tokens/s of each (median) and the median per-iteration speedup
// t1/t2 ("2 threads never slower than 1": x2 >= 1).
void BM_ThreadsAB(benchmark::State& state) {
  const bool big = state.range(0) == 1;
  const Dtype t = static_cast<Dtype>(state.range(1));
  const ModelMats m = MakeModel(big ? k110M : kStories260K, t);
  const int reps = big ? 1 : 50;
  const std::vector<float> x = RandomFloats(2048, 11);
  std::vector<float> out(32000);
  ThreadPool one(1), two(2);
  std::vector<double> s1, s2, ratio;
  bool one_first = true;
  for (auto _ : state) {
    auto run = [&](ThreadPool& p) {
      return Seconds([&] {
        for (int r = 0; r < reps; r++) DecodeToken(p, m, t, x.data(), out.data());
      });
    };
    double a, b;
    if (one_first) {
      a = run(one);
      b = run(two);
    } else {
      b = run(two);
      a = run(one);
    }
    one_first = !one_first;
    s1.push_back(a / reps);
    s2.push_back(b / reps);
    ratio.push_back(a / b);
  }
  state.counters["tok/s_1t"] = 1.0 / Median(s1);
  state.counters["tok/s_2t"] = 1.0 / Median(s2);
  state.counters["x2"] = Median(ratio);
  const ThreadPool::Stats st = two.stats();
  state.counters["stalls"] = static_cast<double>(st.stalls);
  state.counters["solo"] = static_cast<double>(st.solo_jobs);
  state.SetLabel(std::string(big ? "110M " : "stories260K ") + (t == Dtype::kF32    ? "f32"
                                                                : t == Dtype::kBF16 ? "bf16"
                                                                                    : "q8_0"));
}

// What splitting costs: a ParallelFor of 8 near-empty chunks on a pool of
// range(0) threads whose idle workers spin (range(1) = 50 us, the default) or
// sleep at once (0: every job wakes them through the futex, when worth it).
void BM_PoolOverhead(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::atomic<int> sink{0};
  for (auto _ : state) pool.ParallelFor(8, [&](int b, int e) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  benchmark::DoNotOptimize(sink.load());
  const ThreadPool::Stats st = pool.stats();
  state.counters["jobs_split"] = static_cast<double>(st.jobs);
  state.counters["worker_chunks"] = static_cast<double>(st.worker_chunks);
  state.counters["wakes"] = static_cast<double>(st.wakes);
}

// rows, cols of the 110M model's matrices: wq/wo (768x768), w1/w3 (2048x768),
// w2 (768x2048), classifier (32000x768).
void Shapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] : {std::pair{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}) b->Args({r, c, 0});
  b->Args({256, 768, 1});  // hot: 768 KiB of f32, in L2
}
void MatMulShapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] : {std::pair{768, 768}, {2048, 768}, {768, 2048}}) b->Args({r, c, 64});
}

void MatRowsShapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] : {std::pair{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}})
    for (int n : {1, 4, 8, 16}) b->Args({r, c, n});
}

void ThreadShapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (auto [r, c] : {std::pair{64, 64}, {512, 64}, {768, 768}, {2048, 768}, {768, 2048}, {32000, 768}})
      b->Args({r, c, threads});
}

BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoolOverhead)->Args({1, 50})->Args({2, 50})->Args({2, 0})->UseRealTime();
BENCHMARK(BM_DecodeToken110M)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsAB)
    ->ArgsProduct({{0, 1},
                   {static_cast<int>(Dtype::kF32), static_cast<int>(Dtype::kBF16), static_cast<int>(Dtype::kQ8)}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeVsStream)
    ->ArgsProduct({{1, 2},
                   {static_cast<int>(Dtype::kF32), static_cast<int>(Dtype::kBF16), static_cast<int>(Dtype::kQ8)},
                   {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention110M)->Arg(64)->Arg(640)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StreamReadThreads)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatVec, f32, Dtype::kF32)->Apply(Shapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatVec, bf16, Dtype::kBF16)->Apply(Shapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatVec, q8_0, Dtype::kQ8)->Apply(Shapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatVecThreads, f32, Dtype::kF32)
    ->Apply(ThreadShapes)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecThreads, bf16, Dtype::kBF16)
    ->Apply(ThreadShapes)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecThreads, q8_0, Dtype::kQ8)
    ->Apply(ThreadShapes)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatRows, f32, Dtype::kF32)->Apply(MatRowsShapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatRows, bf16, Dtype::kBF16)->Apply(MatRowsShapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatRows, q8_0, Dtype::kQ8)->Apply(MatRowsShapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMul, f32, Dtype::kF32)->Apply(MatMulShapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMul, bf16, Dtype::kBF16)->Apply(MatMulShapes)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMul, q8_0, Dtype::kQ8)->Apply(MatMulShapes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace verity::kernels::simd

int main(int argc, char** argv) {
  using namespace verity::kernels::simd;
  // Numbers from a target nobody asked for are worse than none (the cap
  // allows only the most basic target then): a usage error, as in verity.
  if (const std::string cap = CapError(); !cap.empty()) {
    std::fprintf(stderr, "verity_kernels_bench: %s\n", cap.c_str());
    return 2;
  }
  std::fprintf(stderr, "simd target: %s%s\n", TargetName(),
               TargetCap().empty() ? "" : (" (VERITY_SIMD_TARGET=" + TargetCap() + ")").c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
