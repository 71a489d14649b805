// The 16-byte matrix-vector kernel (LaunchRows, cuda_kernels.h) and its fused
// forms (rows.h). A warp per weight row: each lane reads 8 weights per
// 16-byte load with four loads in flight, and carries NT vectors at once (1
// for a decode step, kMatmulRowsPerWarp for a batched one), so a batched
// row is bit for bit the single one. RowDots is the one dot-product routine
// every variant runs.
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

// Chunk c (8 consecutive weights) of a row stored as DT (0: f32, 1: bf16, 2: q8_0).
template <int DT>
__device__ __forceinline__ void Load8(const unsigned char* row, int c, float w[8]) {
  if constexpr (DT == 0) {
    const float4 a = reinterpret_cast<const float4*>(row)[2 * c], b = reinterpret_cast<const float4*>(row)[2 * c + 1];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  } else if constexpr (DT == 1) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + c);
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      w[2 * i] = ew::BF16ToF32(static_cast<uint16_t>(u[i] & 0xffffu));
      w[2 * i + 1] = ew::BF16ToF32(static_cast<uint16_t>(u[i] >> 16));
    }
  } else {
    // Plain 36-byte blocks (4-byte aligned): chunk c is the (c % 4)-th 8 of block c / 4.
    const unsigned char* block = row + static_cast<size_t>(c >> 2) * kQ8_0BlockBytes;
    const float scale = *reinterpret_cast<const float*>(block);
    const int* q = reinterpret_cast<const int*>(block + 4 + 8 * (c & 3));
    const int lo = q[0], hi = q[1];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      w[i] = scale * static_cast<float>(static_cast<signed char>((lo >> (8 * i)) & 0xff));
      w[4 + i] = scale * static_cast<float>(static_cast<signed char>((hi >> (8 * i)) & 0xff));
    }
  }
}

// acc[r][t] = row r . x_{t0+t} for r < R, t < nt, complete in lane 0. Each
// (row, vector) sum takes the same products in the same order whatever R and
// NT are, so a batched row has the bits of a single one. R rows a warp reuse
// each vector chunk from registers: at NT = 8 vectors, reading them for one
// row per weight chunk would move 16 bytes of x from L1 per byte of weights.
template <int DT, int NT, int R, int U>
__device__ __forceinline__ void RowDots(const unsigned char* const (&r)[R], const float* x, int cols, int t0, int nt,
                                        int lane, float (&acc)[R][NT]) {
  const int chunks = cols / 8;
#pragma unroll
  for (int k = 0; k < R; k++)
#pragma unroll
    for (int t = 0; t < NT; t++) acc[k][t] = 0.0f;
#pragma unroll U
  for (int c = lane; c < chunks; c += 32) {
    float wv[R][8];
#pragma unroll
    for (int k = 0; k < R; k++) Load8<DT>(r[k], c, wv[k]);
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t < nt) {
        const float4* xv = reinterpret_cast<const float4*>(x + static_cast<size_t>(t0 + t) * cols) + 2 * c;
        const float4 a = xv[0], b = xv[1];
#pragma unroll
        for (int k = 0; k < R; k++) {
          acc[k][t] += wv[k][0] * a.x;
          acc[k][t] += wv[k][1] * a.y;
          acc[k][t] += wv[k][2] * a.z;
          acc[k][t] += wv[k][3] * a.w;
          acc[k][t] += wv[k][4] * b.x;
          acc[k][t] += wv[k][5] * b.y;
          acc[k][t] += wv[k][6] * b.z;
          acc[k][t] += wv[k][7] * b.w;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < R; k++)
#pragma unroll
    for (int t = 0; t < NT; t++) acc[k][t] = WarpSum(acc[k][t]);
}

// a[i] by constant indices: a run-time index into a kernel parameter would
// copy the whole parameter to local memory.
template <class T>
__device__ __forceinline__ T Pick(const T (&a)[kMaxRowsTargets], int i) {
  static_assert(kMaxRowsTargets == 3, "one select per target");
  return i == 0 ? a[0] : i == 1 ? a[1] : a[2];
}
// tg.begin[i] by constant indices (see Pick).
__device__ __forceinline__ int Begin(const RowsTargets& tg, int i) {
  return i == 0 ? tg.begin[0] : i == 1 ? tg.begin[1] : i == 2 ? tg.begin[2] : tg.begin[3];
}

// Warp w of the launch takes rows w*R .. w*R+R-1 of the stacked targets (row
// blocks along y then z), grid.x's groups of NT vectors. A warp's rows past
// the last read the last (in bounds) and store nothing.
template <int DT, int NT, int R, int U, int EPI>
__global__ void RowsKernel(RowsTargets tg, const float* x, int cols, int T, size_t row_bytes) {
  const int first = static_cast<int>(map::FirstRow(blockIdx.y, blockIdx.z, gridDim.y, blockDim.x >> 5, threadIdx.x >> 5, R));
  const int lane = threadIdx.x & 31, total = Begin(tg, tg.count);
  if (first >= total) return;
  const int t0 = blockIdx.x * NT, nt = min(NT, T - t0);
  map::StackedRow at[R];
  const unsigned char* w[R];
#pragma unroll
  for (int k = 0; k < R; k++) {
    at[k] = map::Locate([&](int i) { return Begin(tg, i); }, tg.count, min(first + k, total - 1));
    w[k] = static_cast<const unsigned char*>(Pick(tg.w, at[k].target)) + static_cast<size_t>(at[k].row) * row_bytes;
  }
  float acc[R][NT];
  RowDots<DT, NT, R, U>(w, x, cols, t0, nt, lane, acc);
  float up[R][NT];
  if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU)) {
    const unsigned char* up_w[R];  // the up matrix's same rows
#pragma unroll
    for (int k = 0; k < R; k++) up_w[k] = static_cast<const unsigned char*>(tg.w[1]) + static_cast<size_t>(at[k].row) * row_bytes;
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
  const dim3 grid = Grid(plan), block = Block(plan);
  switch (epilogue) {
    case RowsEpilogue::kStore:
      RowsKernel<DT, NT, R, U, 0><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case RowsEpilogue::kAdd:
      RowsKernel<DT, NT, R, U, 1><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel + "+add", ctx);
      return OkStatus();
    case RowsEpilogue::kSwiGLU:
      RowsKernel<DT, NT, R, U, 2><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel + "+swiglu", ctx);
      return OkStatus();
  }
  return Status::Error("cuda: " + ctx + ": rows: unknown epilogue");
}

template <int DT>
Status LaunchDType(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                   int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  if (plan.tile != 1)
    return LaunchEpilogue<DT, kMatmulRowsPerWarp, kBatchedRowsPerWarp, 4>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  // A decode step's forms (kRowsForms): the same sums, other loads in flight.
  static_assert(kRowsFormCount == 4, "one launch per form");
  const int r = plan.rows_per_warp, u = plan.unroll;
  if (r == 1 && u == 4) return LaunchEpilogue<DT, 1, 1, 4>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 1 && u == 8) return LaunchEpilogue<DT, 1, 1, 8>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 1 && u == 16) return LaunchEpilogue<DT, 1, 1, 16>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  if (r == 2 && u == 8) return LaunchEpilogue<DT, 1, 2, 8>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  return Status::Error("cuda: " + ctx + ": rows: no kernel for " + std::to_string(r) + " rows a warp, unroll " +
                       std::to_string(u));
}

}  // namespace

bool VectorizedRows(DType dtype, const void* w, const float* x, int cols) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       (dtype == DType::kQ8_0 ? reinterpret_cast<uintptr_t>(w) % 4 == 0
                                              : reinterpret_cast<uintptr_t>(w) % 16 == 0);
  return aligned && cols % 8 == 0;  // row starts then stay aligned: 32 (f32), 16 (bf16) or 36 (q8_0) bytes per 8 weights
}

Status LaunchRowsFused(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                       const float* x, int cols, int T, cudaStream_t stream, const std::string& ctx) {
  if (targets.count < 1 || targets.count > kMaxRowsTargets)
    return Status::Error("cuda: " + ctx + ": rows: " + std::to_string(targets.count) + " targets (1 to " +
                         std::to_string(kMaxRowsTargets) + ")");
  if (epilogue == RowsEpilogue::kSwiGLU && (targets.count != 1 || targets.w[1] == nullptr))
    return Status::Error("cuda: " + ctx + ": rows+swiglu: one target and its up matrix");
  const size_t rb = RowBytes(dtype, cols);
  switch (dtype) {
    case DType::kF32:
      return LaunchDType<0>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
    case DType::kBF16:
      return LaunchDType<1>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
    case DType::kQ8_0:
      return LaunchDType<2>(plan, epilogue, targets, x, cols, T, rb, stream, ctx);
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

}  // namespace verity::kernels::cuda
