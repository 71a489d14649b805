// The CUDA kernels and their checked launchers (cuda_kernels.h). Per-element
// arithmetic comes from elementwise.h (tested on the CPU); configurations come
// from launch_plan.h (validated before any launch). Warp-level code assumes a
// warp of 32 threads (every NVIDIA GPU; DeviceLimits::warp_size is checked at
// backend creation).
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"

namespace verity::kernels::cuda {
namespace {

// Block-wide sum or max; every thread gets the result. `red` holds one float
// per warp. Safe to call repeatedly (synchronizes before reusing red).
template <bool kMax>
__device__ float BlockReduce(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // red may still be read by a previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < warps; w++) r = kMax ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

// Weight j of a row stored as DT (0: f32, 1: bf16, 2: q8_0).
template <int DT>
__device__ __forceinline__ float WeightAt(const unsigned char* row, int j) {
  if constexpr (DT == 0) return reinterpret_cast<const float*>(row)[j];
  if constexpr (DT == 1) return ew::BF16ToF32(reinterpret_cast<const uint16_t*>(row)[j]);
  return ew::Q8_0Weight(row + static_cast<size_t>(j / kQ8_0BlockSize) * kQ8_0BlockBytes, j % kQ8_0BlockSize);
}

// One warp per row: lanes stride over the columns, then a warp sum.
template <int DT>
__global__ void MatvecKernel(float* out, const unsigned char* w, const float* x, int rows, int cols, size_t row_bytes) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const unsigned char* r = w + static_cast<size_t>(row) * row_bytes;
  float sum = 0.0f;
  for (int j = lane; j < cols; j += 32) sum += WeightAt<DT>(r, j) * x[j];
  sum = WarpSum(sum);
  if (lane == 0) out[row] = sum;
}

// One warp per weight row and group of up to kMatmulRowsPerWarp query rows
// (blockIdx.y): each weight is read once per group.
template <int DT>
__global__ void MatmulBatchKernel(float* out, const unsigned char* w, const float* x, int rows, int cols, int T,
                                  size_t row_bytes) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int t0 = blockIdx.y * kMatmulRowsPerWarp;
  const int nt = min(kMatmulRowsPerWarp, T - t0);
  const unsigned char* r = w + static_cast<size_t>(row) * row_bytes;
  float acc[kMatmulRowsPerWarp] = {};
  for (int j = lane; j < cols; j += 32) {
    const float wj = WeightAt<DT>(r, j);
#pragma unroll
    for (int t = 0; t < kMatmulRowsPerWarp; t++)
      if (t < nt) acc[t] += wj * x[static_cast<size_t>(t0 + t) * cols + j];
  }
#pragma unroll
  for (int t = 0; t < kMatmulRowsPerWarp; t++) {
    const float s = WarpSum(acc[t]);
    if (lane == 0 && t < nt) out[static_cast<size_t>(t0 + t) * rows + row] = s;
  }
}

// ---- Matrix-vector products written for HBM: 16-byte loads, every lane of a
// warp on its own 8 consecutive weights (a warp reads 512 bytes of bf16 per
// step), the loop unrolled so several loads are in flight. The same template
// serves one vector (NT = 1, decode) and up to kMatmulRowsPerWarp vectors
// (batched decode): a lane accumulates each vector in the same order in both,
// so row t of a batched product is bit for bit the single product of x_t
// (batch invariance; Backend::MatmulRows). Used where a row's weights and the
// vectors are 16-byte aligned (VectorizedRows); other shapes take the kernels above.

// Weights 8c .. 8c+7 of a row as floats.
// ---- The steps between the products, on the device.

// Row t of x = row tokens[t] of the table (dim floats each).
__global__ void EmbedKernel(float* x, const float* table, const int* tokens, int dim, int n) {
  const int t = blockIdx.y;
  if (t >= n) return;
  const float* src = table + static_cast<size_t>(tokens[t]) * dim;
  float* dst = x + static_cast<size_t>(t) * dim;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < dim; i += gridDim.x * blockDim.x) dst[i] = src[i];
}

// RopeKernel for one row whose table row is read on the device.
__global__ void RopeAtKernel(float* vec, const float* table, const int* pos, int size, int head_size, bool interleaved) {
  const int half = head_size / 2, pairs = size / 2;
  const float* cs = table + static_cast<size_t>(*pos) * half * 2;
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    const int head = p / half, i = p % half;
    int a = 0, b = 0;
    ew::RopePairIndex(head * head_size, i, head_size, interleaved, &a, &b);
    ew::RopePair(&vec[a], &vec[b], cs[2 * i], cs[2 * i + 1]);
  }
}

// A KV row into the cache at the position read on the device.
__global__ void CopyRowAtKernel(float* base, int64_t pos_stride, const int* pos, const float* row, int width) {
  float* dst = base + static_cast<int64_t>(*pos) * pos_stride;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) dst[i] = row[i];
}

// out[i] = x[i] in bf16 (round to nearest even), the GEMM's activations.
__global__ void ToBF16Kernel(uint16_t* out, const float* x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = ew::F32ToBF16(x[i]);
}

// op 0: x[i] += y[i]; op 1: x[i] += a * y[i]; op 2: x[i] /= a.
__global__ void ElementwiseKernel(int op, float* x, const float* y, float a, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (op == 0) {
      x[i] += y[i];
    } else if (op == 1) {
      x[i] += a * y[i];
    } else {
      x[i] /= a;
    }
  }
}

__global__ void RmsnormKernel(float* out, const float* x, const float* weight, int size, float eps) {
  extern __shared__ float red[];
  const size_t base = static_cast<size_t>(blockIdx.x) * size;
  float ss = 0.0f;
  for (int j = threadIdx.x; j < size; j += blockDim.x) ss += x[base + j] * x[base + j];
  const float scale = ew::RmsnormScale(BlockReduce<false>(ss, red), size, eps);
  for (int j = threadIdx.x; j < size; j += blockDim.x) out[base + j] = ew::RmsnormApply(x[base + j], weight[j], scale);
}

__global__ void RopeKernel(float* vec, const float* cos_sin, int size, int head_size, bool interleaved) {
  const int half = head_size / 2, pairs = size / 2, row = blockIdx.y;
  float* v = vec + static_cast<size_t>(row) * size;
  const float* cs = cos_sin + static_cast<size_t>(row) * half * 2;
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    const int head = p / half, i = p % half;
    int a = 0, b = 0;
    ew::RopePairIndex(head * head_size, i, head_size, interleaved, &a, &b);
    ew::RopePair(&v[a], &v[b], cs[2 * i], cs[2 * i + 1]);
  }
}

// One block per (head, query). The cache is walked in tiles of plan.tile
// positions: scores of a tile in shared memory, an online softmax across
// tiles, the output accumulated in shared memory. Nothing grows with the context.
__global__ void AttentionKernel(AttentionDeviceArgs a, int tile) {
  extern __shared__ float smem[];
  const int hs = a.head_size, h = blockIdx.x, y = blockIdx.y;
  float* q = smem;
  float* acc = q + hs;
  float* scores = acc + hs;
  float* red = scores + tile;
  const int64_t pos = (a.pos0_at ? *a.pos0_at : a.pos0) + y, n = pos + 1;
  const int64_t kv_off = static_cast<int64_t>(h / (a.n_heads / a.n_kv_heads)) * hs;
  const float* qrow = a.q + y * a.row_stride + static_cast<int64_t>(h) * hs;
  for (int i = threadIdx.x; i < hs; i += blockDim.x) {
    q[i] = qrow[i];
    acc[i] = 0.0f;
  }
  __syncthreads();
  const float root = sqrtf(static_cast<float>(hs));
  ew::OnlineSoftmax st;
  for (int64_t t0 = 0; t0 < n; t0 += tile) {
    const int len = static_cast<int>(min(static_cast<int64_t>(tile), n - t0));
    float local_max = -INFINITY;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
      const float* k = a.key_cache + (t0 + j) * a.pos_stride + kv_off;
      float dot = 0.0f;
      for (int i = 0; i < hs; i++) dot += q[i] * k[i];
      scores[j] = dot / root;
      local_max = fmaxf(local_max, scores[j]);
    }
    const float factor = ew::OnlineSoftmaxRescale(&st, BlockReduce<true>(local_max, red));
    float local_sum = 0.0f;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
      scores[j] = ew::OnlineSoftmaxWeight(st, scores[j]);
      local_sum += scores[j];
    }
    st.s += BlockReduce<false>(local_sum, red);  // its leading __syncthreads publishes the weights
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
      float v_acc = acc[i] * factor;
      for (int j = 0; j < len; j++) v_acc += scores[j] * a.value_cache[(t0 + j) * a.pos_stride + kv_off + i];
      acc[i] = v_acc;
    }
    __syncthreads();  // the next tile overwrites scores
  }
  float* orow = a.out + y * a.row_stride + static_cast<int64_t>(h) * hs;
  for (int i = threadIdx.x; i < hs; i += blockDim.x) orow[i] = acc[i] / st.s;
}

__global__ void SwiGLUKernel(float* hb, const float* hb2, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    hb[i] = ew::SwiGLU(hb[i], hb2[i]);
}

__global__ void MoeTopKKernel(const float* logits, int n_experts, int k, int* chosen, float* weights) {
  if (threadIdx.x != 0) return;
  const size_t row = blockIdx.x;
  ew::MoeTopK(logits + row * n_experts, n_experts, k, chosen + row * k, weights + row * k);
}

__global__ void ArgmaxKernel(const float* x, int64_t n, int* out) {
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float* best_v = smem;
  int* best_i = reinterpret_cast<int*>(smem + warps);
  float v = -INFINITY;
  int idx = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (idx < 0 || ew::ArgmaxBeats(x[i], static_cast<int>(i), v, idx)) {
      v = x[i];
      idx = static_cast<int>(i);
    }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(kFullMask, v, o);
    const int oi = __shfl_down_sync(kFullMask, idx, o);
    if (oi >= 0 && (idx < 0 || ew::ArgmaxBeats(ov, oi, v, idx))) {
      v = ov;
      idx = oi;
    }
  }
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < warps; w++)
    if (best_i[w] >= 0 && (idx < 0 || ew::ArgmaxBeats(best_v[w], best_i[w], v, idx))) {
      v = best_v[w];
      idx = best_i[w];
    }
  *out = idx;
}

}  // namespace

Status LaunchMatvec(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows, int cols,
                    cudaStream_t stream, const std::string& ctx) {
  const auto* wb = static_cast<const unsigned char*>(w);
  const size_t rb = RowBytes(dtype, cols);
  switch (dtype) {
    case DType::kF32:
      MatvecKernel<0><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case DType::kBF16:
      MatvecKernel<1><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case DType::kQ8_0:
      MatvecKernel<2><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
  }
  return Status::Error("cuda: " + ctx + ": matvec: unknown dtype");
}

Status LaunchMatmulBatch(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows,
                         int cols, int T, cudaStream_t stream, const std::string& ctx) {
  const auto* wb = static_cast<const unsigned char*>(w);
  const size_t rb = RowBytes(dtype, cols);
  switch (dtype) {
    case DType::kF32:
      MatmulBatchKernel<0><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case DType::kBF16:
      MatmulBatchKernel<1><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
    case DType::kQ8_0:
      MatmulBatchKernel<2><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, wb, x, rows, cols, T, rb);
      VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
      return OkStatus();
  }
  return Status::Error("cuda: " + ctx + ": matmul_batch: unknown dtype");
}

Status LaunchEmbed(const LaunchPlan& plan, float* x, const float* table, const int* tokens, int dim, int n,
                   cudaStream_t stream, const std::string& ctx) {
  EmbedKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(x, table, tokens, dim, n);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchRopeAt(const LaunchPlan& plan, float* vec, const float* table, const int* pos, int size, int head_size,
                    bool interleaved, cudaStream_t stream, const std::string& ctx) {
  RopeAtKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(vec, table, pos, size, head_size, interleaved);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchCopyRowAt(const LaunchPlan& plan, float* base, int64_t pos_stride, const int* pos, const float* row,
                       int width, cudaStream_t stream, const std::string& ctx) {
  CopyRowAtKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(base, pos_stride, pos, row, width);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchToBF16(const LaunchPlan& plan, uint16_t* out, const float* x, int64_t n, cudaStream_t stream,
                    const std::string& ctx) {
  ToBF16Kernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, x, n);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchElementwise(const LaunchPlan& plan, ElementwiseOp op, float* x, const float* y, float a, int64_t n,
                         cudaStream_t stream, const std::string& ctx) {
  ElementwiseKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(static_cast<int>(op), x, y, a, n);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchRmsnorm(const LaunchPlan& plan, float* out, const float* x, const float* weight, int rows, int size,
                     float eps, cudaStream_t stream, const std::string& ctx) {
  (void)rows;  // one block per row: plan.grid.x
  RmsnormKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(out, x, weight, size, eps);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchRope(const LaunchPlan& plan, float* vec, const float* cos_sin, int rows, int size, int head_size,
                  bool interleaved, cudaStream_t stream, const std::string& ctx) {
  (void)rows;  // one grid row per vector: plan.grid.y
  RopeKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(vec, cos_sin, size, head_size, interleaved);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, cudaStream_t stream,
                       const std::string& ctx) {
  AttentionKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(a, plan.tile);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchSwiGLU(const LaunchPlan& plan, float* hb, const float* hb2, int64_t n, cudaStream_t stream,
                    const std::string& ctx) {
  SwiGLUKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(hb, hb2, n);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchMoeTopK(const LaunchPlan& plan, const float* logits, int rows, int n_experts, int k, int* chosen,
                     float* weights, cudaStream_t stream, const std::string& ctx) {
  (void)rows;  // one block per row: plan.grid.x
  MoeTopKKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(logits, n_experts, k, chosen, weights);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchArgmax(const LaunchPlan& plan, const float* x, int64_t n, int* out, cudaStream_t stream,
                    const std::string& ctx) {
  ArgmaxKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(x, n, out);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

}  // namespace verity::kernels::cuda
