// The rows products of a batched step on tensor cores (rows.h,
// LaunchRowsMma): mma.sync m16n8k16 with bf16 weights (or q8_0 quants, exact
// as bf16, each 32-column step's sum scaled apart), x split into two bf16
// values (hi + lo), f32 accumulation. At 32 vectors the CUDA-core kernel
// (rows.cu) is bound by its FMAs, 8.6x slower per vector than at one on the
// H200 (docs/cuda.md); the tensor cores do the same products in a fraction
// of the weights' read time. Which lane holds which weight and value:
// mma_map.h, walked on the CPU by tests/cuda_elementwise_test.cc.
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/mma_map.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/rows_launch.cuh"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

// D = A B + D for one m16n8k16 tile (bf16 in, f32 accumulate). Compiled
// for sm_80 and later only (CMAKE_CUDA_ARCHITECTURES); a build for an older
// device traps rather than return zeros.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

// The 8 values of x lane `lane` multiplies in a step, as hi and lo words
// (mma_map.h: VectorWords), or zeros for a vector past the launch's.
__device__ __forceinline__ void LoadVector(const float* xv, bool present, uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  float v[8] = {};
  if (present) {
    const float4 a = reinterpret_cast<const float4*>(xv)[0], b = reinterpret_cast<const float4*>(xv)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
  mma::VectorWords(v, hi, lo);
}

// Block (x, y, z): the vectors 32x .. 32x+31 and the stacked rows of row
// block (y, z), kMmaRowsWarps warps splitting the columns. DT 1: bf16
// weights; 2: q8_0 (q8_layout.h: quants, then scales), whose 32-column step
// is one block: its products are summed apart, then scaled and added. MT
// 16-row tiles a block; EPI a RowsEpilogue (SwiGLU: the up matrix's rows
// too, kMats 2). A row past the last loads the last and stores nothing.
template <int DT, int MT, int EPI>
__global__ void __launch_bounds__(kMmaRowsWarps * 32) RowsMmaKernel(RowsTargets tg, const float* x, int cols, int T) {
  GridDependents();
  constexpr int kRows = MT * mma::kTileRows;
  constexpr bool kSwiGLU = EPI == static_cast<int>(RowsEpilogue::kSwiGLU), kQ8 = DT == 2;
  constexpr int kMats = kSwiGLU ? 2 : 1;
  extern __shared__ float partial[];  // [kMats][warps][kRows][32]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int total = Begin(tg, tg.count);
  const int64_t first = map::FirstRow(blockIdx.y, blockIdx.z, gridDim.y, 1, 0, kRows);
  if (first >= total) return;
  const int v0 = blockIdx.x * mma::kGroupVectors, nv = min(mma::kGroupVectors, T - v0);
  auto begin_at = [&](int i) { return Begin(tg, i); };
  // The lane's rows: tile m's rows g and g + 8 (half h), of each matrix; a
  // q8_0 row's quants (cols bytes) and its scales (one per step).
  const unsigned char* rowp[kMats][MT][2];
  const float* scp[kMats][MT][2];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int g =
          static_cast<int>(min(first + m * mma::kTileRows + mma::ARow(lane, h), static_cast<int64_t>(total - 1)));
      const map::StackedRow at = map::Locate(begin_at, tg.count, g);
      const int rows = Begin(tg, at.target + 1) - Begin(tg, at.target);
#pragma unroll
      for (int k = 0; k < kMats; k++) {
        const void* base = k == 0 ? Pick(tg.w, at.target) : tg.w[1];  // SwiGLU's up: the gate's shape
        rowp[k][m][h] = kQ8 ? q8::RowQuants(base, at.row, cols)
                            : static_cast<const unsigned char*>(base) + static_cast<size_t>(at.row) * cols * 2;
        scp[k][m][h] = kQ8 ? q8::RowScales(base, rows, cols, at.row) : nullptr;
      }
    }
  float acc[kMats][MT][mma::kVectorTiles][4] = {};
  GridDependencyWait();
  const int steps = cols / mma::kStepCols;
#pragma unroll 2
  for (int s = warp; s < steps; s += warps) {
    const int64_t c = mma::StepColumn(s, lane);
    uint32_t aw[kMats][MT][2][4];  // the row's 8 weights of the step, as 4 bf16 pair words
    float sc[kMats][MT][2];        // q8_0: the row's scale of the step's block
#pragma unroll
    for (int k = 0; k < kMats; k++)
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          if constexpr (kQ8) {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(rowp[k][m][h] + c));
            mma::QuantChunkWords(q.x, q.y, aw[k][m][h]);
            sc[k][m][h] = __ldg(scp[k][m][h] + s);
          } else {
            const uint4 w = __ldg(reinterpret_cast<const uint4*>(rowp[k][m][h] + 2 * c));
            aw[k][m][h][0] = w.x, aw[k][m][h][1] = w.y, aw[k][m][h][2] = w.z, aw[k][m][h][3] = w.w;
          }
        }
#pragma unroll
    for (int j = 0; j < mma::kVectorTiles; j++) {
      if (j * mma::kTileCols >= nv) break;
      const int v = j * mma::kTileCols + mma::BVector(lane);
      uint32_t hi[4], lo[4];
      LoadVector(x + static_cast<size_t>(v0 + v) * cols + c, v < nv, hi, lo);
      float block[kMats][MT][4] = {};  // q8_0: the step's unscaled sums
#pragma unroll
      for (int q = 0; q < 2; q++)
#pragma unroll
        for (int k = 0; k < kMats; k++)
#pragma unroll
          for (int m = 0; m < MT; m++) {
            uint32_t fa[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
              const uint32_t(&w)[4] = aw[k][m][r & 1];
              fa[r] = mma::ChunkWord(w[0], w[1], w[2], w[3], mma::AWord(q, r));
            }
            float(&d)[4] = kQ8 ? block[k][m] : acc[k][m][j];
            Mma(d, fa, hi[mma::BWord(q, 0)], hi[mma::BWord(q, 1)]);
            Mma(d, fa, lo[mma::BWord(q, 0)], lo[mma::BWord(q, 1)]);
          }
      if constexpr (kQ8) {
#pragma unroll
        for (int k = 0; k < kMats; k++)
#pragma unroll
          for (int m = 0; m < MT; m++)
#pragma unroll
            for (int i = 0; i < 4; i++)
              acc[k][m][j][i] = fmaf(sc[k][m][mma::CHalf(i)], block[k][m][i], acc[k][m][j][i]);
      }
    }
  }
  // Every warp's partial sums to shared memory, then each output the sum of
  // the warps' in warp order.
#pragma unroll
  for (int k = 0; k < kMats; k++)
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int j = 0; j < mma::kVectorTiles; j++)
#pragma unroll
        for (int i = 0; i < 4; i++)
          partial[k * warps * kRows * mma::kGroupVectors +
                  mma::Partial(warp, kRows, m * mma::kTileRows + mma::CRow(lane, i),
                               j * mma::kTileCols + mma::CVector(lane, i))] = acc[k][m][j][i];
  __syncthreads();
  for (int o = threadIdx.x; o < kRows * mma::kGroupVectors; o += blockDim.x) {
    const int row = o / mma::kGroupVectors, v = o % mma::kGroupVectors;
    if (v >= nv || first + row >= total) continue;
    float sum[kMats];
#pragma unroll
    for (int k = 0; k < kMats; k++) {
      const float* p = partial + k * warps * kRows * mma::kGroupVectors;
      sum[k] = p[mma::Partial(0, kRows, row, v)];
      for (int w = 1; w < warps; w++) sum[k] = ew::Add(sum[k], p[mma::Partial(w, kRows, row, v)]);
    }
    const map::StackedRow at = map::Locate(begin_at, tg.count, static_cast<int>(first + row));
    const int rows = Begin(tg, at.target + 1) - Begin(tg, at.target);
    float* out = Pick(tg.out, at.target) + map::OutputIndex(blockIdx.x, mma::kGroupVectors, v, rows, at.row);
    if constexpr (EPI == static_cast<int>(RowsEpilogue::kAdd)) {
      *out = ew::Add(*out, sum[0]);
    } else if constexpr (kSwiGLU) {
      *out = ew::SwiGLU(sum[0], sum[kMats - 1]);
    } else {
      *out = sum[0];
    }
  }
}

template <int DT>
Status LaunchEpilogue(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                      int T, cudaStream_t stream, const std::string& ctx) {
  switch (epilogue) {
    case RowsEpilogue::kStore:
      return LaunchRowsKernel(RowsMmaKernel<DT, 2, 0>, plan, stream, plan.kernel, ctx, tg, x, cols, T);
    case RowsEpilogue::kAdd:
      return LaunchRowsKernel(RowsMmaKernel<DT, 2, 1>, plan, stream, plan.kernel + "+add", ctx, tg, x, cols, T);
    case RowsEpilogue::kSwiGLU:
      return LaunchRowsKernel(RowsMmaKernel<DT, 1, 2>, plan, stream, plan.kernel + "+swiglu", ctx, tg, x, cols, T);
  }
  return Status::Error("cuda: " + ctx + ": rows_mma: unknown epilogue");
}

}  // namespace

Status LaunchRowsMma(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                     const float* x, int cols, int T, cudaStream_t stream, const std::string& ctx) {
  if (targets.count < 1 || targets.count > kMaxRowsTargets)
    return Status::Error("cuda: " + ctx + ": rows_mma: " + std::to_string(targets.count) + " targets (1 to " +
                         std::to_string(kMaxRowsTargets) + ")");
  const bool swiglu = epilogue == RowsEpilogue::kSwiGLU;
  if (swiglu && (targets.count != 1 || targets.w[1] == nullptr))
    return Status::Error("cuda: " + ctx + ": rows_mma+swiglu: one target and its up matrix");
  if (plan.tile != (swiglu ? kMmaRowsTile / 2 : kMmaRowsTile) || plan.block.x != kMmaRowsWarps * 32u)
    return Status::Error("cuda: " + ctx + ": rows_mma: the plan is not PlanRowsMma's for this epilogue");
  // SwiGLU: a 16-row tile of the gate and the up's; the others 32 rows.
  if (dtype == DType::kQ8_0) return LaunchEpilogue<2>(plan, epilogue, targets, x, cols, T, stream, ctx);
  if (dtype == DType::kBF16) return LaunchEpilogue<1>(plan, epilogue, targets, x, cols, T, stream, ctx);
  return Status::Error("cuda: " + ctx + ": rows_mma: " + DTypeName(dtype) + " weights (bf16 and q8_0 only)");
}
}  // namespace verity::kernels::cuda
