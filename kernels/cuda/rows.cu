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

// acc[t] = row . x_{t0+t} for t < nt, complete in lane 0.
template <int DT, int NT>
__device__ __forceinline__ void RowDots(const unsigned char* r, const float* x, int cols, int t0, int nt, int lane,
                                        float acc[NT]) {
  const int chunks = cols / 8;
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = 0.0f;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    float wv[8];
    Load8<DT>(r, c, wv);
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t < nt) {
        const float4* xv = reinterpret_cast<const float4*>(x + static_cast<size_t>(t0 + t) * cols) + 2 * c;
        const float4 a = xv[0], b = xv[1];
        acc[t] += wv[0] * a.x;
        acc[t] += wv[1] * a.y;
        acc[t] += wv[2] * a.z;
        acc[t] += wv[3] * a.w;
        acc[t] += wv[4] * b.x;
        acc[t] += wv[5] * b.y;
        acc[t] += wv[6] * b.z;
        acc[t] += wv[7] * b.w;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = WarpSum(acc[t]);
}

// Warp g of the launch takes row g of the stacked targets (row blocks along
// y then z), grid.x's groups of NT vectors.
template <int DT, int NT, int EPI>
__global__ void RowsKernel(RowsTargets tg, const float* x, int cols, int T, size_t row_bytes) {
  const int64_t row_block = static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y;
  const int g = static_cast<int>(row_block * (blockDim.x >> 5)) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (g >= tg.begin[tg.count]) return;
  int i = 0;
  while (i + 1 < tg.count && g >= tg.begin[i + 1]) i++;
  const int row = g - tg.begin[i], rows = tg.begin[i + 1] - tg.begin[i];
  const int t0 = blockIdx.x * NT, nt = min(NT, T - t0);
  const size_t at = static_cast<size_t>(row) * row_bytes;
  float acc[NT];
  RowDots<DT, NT>(static_cast<const unsigned char*>(tg.w[i]) + at, x, cols, t0, nt, lane, acc);
  float up[NT];
  if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU))
    RowDots<DT, NT>(static_cast<const unsigned char*>(tg.w[1]) + at, x, cols, t0, nt, lane, up);
  if (lane != 0) return;
#pragma unroll
  for (int t = 0; t < NT; t++) {
    if (t >= nt) break;
    float* o = tg.out[i] + static_cast<size_t>(t0 + t) * rows + row;
    if constexpr (EPI == static_cast<int>(RowsEpilogue::kAdd)) {
      *o += acc[t];
    } else if constexpr (EPI == static_cast<int>(RowsEpilogue::kSwiGLU)) {
      *o = ew::SwiGLU(acc[t], up[t]);
    } else {
      *o = acc[t];
    }
  }
}

template <int DT, int NT>
Status LaunchEpilogue(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                      int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  const dim3 grid = Grid(plan), block = Block(plan);
  switch (epilogue) {
    case RowsEpilogue::kStore:
      RowsKernel<DT, NT, 0><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case RowsEpilogue::kAdd:
      RowsKernel<DT, NT, 1><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel + "+add", ctx);
      return OkStatus();
    case RowsEpilogue::kSwiGLU:
      RowsKernel<DT, NT, 2><<<grid, block, 0, stream>>>(tg, x, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel + "+swiglu", ctx);
      return OkStatus();
  }
  return Status::Error("cuda: " + ctx + ": rows: unknown epilogue");
}

template <int DT>
Status LaunchDType(const LaunchPlan& plan, RowsEpilogue epilogue, const RowsTargets& tg, const float* x, int cols,
                   int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  if (plan.tile == 1) return LaunchEpilogue<DT, 1>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
  return LaunchEpilogue<DT, kMatmulRowsPerWarp>(plan, epilogue, tg, x, cols, T, rb, stream, ctx);
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
