// The 16-byte matrix-vector kernel (LaunchRows, cuda_kernels.h) and its fused
// forms (rows.h). A warp per weight row: each lane reads 16 bytes a load (4
// f32, 8 bf16 or 16 q8_0 weights) with several loads in flight, and carries NT vectors at once (1
// for a decode step, kMatmulRowsPerWarp for a batched one), so a batched
// row is bit for bit the single one. RowDots is the one dot-product routine
// every variant runs.
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/q8_int.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/rows_launch.cuh"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

// Weights a 16-byte chunk holds: 4 f32, 8 bf16, 16 q8_0 quants (the device
// layout of q8_layout.h; its scale, one per 32, lies apart). DT 3 is q8_0
// weights multiplied with int16 x (q8_int.h; PlanRowsQ8Int).
template <int DT>
inline constexpr int kChunkWeights = DT == 0   ? 4
                                     : DT == 1 ? 8
                                               : 16;

// Chunk c of a row stored as DT (0: f32, 1: bf16, 2: q8_0 quants) as floats:
// exact (a q8_0 quant as itself; the scale is applied to the chunk's sum).
template <int DT>
__device__ __forceinline__ void LoadChunk(const unsigned char* row, int c, float (&w)[kChunkWeights<DT>]) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + c);
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
  if constexpr (DT == 0) {
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = __uint_as_float(u[i]);
  } else if constexpr (DT == 1) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      w[2 * i] = ew::BF16ToF32(static_cast<uint16_t>(u[i] & 0xffffu));
      w[2 * i + 1] = ew::BF16ToF32(static_cast<uint16_t>(u[i] >> 16));
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) q8::Widen4(u[i], &w[4 * i]);
  }
}

// Where a warp's row lies: its weights (q8_0: its quants) and, for q8_0, its
// scales (one per 32 weights).
struct RowRef {
  const unsigned char* w;
  const float* scales;
};

// acc[r][t] = row r . x_{t0+t} for r < R, t < nt, complete in lane 0. Lane l
// takes chunks l, l + 32, ... in order, the warp sum adds the lanes: each
// (row, vector) sum takes the same products in the same order whatever R, NT
// and U are, so a batched row has the bits of a single one and every form
// (kRowsForms) the bits of form 0. A q8_0 chunk's 16 products are summed,
// then scaled and added (one scale per chunk). R rows a warp reuse each
// vector chunk from registers: at NT = 8 vectors, reading them for one row
// per weight chunk would move 16 bytes of x from L1 per byte of weights.
template <int DT, int NT, int R, int U>
__device__ __forceinline__ void RowDots(const RowRef (&r)[R], const float* x, int cols, int t0, int nt, int lane,
                                        float (&acc)[R][NT]) {
  constexpr int K = kChunkWeights<DT>;
  const int chunks = cols / K;
#pragma unroll
  for (int k = 0; k < R; k++)
#pragma unroll
    for (int t = 0; t < NT; t++) acc[k][t] = 0.0f;
#pragma unroll U
  for (int c = lane; c < chunks; c += 32) {
    float wv[R][K];
#pragma unroll
    for (int k = 0; k < R; k++) LoadChunk<DT>(r[k].w, c, wv[k]);
    float scale[R];
#pragma unroll
    for (int k = 0; k < R; k++) scale[k] = DT == 2 ? r[k].scales[c >> 1] : 1.0f;
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t < nt) {
        const float4* xv = reinterpret_cast<const float4*>(x + static_cast<size_t>(t0 + t) * cols) + (K / 4) * c;
        float xs[K];
#pragma unroll
        for (int i = 0; i < K / 4; i++) {
          const float4 a = xv[i];
          xs[4 * i] = a.x, xs[4 * i + 1] = a.y, xs[4 * i + 2] = a.z, xs[4 * i + 3] = a.w;
        }
#pragma unroll
        for (int k = 0; k < R; k++) {
          if constexpr (DT == 2) {
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < K; i++) part = fmaf(wv[k][i], xs[i], part);
            acc[k][t] = fmaf(scale[k], part, acc[k][t]);
          } else {
#pragma unroll
            for (int i = 0; i < K; i++) acc[k][t] = fmaf(wv[k][i], xs[i], acc[k][t]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < R; k++)
#pragma unroll
    for (int t = 0; t < NT; t++) acc[k][t] = WarpSum(acc[k][t]);
}

// The first `bytes` of each of the warp's rows, and for q8_0 those quants'
// scales, asked of L2 before the wait for the previous kernel (a dependent
// launch: LaunchPlan::prefetch_bytes, RowsPrefetchBytes): on sm_90 one bulk
// prefetch a row (its start 16-byte aligned, bytes a multiple of 16), below
// it a line a lane. Nothing is loaded into registers; no bit depends on it.
template <int DT, int R>
__device__ __forceinline__ void PrefetchRows(const RowRef (&r)[R], int64_t bytes, int lane) {
  if (bytes <= 0) return;
#pragma unroll
  for (int k = 0; k < R; k++) {
    PrefetchRangeL2(r[k].w, bytes, lane);
    if constexpr (DT >= 2) PrefetchLinesL2(r[k].scales, bytes / kQ8_0BlockSize * 4, lane);
  }
}

// Where row `row` of target `i` (of `rows` rows) lies: q8_0 quants row-major
// at `cols` bytes a row, the scales after all n quants (q8_layout.h).
template <int DT>
__device__ __forceinline__ RowRef RowOf(const void* base, int row, int rows, int cols, size_t row_bytes) {
  const auto* b = static_cast<const unsigned char*>(base);
  if constexpr (DT >= 2) return {q8::RowQuants(base, row, cols), q8::RowScales(base, rows, cols, row)};
  return {b + static_cast<size_t>(row) * row_bytes, nullptr};
}

// x's int16 quants and their scales (q8_int.h) into shared memory, a
// block of 32 columns a warp at a time (every warp of the block takes part:
// the barrier counts them all); true when every value of x is finite
// (QuantizeX16Impl's `finite`: else every product is NaN, as on the CPU).
__device__ __forceinline__ bool QuantizeXShared(const float* x, int cols, int16_t* xq, float* xsc) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  int bad = 0;
  for (int b = threadIdx.x >> 5; b < cols / q8i::kBlock; b += warps) {
    const float v = x[q8i::kBlock * b + lane];
    bad |= !isfinite(v);
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    xq[q8i::XSlot(q8i::kBlock * b + lane, cols)] = q8i::XQuant(v, q8i::XInverse(amax));
    if (lane == 0) xsc[b] = q8i::XScale(amax);
  }
  return __syncthreads_or(bad) == 0;
}

// acc[r][0] = row r . x for q8_0 rows and x quantized (QuantizeXShared),
// complete in lane 0: simd::MatVecQ8_0's bits (q8_int.h says how the lanes
// keep the CPU's order). U steps' chunks of every row are loaded before
// any is used, so U x R 16-byte loads a lane are in flight. Every lane
// runs every step (the shuffles need the whole warp); a chunk past the row
// counts as zeros.
template <int R, int U>
__device__ __forceinline__ void RowDotsQ8Int(const RowRef (&r)[R], const int16_t* xq, const float* xsc, int cols,
                                             bool finite, int lane, float (&acc)[R][1]) {
  const int chunks = cols / q8i::kChunk, nb = cols / q8i::kBlock, grouped = nb / q8i::kGroup * q8i::kGroup;
  const int steps = (chunks + 31) / 32;
  float chain[R], tail_a[R], tail_s[R];
#pragma unroll
  for (int k = 0; k < R; k++) chain[k] = tail_a[k] = tail_s[k] = 0.0f;
  for (int i0 = 0; i0 < steps; i0 += U) {
    uint4 wv[U][R];
    float ws[U][R];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = 32 * (i0 + u) + lane, b = q8i::LaneBlock(i0 + u, lane);
#pragma unroll
      for (int k = 0; k < R; k++) {
        wv[u][k] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(r[k].w) + c) : make_uint4(0, 0, 0, 0);
        ws[u][k] = b < nb ? __ldg(r[k].scales + b) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int i = i0 + u, c = 32 * i + lane, b = q8i::LaneBlock(i, lane);
      if (i >= steps) break;  // the same for every lane
      uint32_t lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
      if (c < chunks) {
        const uint4 l = *reinterpret_cast<const uint4*>(xq + q8i::ChunkLo(c));
        const uint4 h = *reinterpret_cast<const uint4*>(xq + q8i::ChunkHi(c, cols));
        lo[0] = l.x, lo[1] = l.y, lo[2] = l.z, lo[3] = l.w;
        hi[0] = h.x, hi[1] = h.y, hi[2] = h.z, hi[3] = h.w;
      }
      const float xs = b < nb ? xsc[b] : 0.0f;
#pragma unroll
      for (int k = 0; k < R; k++) {
        const uint32_t w[4] = {wv[u][k].x, wv[u][k].y, wv[u][k].z, wv[u][k].w};
        const int half = q8i::ChunkDot(w, lo, hi);
        const float a = q8i::IntToFloat(half + __shfl_xor_sync(0xffffffffu, half, 1));
        const float s = q8i::BlockScale(ws[u][k], xs);
        const float a1 = __shfl_down_sync(0xffffffffu, a, q8i::kSecondGroupLanes);
        const float s1 = __shfl_down_sync(0xffffffffu, s, q8i::kSecondGroupLanes);
        if (lane < q8i::kSecondGroupLanes) chain[k] = q8i::FoldStep(chain[k], i, lane >> 1, grouped, a, s, a1, s1);
        if (b >= grouped && b < nb) tail_a[k] = a, tail_s[k] = s;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < R; k++) {
    float lanes[q8i::kGroup];
#pragma unroll
    for (int l = 0; l < q8i::kGroup; l++) lanes[l] = __shfl_sync(0xffffffffu, chain[k], q8i::ChainLane(l));
    float total = q8i::Lanes8Sum(lanes);
    for (int b = grouped; b < nb; b++)
      total = q8i::Fold(total, __shfl_sync(0xffffffffu, tail_a[k], q8i::TailLane(b)),
                        __shfl_sync(0xffffffffu, tail_s[k], q8i::TailLane(b)));
    acc[k][0] = finite ? total : __int_as_float(0x7fc00000);
  }
}

// Warp w of the launch takes rows w*R .. w*R+R-1 of the stacked targets (row
// blocks along y then z), grid.x's groups of NT vectors. A warp's rows past
// the last read the last (in bounds) and store nothing. Launched as a
// dependent launch, the first `prefetch` bytes of its rows are asked of L2
// while the kernel before (which wrote x and the residual) finishes.
// NORM: x is a residual row to normalize first (RowsNorm; T = 1): every
// block does, into shared memory, after the wait (the kernel before wrote x),
// and only then may a warp without rows leave (the norm's barriers count
// every thread). DT 3 (T = 1): every block quantizes x (or the normed row)
// into shared memory after that, and only then may such a warp leave.
template <int DT, int NT, int R, int U, int EPI, bool NORM = false>
__global__ void RowsKernel(RowsTargets tg, const float* x, int cols, int T, size_t row_bytes, int64_t prefetch,
                           RowsNorm nm) {
  GridDependents();
  const int first =
      static_cast<int>(map::FirstRow(blockIdx.y, blockIdx.z, gridDim.y, blockDim.x >> 5, threadIdx.x >> 5, R));
  const int lane = threadIdx.x & 31, total = Begin(tg, tg.count);
  static_assert(DT != 3 || NT == 1, "int16 x is a decode step's: one vector");
  if (!NORM && DT != 3 && first >= total) return;
  const int t0 = blockIdx.x * NT, nt = min(NT, T - t0);
  map::StackedRow at[R];
  RowRef w[R];
#pragma unroll
  for (int k = 0; k < R; k++) {
    at[k] = map::Locate([&](int i) { return Begin(tg, i); }, tg.count, min(first + k, total - 1));
    const int rows = Begin(tg, at[k].target + 1) - Begin(tg, at[k].target);
    w[k] = RowOf<DT>(Pick(tg.w, at[k].target), at[k].row, rows, cols, row_bytes);
  }
  RowRef up_w[R];  // the up matrix's same rows (SwiGLU)
  if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU)) {
    const int rows = Begin(tg, 1);
#pragma unroll
    for (int k = 0; k < R; k++) up_w[k] = RowOf<DT>(tg.w[1], at[k].row, rows, cols, row_bytes);
  }
  PrefetchRows<DT, R>(w, prefetch, lane);
  if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU)) PrefetchRows<DT, R>(up_w, prefetch, lane);
  GridDependencyWait();
  if constexpr (NORM) {
    extern __shared__ float4 normed4[];  // cols floats, then the sum's threads / 32
    float* normed = reinterpret_cast<float*>(normed4);
    const float scale = ew::RmsnormScale(RowSumOfSquares(x, cols, nm.threads, normed + cols), cols, nm.eps);
    const bool writes = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = ew::RmsnormApply(x[j], nm.weight[j], scale);
      normed[j] = v;
      if (writes) nm.out[j] = v;
    }
    __syncthreads();
    if (DT != 3 && first >= total) return;
    x = normed;
  }
  float acc[R][NT];
  float up[R][NT];
  if constexpr (DT == 3) {
    extern __shared__ float4 quant4[];  // after the normed row (NORM), x's quants then their scales
    unsigned char* at_x = reinterpret_cast<unsigned char*>(quant4) + (NORM ? q8i::AfterNorm(cols, nm.threads) : 0);
    int16_t* xq = reinterpret_cast<int16_t*>(at_x);
    float* xsc = reinterpret_cast<float*>(at_x + q8i::XScalesOffset(cols));
    const bool finite = QuantizeXShared(x, cols, xq, xsc);
    if (first >= total) return;
    RowDotsQ8Int<R, U>(w, xq, xsc, cols, finite, lane, acc);
    if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU))
      RowDotsQ8Int<R, U>(up_w, xq, xsc, cols, finite, lane, up);
  } else {
    RowDots<DT, NT, R, U>(w, x, cols, t0, nt, lane, acc);
    if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU))
      RowDots<DT, NT, R, U>(up_w, x, cols, t0, nt, lane, up);
  }
  if (lane != 0) return;
#pragma unroll
  for (int k = 0; k < R; k++) {
    if (first + k >= total) break;
    const int rows = Begin(tg, at[k].target + 1) - Begin(tg, at[k].target);
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t >= nt) break;
      float* o = Pick(tg.out, at[k].target) + map::OutputIndex(blockIdx.x, NT, t, rows, at[k].row);
      if constexpr (EPI == static_cast<int>(RowsEpilogue::kAdd)) {
        *o += acc[k][t];
      } else if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU)) {
        *o = ew::SwiGLU(acc[k][t], up[k][t]);
      } else {
        *o = acc[k][t];
      }
    }
  }
}

template <int DT, int NT, int R, int U>
Status LaunchEpilogue(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                      int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  const int64_t pf = plan.prefetch_bytes;
  switch (epilogue) {
    case RowsEpilogue::kStore:
      return LaunchRowsKernel(RowsKernel<DT, NT, R, U, 0>, plan, stream, plan.kernel, ctx, tg, x, cols, T, rb, pf,
                              RowsNorm{});
    case RowsEpilogue::kAdd:
      return LaunchRowsKernel(RowsKernel<DT, NT, R, U, 1>, plan, stream, plan.kernel + "+add", ctx, tg, x, cols, T, rb,
                              pf, RowsNorm{});
    case RowsEpilogue::kSwiGLU:
      return LaunchRowsKernel(RowsKernel<DT, NT, R, U, 2>, plan, stream, plan.kernel + "+swiglu", ctx, tg, x, cols, T,
                              rb, pf, RowsNorm{});
  }
  return Status::Error("cuda: " + ctx + ": rows: unknown epilogue");
}

template <int DT>
Status LaunchDType(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                   int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  if (plan.tile != 1)
    return LaunchEpilogue<DT, kMatmulRowsPerWarp, kBatchedRowsPerWarp, 4>(plan, epilogue, tg, x, cols, T, rb, stream,
                                                                          ctx);
  // A decode step's forms (kRowsForms): the same sums, other loads in flight.
  static_assert(kRowsFormCount == 5, "one launch per form");
  const int r = plan.rows_per_warp, u = plan.unroll;
  if (r == 1 && u == 4) return LaunchEpilogue<DT, 1, 1, 4>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 1 && u == 8) return LaunchEpilogue<DT, 1, 1, 8>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 1 && u == 16) return LaunchEpilogue<DT, 1, 1, 16>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 2 && u == 8) return LaunchEpilogue<DT, 1, 2, 8>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 4 && u == 4) return LaunchEpilogue<DT, 1, 4, 4>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  return Status::Error("cuda: " + ctx + ": rows: no kernel for " + std::to_string(r) + " rows a warp, unroll " +
                       std::to_string(u));
}

// q8_0 on int16 x (plan.int16_x: PlanRowsQ8Int): a decode step's, in its
// own form (kQ8IntRowsForm), with x's quants in the plan's shared memory.
Status LaunchQ8Int(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                   size_t rb, cudaStream_t stream, const std::string& ctx) {
  constexpr RowsForm f = kQ8IntRowsForm;
  if (plan.tile != 1 || plan.rows_per_warp != f.rows_per_warp || plan.unroll != f.unroll ||
      plan.shared_bytes < static_cast<size_t>(q8i::SharedBytes(cols)))
    return Status::Error("cuda: " + ctx + ": rows int16 x: the plan is not PlanRowsQ8Int's for " +
                         std::to_string(cols) + " columns");
  return LaunchEpilogue<3, 1, f.rows_per_warp, f.unroll>(plan, epilogue, tg, x, cols, 1, rb, stream, ctx);
}

// The normed launch of a decode step's form (R rows a warp, unroll U).
template <int DT, int R, int U>
Status LaunchNormedForm(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const RowsNorm& nm,
                        const float* x, int cols, size_t rb, cudaStream_t stream, const std::string& ctx) {
  const int64_t pf = plan.prefetch_bytes;
  if (epilogue == RowsEpilogue::kSwiGLU)
    return LaunchRowsKernel(RowsKernel<DT, 1, R, U, 2, true>, plan, stream, plan.kernel + "+norm+swiglu", ctx, tg, x,
                            cols, 1, rb, pf, nm);
  return LaunchRowsKernel(RowsKernel<DT, 1, R, U, 0, true>, plan, stream, plan.kernel + "+norm", ctx, tg, x, cols, 1,
                          rb, pf, nm);
}

// Instances for each dtype's default decode form only (DefaultRowsForm), the
// form the backend's decode products take; int16 x (DT 3) its own.
template <int DT>
Status LaunchNormedDType(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const RowsNorm& nm,
                         const float* x, int cols, size_t rb, cudaStream_t stream, const std::string& ctx) {
  constexpr RowsForm f = DT == 3 ? kQ8IntRowsForm
                                 : kRowsForms[DefaultRowsForm(DT == 0   ? DType::kF32
                                                              : DT == 1 ? DType::kBF16
                                                                        : DType::kQ8_0)];
  if (plan.tile != 1 || plan.rows_per_warp != f.rows_per_warp || plan.unroll != f.unroll)
    return Status::Error("cuda: " + ctx + ": rows+norm: the plan is not the decode form's (PlanRowsNormed)");
  return LaunchNormedForm<DT, f.rows_per_warp, f.unroll>(plan, epilogue, tg, nm, x, cols, rb, stream, ctx);
}

}  // namespace

bool VectorizedRows(DType dtype, const void* w, const float* x, int cols) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  // Row starts then stay 16-byte aligned: 32 (f32) or 16 (bf16) bytes per 8
  // weights; q8_0 quants at cols bytes a row, and its scales (q8_layout.h).
  return aligned && cols % (dtype == DType::kQ8_0 ? kQ8_0BlockSize : 8) == 0;
}

Status LaunchRowsFused(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                       const float* x, int cols, int T, cudaStream_t stream, const std::string& ctx) {
  if (targets.count < 1 || targets.count > kMaxRowsTargets)
    return Status::Error("cuda: " + ctx + ": rows: " + std::to_string(targets.count) + " targets (1 to " +
                         std::to_string(kMaxRowsTargets) + ")");
  if (epilogue == RowsEpilogue::kSwiGLU && (targets.count != 1 || targets.w[1] == nullptr))
    return Status::Error("cuda: " + ctx + ": rows+swiglu: one target and its up matrix");
  // A q8_0 row's quants are cols bytes apart (q8_layout.h).
  const size_t rb = dtype == DType::kQ8_0 ? static_cast<size_t>(cols) : RowBytes(dtype, cols);
  switch (dtype) {
    case DType::kF32: return LaunchDType<0>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
    case DType::kBF16: return LaunchDType<1>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
    case DType::kQ8_0:
      if (plan.int16_x) {
        if (T != 1) return Status::Error("cuda: " + ctx + ": rows int16 x: one vector, not " + std::to_string(T));
        return LaunchQ8Int(plan, epilogue, targets, x, cols, rb, stream, ctx);
      }
      return LaunchDType<2>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
    case DType::kBlock:  // never launched: a block-quantized model is refused (runs_block_weights)
      break;
  }
  return Status::Error("cuda: " + ctx + ": rows: unknown dtype");
}

Status LaunchRows(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows, int cols,
                  int T, cudaStream_t stream, const std::string& ctx) {
  RowsTargets one;
  one.count = 1;
  one.begin[1] = rows;
  one.w[0] = w;
  one.out[0] = out;
  return LaunchRowsFused(plan, dtype, RowsEpilogue::kStore, one, x, cols, T, stream, ctx);
}

Status LaunchRowsNormed(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                        const RowsNorm& norm, const float* x, int cols, cudaStream_t stream, const std::string& ctx) {
  if (targets.count < 1 || targets.count > kMaxRowsTargets || epilogue == RowsEpilogue::kAdd ||
      (epilogue == RowsEpilogue::kSwiGLU && (targets.count != 1 || targets.w[1] == nullptr)))
    return Status::Error("cuda: " + ctx + ": rows+norm: 1 to 3 targets stored, or one target and its up matrix");
  const size_t normed_bytes = plan.int16_x
                                  ? static_cast<size_t>(q8i::AfterNorm(cols, norm.threads) + q8i::SharedBytes(cols))
                                  : (static_cast<size_t>(cols) + norm.threads / 32) * sizeof(float);
  if (norm.threads < 32 || norm.threads % 32 != 0 || norm.threads > 1024 || plan.shared_bytes < normed_bytes ||
      (plan.int16_x && dtype != DType::kQ8_0))
    return Status::Error("cuda: " + ctx + ": rows+norm: the plan's shared memory or the norm's threads (" +
                         std::to_string(norm.threads) + ") do not fit " + std::to_string(cols) + " columns");
  const size_t rb = dtype == DType::kQ8_0 ? static_cast<size_t>(cols) : RowBytes(dtype, cols);
  switch (dtype) {
    case DType::kF32: return LaunchNormedDType<0>(plan, epilogue, targets, norm, x, cols, rb, stream, ctx);
    case DType::kBF16: return LaunchNormedDType<1>(plan, epilogue, targets, norm, x, cols, rb, stream, ctx);
    case DType::kQ8_0:
      return plan.int16_x ? LaunchNormedDType<3>(plan, epilogue, targets, norm, x, cols, rb, stream, ctx)
                          : LaunchNormedDType<2>(plan, epilogue, targets, norm, x, cols, rb, stream, ctx);
    case DType::kBlock: break;
  }
  return Status::Error("cuda: " + ctx + ": rows+norm: unknown dtype");
}

}  // namespace verity::kernels::cuda
