// llama.cpp's Q4_K and Q6_K blocks on the device (block_rows.h): products
// that read the blocks where they lie, and their expansion to bf16 for a
// prefill GEMM. The weights come from kquant_layout.h (bit-exact to the CPU's
// dequantization, checked on the CPU).
#include <cuda_bf16.h>

#include "kernels/cuda/block_rows.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/kquant_layout.h"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

// One warp a weight row, grid.x groups of NT vectors (1: a decode step;
// kMatmulRowsPerWarp: a batched one), row blocks along y then z. Lane l
// computes weights 8l .. 8l+7 of each 256-weight block in turn and adds their
// products to each vector's sum in column order; the warp sum then adds the
// lanes. Every (row, vector) sum takes the same operations in the same order
// whatever NT and T are, so row t of a batched product is bit for bit the
// single product of x_t (Backend::MatmulRows).
template <uint32_t TYPE, int NT>
__global__ void BlockRowsKernel(float* out, const unsigned char* w, const float* x, int rows, int cols, int T,
                                size_t row_bytes) {
  const int64_t row64 = map::FirstRow(blockIdx.y, blockIdx.z, gridDim.y, blockDim.x >> 5, threadIdx.x >> 5, 1);
  const int lane = threadIdx.x & 31;
  if (row64 >= rows) return;
  const int row = static_cast<int>(row64);
  const int t0 = blockIdx.x * NT, nt = min(NT, T - t0);
  constexpr int kBytes = TYPE == kq::kQ4_K ? kq::kQ4_KBytes : kq::kQ6_KBytes;
  const unsigned char* r = w + static_cast<size_t>(row) * row_bytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = 0.0f;
  const int blocks = cols / kq::kBlockWeights;
  for (int b = 0; b < blocks; b++) {
    float wv[kq::kLaneWeights];
    kq::Weights8(TYPE, r + static_cast<size_t>(b) * kBytes, kq::kLaneWeights * lane, wv);
    const int j = b * kq::kBlockWeights + kq::kLaneWeights * lane;
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t < nt) {
        const float* xt = x + static_cast<size_t>(t0 + t) * cols + j;
#pragma unroll
        for (int i = 0; i < kq::kLaneWeights; i++) acc[t] = fmaf(wv[i], xt[i], acc[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; t++) {
    const float s = WarpSum(acc[t]);
    if (lane == 0 && t < nt) out[map::OutputIndex(blockIdx.x, NT, t, rows, row)] = s;
  }
}

// Group g of 8 weights (row-major over the matrix; a row is whole blocks) as
// 8 bf16, rounded to nearest even.
template <uint32_t TYPE>
__global__ void BlockToBF16Kernel(uint4* out, const unsigned char* w, int cols, size_t row_bytes, int64_t groups) {
  constexpr int kBytes = TYPE == kq::kQ4_K ? kq::kQ4_KBytes : kq::kQ6_KBytes;
  const int64_t per_row = cols / kq::kLaneWeights;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = g / per_row;
    const int c = static_cast<int>(g % per_row) * kq::kLaneWeights;
    float v[kq::kLaneWeights];
    kq::Weights8(TYPE, w + row * row_bytes + static_cast<size_t>(c / kq::kBlockWeights) * kBytes, c % kq::kBlockWeights,
                 v);
    uint32_t p[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      p[i] = ew::F32ToBF16(v[2 * i]) | (static_cast<uint32_t>(ew::F32ToBF16(v[2 * i + 1])) << 16);
    out[g] = make_uint4(p[0], p[1], p[2], p[3]);
  }
}

template <uint32_t TYPE>
Status LaunchRowsOf(const LaunchPlan& plan, float* out, const unsigned char* w, const float* x, int rows, int cols,
                    int T, size_t rb, cudaStream_t stream, const std::string& ctx) {
  if (plan.tile == 1) {
    BlockRowsKernel<TYPE, 1><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, w, x, rows, cols, T, rb);
    VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
    return OkStatus();
  }
  BlockRowsKernel<TYPE, kMatmulRowsPerWarp>
      <<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, w, x, rows, cols, T, rb);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status Unsupported(uint32_t type, const std::string& ctx) {
  return Status::Error("cuda: " + ctx + ": no kernel for ggml block type " + std::to_string(type) +
                       " (the CUDA backend reads Q4_K and Q6_K)");
}

}  // namespace

Status LaunchBlockRows(const LaunchPlan& plan, uint32_t type, float* out, const void* w, const float* x, int rows,
                       int cols, int T, cudaStream_t stream, const std::string& ctx) {
  const auto* wb = static_cast<const unsigned char*>(w);
  if (!kq::Supported(type)) return Unsupported(type, ctx);
  const size_t rb = static_cast<size_t>(cols / kq::kBlockWeights) * kq::BlockBytes(type);
  if (type == kq::kQ4_K) return LaunchRowsOf<kq::kQ4_K>(plan, out, wb, x, rows, cols, T, rb, stream, ctx);
  return LaunchRowsOf<kq::kQ6_K>(plan, out, wb, x, rows, cols, T, rb, stream, ctx);
}

Status LaunchBlockToBF16(const LaunchPlan& plan, uint32_t type, uint16_t* out, const void* w, int rows, int cols,
                         cudaStream_t stream, const std::string& ctx) {
  const auto* wb = static_cast<const unsigned char*>(w);
  if (!kq::Supported(type)) return Unsupported(type, ctx);
  const size_t rb = static_cast<size_t>(cols / kq::kBlockWeights) * kq::BlockBytes(type);
  const int64_t groups = int64_t{rows} * cols / kq::kLaneWeights;
  auto* o = reinterpret_cast<uint4*>(out);
  if (type == kq::kQ4_K) {
    BlockToBF16Kernel<kq::kQ4_K><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(o, wb, cols, rb, groups);
    VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
    return OkStatus();
  }
  BlockToBF16Kernel<kq::kQ6_K><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(o, wb, cols, rb, groups);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

}  // namespace verity::kernels::cuda
