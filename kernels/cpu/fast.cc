// The fast backend: rows of a matmul (and heads of attention) spread over a
// thread pool, each range of rows computed by the SIMD kernels in the weights'
// own dtype (kernels/cpu/simd.h). Their lane order changes rounding slightly;
// parity with the reference is a tested property, not an assumption.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/backends.h"
#include "kernels/cpu/block_dot.h"
#include "corruptions/kernel_hooks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace verity::kernels {
namespace {

// Below this many multiply-adds a job runs on the calling thread: handing
// half of it to another core (x there, the outputs back) costs about what it
// saves. A matmul's rows are split into chunks of at least half of it, so one
// smaller than the threshold stays on the caller. At 1 << 15, stories260K's
// classifier (512 x 64) was split and the model decoded at 0.986x its
// 1-thread speed with 2 threads (median of 10 interleaved rounds,
// 2026-12-01); at 1 << 16 nothing of it is split: 1.000x.
constexpr long kParallelThreshold = 1 << 16;
// Attention splits its KV heads over the pool from this many query values
// times positions: it waits on memory latency more than it computes, and this
// threshold was not part of the measurement above.
constexpr long kAttentionParallelThreshold = 1 << 15;

// Rows per chunk of a matmul whose rows cost `macs_per_row` multiply-adds each.
int RowGrain(long macs_per_row) {
  return static_cast<int>(std::max<long>(1, kParallelThreshold / 2 / std::max<long>(1, macs_per_row)));
}

// A block-quantized matrix (DType::kBlock) of a type with no kernel of its
// own (none today: every type formats/quants reads has one in block_dot.h;
// the fallback keeps a new type correct before it is fast) through the f32
// kernels: rows [begin, end) a tile at a time, each tile dequantized into
// this thread's scratch and handed to `f32(tile, first_row, count)`, so every
// output is bit for bit the f32 path's on the matrix dequantized up front.
template <class F>
void BlockTiles(const Weights& w, int begin, int end, F&& f32) {
  constexpr int kTile = 4;  // MatMulF32's weight tile (simd_matmul.cc kRows)
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(kTile) * w.cols);
  for (int i = begin; i < end; i += kTile) {
    const int count = std::min(kTile, end - i);
    for (int k = 0; k < count; k++)
      w.block->dequantize_row(w.row(i + k), w.cols, scratch.data() + static_cast<size_t>(k) * w.cols);
    f32(scratch.data(), i, count);
  }
}

// A matrix whose blocks block_dot.h's kernels read.
bool BlockKernel(const Weights& w) { return w.dtype == DType::kBlock && simd::HasBlockKernel(w.block->ggml_type); }

// x quantized for the integer kernels, once per product and shared by every
// row and thread: q8_0's form and the block types' (block_dot.h), each made
// only when a matrix of the product needs it.
struct XForms {
  const simd::QuantizedX* q8;
  const simd::BlockX* block;
};

// Rows [begin, end) of out = W x, in the weights' own dtype (q8_0 and the
// block types: against x already quantized, `xq`).
void MatVecRows(const Weights& w, const float* x, XForms xq, float* out, int begin, int end) {
  switch (w.dtype) {
    case DType::kF32: simd::MatVecF32(static_cast<const float*>(w.data), x, out, w.cols, begin, end); return;
    case DType::kBF16: simd::MatVecBF16(static_cast<const uint16_t*>(w.data), x, out, w.cols, begin, end); return;
    case DType::kQ8_0: simd::MatVecQ8_0(static_cast<const uint8_t*>(w.data), *xq.q8, out, begin, end); return;
    case DType::kBlock:
      if (BlockKernel(w))
        return simd::MatVecBlock(w.block->ggml_type, static_cast<const uint8_t*>(w.data), *xq.block, out, begin, end);
      BlockTiles(w, begin, end,
                 [&](const float* tile, int i, int r) { simd::MatVecF32(tile, x, out + i, w.cols, 0, r); });
      return;
  }
}

// Rows [begin, end) of every out[t] = W x[t], t < T.
void MatMulRows(const Weights& w, const float* x, XForms xq, float* out, int T, int begin, int end) {
  switch (w.dtype) {
    case DType::kF32: simd::MatMulF32(static_cast<const float*>(w.data), x, out, T, w.cols, w.rows, begin, end); return;
    case DType::kBF16:
      simd::MatMulBF16(static_cast<const uint16_t*>(w.data), x, out, T, w.cols, w.rows, begin, end);
      return;
    case DType::kQ8_0: simd::MatMulQ8_0(static_cast<const uint8_t*>(w.data), xq.q8, out, T, w.rows, begin, end); return;
    case DType::kBlock:
      if (BlockKernel(w))
        return simd::MatMulBlock(w.block->ggml_type, static_cast<const uint8_t*>(w.data), xq.block, out, T, w.rows,
                                 begin, end);
      BlockTiles(w, begin, end,
                 [&](const float* tile, int i, int r) { simd::MatMulF32(tile, x, out + i, T, w.cols, w.rows, 0, r); });
      return;
  }
}

// Rows [begin, end) of every out[t] = W x[t], t < n, each bit for bit MatVecRows of x[t].
void IndependentRows(const Weights& w, const float* x, XForms xq, float* out, int n, int begin, int end) {
  switch (w.dtype) {
    case DType::kF32:
      simd::MatRowsF32(static_cast<const float*>(w.data), x, n, out, w.cols, w.rows, begin, end);
      return;
    case DType::kBF16:
      simd::MatRowsBF16(static_cast<const uint16_t*>(w.data), x, n, out, w.cols, w.rows, begin, end);
      return;
    case DType::kQ8_0:
      simd::MatRowsQ8_0(static_cast<const uint8_t*>(w.data), xq.q8, n, out, w.rows, begin, end);
      return;
    case DType::kBlock:
      if (BlockKernel(w))  // MatMulBlock's outputs are MatVecBlock's, vector by vector
        return simd::MatMulBlock(w.block->ggml_type, static_cast<const uint8_t*>(w.data), xq.block, out, n, w.rows,
                                 begin, end);
      BlockTiles(w, begin, end,
                 [&](const float* tile, int i, int r) { simd::MatRowsF32(tile, x, n, out + i, w.cols, w.rows, 0, r); });
      return;
  }
}

// AttendOneHead (reference.cc) for the query heads that share KV head `kv`,
// with the query-key dot products, the softmax's maximum and exponentials and
// the weighted sum of values vectorized (simd.h). The group's heads score each
// cached key row while it is in L1 and share each value load. At long contexts attention is a large share of a
// token: perf put it at ~30% of a q8_0 bench with a 512-token prompt when the
// dots ran in 8 scalar-ish lanes and the exponentials in expf.
void AttendGroupFast(const AttentionArgs& a, int kv) {
  const int group = a.n_heads / a.n_kv_heads, hs = a.head_size, n = a.pos + 1, h0 = kv * group;
  const long kv_off = static_cast<long>(kv) * hs;
  float* scores = a.scores + static_cast<long>(h0) * a.seq_len;
  simd::AttentionScores(a.q + h0 * hs, group, a.key_cache + kv_off, a.pos_stride, hs, n, scores, a.seq_len,
                        a.score_divisor());
  if (a.softcap > 0.0f)  // Gemma 2
    for (int g = 0; g < group; g++) simd::SoftCapRow(scores + static_cast<long>(g) * a.seq_len, n, a.softcap);
  // Softmax (common.cc) per head with its exponentials vectorized; the same hook.
  for (int g = 0; g < group; g++) {
    float* __restrict att = scores + static_cast<long>(g) * a.seq_len;
    const float max_val = simd::MaxOf(att, n);
    simd::DivideBy(att, n,
                   simd::ExpShiftedSum(att, n, max_val, corruptions::ActiveKernelHooks().SoftmaxExtraMass(max_val)));
  }
  // The weighted sums of values, each head's outputs held in vector registers
  // across every position (each summed in position order).
  simd::WeightedSum(scores, a.seq_len, group, a.value_cache + kv_off, a.pos_stride, hs, n, a.out + h0 * hs);
}

class Fast final : public Backend {
 public:
  explicit Fast(int threads) : pool_(threads) {}
  const char* name() const override { return "fast"; }

  void Matmul(float* out, const float* x, const Weights& w) override {
    // q8_0 and the block types quantize x once here, for every row and thread.
    const MatmulTarget target{out, &w};
    const XForms xq = Quantize(x, 1, &target, 1);
    pool_.ParallelFor(
        w.rows, [&](int begin, int end) { MatVecRows(w, x, xq, out, begin, end); }, RowGrain(w.cols));
  }

  void MatmulBatch(float* out, const float* x, const Weights& w, int T) override {
    if (T == 1) return Matmul(out, x, w);  // one vector: exactly the decode path
    const MatmulTarget target{out, &w};
    const XForms xq = Quantize(x, T, &target, 1);
    // Chunks in whole tiles of 4 rows (the kernel's weight tile).
    const int grain = (RowGrain(static_cast<long>(w.cols) * T) + 3) / 4 * 4;
    pool_.ParallelFor(
        w.rows, [&](int begin, int end) { MatMulRows(w, x, xq, out, T, begin, end); }, grain);
  }

  // Decode: the rows of every matrix as one job (one hand-off to the pool and
  // one wait instead of `count`), x quantized once for q8_0. Each row is the
  // same kernel call on the same x as in Matmul, so the outputs are identical.
  // MatMul's tiles keep one accumulator per (row, vector), fed in column
  // order whatever the tile's shape (simd_matmul.cc MicroTile, simd_q8.cc Q8Tile).
  bool batch_rows_independent() const override { return true; }
  bool runs_block_type(uint32_t) const override {
    return true;
  }                                                       // block_dot.h (BlockTiles for a type without a kernel)
  bool attends_windows() const override { return true; }  // Attention: Windowed()
  bool runs_gemma() const override { return true; }       // AttendGroupFast, GeGLU, SoftCapInPlace

  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    if (T != 1 || count < 2 || !SameCols(targets, count)) return Backend::MatmulShared(x, T, targets, count);
    const int cols = targets[0].w->cols;
    int rows = 0;
    for (int i = 0; i < count; i++) rows += targets[i].w->rows;
    const XForms xq = Quantize(x, 1, targets, count);
    pool_.ParallelFor(
        rows,
        [&](int begin, int end) {
          // [begin, end) of the matrices' rows laid end to end.
          for (int i = 0, first = 0; i < count && first < end; first += targets[i].w->rows, i++) {
            const int lo = std::max(begin, first), hi = std::min(end, first + targets[i].w->rows);
            if (lo < hi) MatVecRows(*targets[i].w, x, xq, targets[i].out, lo - first, hi - first);
          }
        },
        RowGrain(cols));
  }

  // A step of n sequences: every matrix's rows as one job (as MatmulShared
  // in decode), each row read once and dotted with the n vectors by the
  // MatVec arithmetic, so row t is Matmul(x_t) exactly. One vector is the
  // decode path itself.
  void MatmulRows(float* out, const float* x, const Weights& w, int n) override {
    const MatmulTarget target{out, &w};
    MatmulSharedRows(x, n, &target, 1);
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    if (n == 1) return count == 1 ? Matmul(targets[0].out, x, *targets[0].w) : MatmulShared(x, 1, targets, count);
    if (!SameCols(targets, count)) return Backend::MatmulSharedRows(x, n, targets, count);
    const int cols = targets[0].w->cols;
    int rows = 0;
    for (int i = 0; i < count; i++) rows += targets[i].w->rows;
    const XForms xq = Quantize(x, n, targets, count);
    pool_.ParallelFor(
        rows,
        [&](int begin, int end) {
          for (int i = 0, first = 0; i < count && first < end; first += targets[i].w->rows, i++) {
            const int lo = std::max(begin, first), hi = std::min(end, first + targets[i].w->rows);
            if (lo < hi) IndependentRows(*targets[i].w, x, xq, targets[i].out, n, lo - first, hi - first);
          }
        },
        RowGrain(static_cast<long>(cols) * n));
  }

  void Attention(const AttentionArgs& args) override {
    const AttentionArgs a = Windowed(args);
    auto groups = [&](int begin, int end) {
      for (int kv = begin; kv < end; kv++) AttendGroupFast(a, kv);
    };
    if (static_cast<long>(a.pos + 1) * a.n_heads * a.head_size < kAttentionParallelThreshold) {
      groups(0, a.n_kv_heads);
    } else {
      pool_.ParallelFor(a.n_kv_heads, groups);
    }
  }

  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    const int half = head_size / 2;
    // Each pair's angle once for every head; the reference's arithmetic, so
    // the rotation stays bit-identical.
    for (int i = 0; i < half; i++) {
      float val = static_cast<float>(pos) * inv_freq[i];
      float fcr = cosf(val), fci = sinf(val);
      for (int base = 0; base < size; base += head_size) {
        const int x = interleaved ? base + 2 * i : base + i;
        const int y = interleaved ? x + 1 : x + half;
        float v0 = vec[x], v1 = vec[y];
        vec[x] = v0 * fcr - v1 * fci;
        vec[y] = v0 * fci + v1 * fcr;
      }
    }
  }

  void SwiGLU(float* hb, const float* hb2, int n) override { SwiGLUReference(hb, hb2, n); }
  // Gemma's tanh steps in vectors (scalar tanhf was half a token's time on a
  // 64-wide Gemma 2 synth: perf, session 31).
  void GeGLU(float* hb, const float* hb2, int n) override { simd::GeGLURow(hb, hb2, n); }
  void SoftCapInPlace(float* x, float cap, size_t count) override { simd::SoftCapRow(x, static_cast<int>(count), cap); }

  std::optional<PoolCounters> pool_counters() const override {
    if (pool_.size() < 2) return std::nullopt;
    const ThreadPool::Stats s = pool_.stats();
    return PoolCounters{s.jobs, s.inline_jobs, s.solo_jobs, s.stalls, s.contended};
  }

 private:
  static bool SameCols(const MatmulTarget* targets, int count) {
    for (int i = 1; i < count; i++)
      if (targets[i].w->cols != targets[0].w->cols) return false;
    return true;
  }
  // The n vectors of x (targets[0].w->cols each) in the quantized forms the
  // targets' matrices read; the buffers are kept between calls, so decode
  // allocates nothing.
  XForms Quantize(const float* x, int n, const MatmulTarget* targets, int count) {
    bool q8 = false, block = false;
    for (int i = 0; i < count; i++) {
      q8 = q8 || targets[i].w->dtype == DType::kQ8_0;
      block = block || BlockKernel(*targets[i].w);
    }
    if (!q8 && !block) return {xq_.data(), xb_.data()};
    const int cols = targets[0].w->cols;
    const size_t want = static_cast<size_t>(n);
    if (q8 && xq_.size() < want) xq_.resize(want);
    if (block && xb_.size() < want) xb_.resize(want);
    // A prompt's vectors over the pool (one vector stays on the caller): at
    // 64 vectors of the ~110M model, quantizing them on one thread was ~6%
    // of a 2-thread prefill.
    pool_.ParallelFor(
        n,
        [&](int begin, int end) {
          for (int t = begin; t < end; t++) {
            const float* xt = x + static_cast<size_t>(t) * cols;
            if (q8) simd::QuantizeX(xt, cols, &xq_[static_cast<size_t>(t)]);
            if (block) simd::QuantizeBlockX(xt, cols, &xb_[static_cast<size_t>(t)]);
          }
        },
        std::max(1, RowGrain(cols)));
    return {xq_.data(), xb_.data()};
  }

  ThreadPool pool_;
  std::vector<simd::QuantizedX> xq_ = std::vector<simd::QuantizedX>(1);
  std::vector<simd::BlockX> xb_ = std::vector<simd::BlockX>(1);
};

}  // namespace

std::unique_ptr<Backend> MakeFast(int threads) { return std::make_unique<Fast>(std::max(1, threads)); }

}  // namespace verity::kernels
