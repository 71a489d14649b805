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
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/work_map.h"

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

// Weight j of row `row` of a [rows x cols] matrix stored as DT (0: f32,
// 1: bf16, 2: q8_0 in the device layout of q8_layout.h), rows row_bytes apart.
template <int DT>
__device__ __forceinline__ float WeightAt(const unsigned char* w, size_t row_bytes, int rows, int cols, int row,
                                          int j) {
  if constexpr (DT == 2) return q8::Weight(w, int64_t{rows} * cols, int64_t{row} * cols + j);
  const unsigned char* r = w + static_cast<size_t>(row) * row_bytes;
  if constexpr (DT == 0) return reinterpret_cast<const float*>(r)[j];
  return ew::BF16ToF32(reinterpret_cast<const uint16_t*>(r)[j]);
}

// One warp per row: lanes stride over the columns, then a warp sum.
template <int DT>
__global__ void MatvecKernel(float* out, const unsigned char* w, const float* x, int rows, int cols, size_t row_bytes) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  float sum = 0.0f;
  for (int j = lane; j < cols; j += 32) sum += WeightAt<DT>(w, row_bytes, rows, cols, row, j) * x[j];
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
  float acc[kMatmulRowsPerWarp] = {};
  for (int j = lane; j < cols; j += 32) {
    const float wj = WeightAt<DT>(w, row_bytes, rows, cols, row, j);
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
__global__ void RopeAtKernel(float* vec, const float* table, const int* pos, int size, int head_size,
                             bool interleaved) {
  const int half = head_size / 2, pairs = size / 2;
  const float* cs = table + static_cast<size_t>(*pos) * half * 2;
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    int a = 0, b = 0;
    RotatePair(vec, p, cs, head_size, interleaved, &a, &b);
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

// op: ElementwiseOp (cuda_kernels.h).
__global__ void ElementwiseKernel(int op, float* x, const float* y, float a, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (op == 0) {
      x[i] += y[i];
    } else if (op == 1) {
      x[i] += a * y[i];
    } else if (op == 2) {
      x[i] /= a;
    } else if (op == 3) {
      x[i] = ew::Mul(x[i], a);
    } else {
      x[i] = ew::SoftCap(x[i], a);
    }
  }
}

__global__ void RmsnormKernel(float* out, const float* x, const float* weight, int size, float eps) {
  GridDependents();  // the product after it may start its weights' prefetch
  extern __shared__ float red[];
  const size_t base = static_cast<size_t>(blockIdx.x) * size;
  const float scale = ew::RmsnormScale(RowSumOfSquares(x + base, size, blockDim.x, red), size, eps);
  for (int j = threadIdx.x; j < size; j += blockDim.x) out[base + j] = ew::RmsnormApply(x[base + j], weight[j], scale);
}

__global__ void RopeKernel(float* vec, const float* cos_sin, int size, int head_size, bool interleaved) {
  const int half = head_size / 2, pairs = size / 2, row = blockIdx.y;
  float* v = vec + static_cast<size_t>(row) * size;
  const float* cs = cos_sin + static_cast<size_t>(row) * half * 2;
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    int a = 0, b = 0;
    RotatePair(v, p, cs, head_size, interleaved, &a, &b);
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
  const int64_t pos = (a.pos0_at ? *a.pos0_at : a.pos0) + y, n = pos + 1, first = ew::FirstAttended(pos, a.window);
  const int64_t kv_off = static_cast<int64_t>(h / (a.n_heads / a.n_kv_heads)) * hs;
  const float* qrow = a.q + y * a.row_stride + static_cast<int64_t>(h) * hs;
  for (int i = threadIdx.x; i < hs; i += blockDim.x) {
    q[i] = qrow[i];
    acc[i] = 0.0f;
  }
  __syncthreads();
  const float root = ew::ScoreDivisor(a.scale_dim, hs);
  ew::OnlineSoftmax st;
  for (int64_t t0 = first; t0 < n; t0 += tile) {
    const int len = static_cast<int>(min(static_cast<int64_t>(tile), n - t0));
    float local_max = -INFINITY;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
      const float* k = a.key_cache + (t0 + j) * a.pos_stride + kv_off;
      float dot = 0.0f;
      for (int i = 0; i < hs; i++) dot += q[i] * k[i];
      scores[j] = ew::AttentionScore(dot, root, a.softcap);
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

// ---- Decode attention split over the context (flash-decoding). Block
// (head, chunk) scores the chunk's kDecodeChunk positions a warp per position,
// its lanes over the head (coalesced), takes the chunk's softmax partial (max,
// sum of weights, weighted values) and writes it to scratch; the last block of
// a head to finish combines the partials in chunk order. Every sum has a fixed
// order, so the bits depend on the inputs only: not on which block finishes
// last, and not on whether the position came as pos0 or through pos0_at.

// VEC consecutive floats at p: one 8- or 16-byte load when `vec` (p aligned),
// else VEC scalar loads of the same values, so no bit depends on alignment.
template <int VEC>
__device__ __forceinline__ void LoadFloats(const float* p, bool vec, float* v) {
  if constexpr (VEC == 4) {
    if (vec) {
      const float4 t = *reinterpret_cast<const float4*>(p);
      v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
      return;
    }
  } else if constexpr (VEC == 2) {
    if (vec) {
      const float2 t = *reinterpret_cast<const float2*>(p);
      v[0] = t.x, v[1] = t.y;
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < VEC; i++) v[i] = p[i];
}

// A lane's share of one head-wide row: values (r * 32 + lane) * VEC + i for
// r < NV, i < VEC (one r is a warp's consecutive run: a coalesced load);
// zero past head_size (VEC == 1 only: the other shapes fill the head exactly).
template <int VEC, int NV>
__device__ __forceinline__ void LoadLane(const float* row, int lane, int hs, bool vec, float* v) {
#pragma unroll
  for (int r = 0; r < NV; r++) {
    const int e = ew::LaneValue(r, lane, 0, VEC);
    if (e < hs) {
      LoadFloats<VEC>(row + e, vec, v + r * VEC);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; i++) v[r * VEC + i] = 0.0f;
    }
  }
}

// The chunk's scores (ew::AttentionScore: q.k / sqrt(hs or scale_dim),
// soft-capped) into scores[0, len): a warp per position, its lanes over the
// head, summed across the warp.
template <int VEC, int NV>
__device__ void ChunkScores(const AttentionDeviceArgs& a, const float* q, const float* keys, int len, bool vec,
                            float* scores) {
  constexpr int kN = VEC * NV, kWarps = kDecodeAttentionThreads / 32;
  const int hs = a.head_size, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float root = ew::ScoreDivisor(a.scale_dim, hs);
#pragma unroll 4
  for (int j = warp; j < len; j += kWarps) {
    float k[kN];
    LoadLane<VEC, NV>(keys + j * a.pos_stride, lane, hs, vec, k);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kN; i++) dot += q[i] * k[i];
    dot = WarpSum(dot);
    if (lane == 0) scores[j] = ew::AttentionScore(dot, root, a.softcap);
  }
}

// Head value threadIdx.x (threads < hs; 0 for the others) of the chunk's
// weighted values: each warp sums its positions, then the warps' sums meet
// in wacc and are added in warp order.
template <int VEC, int NV>
__device__ float ChunkValues(const AttentionDeviceArgs& a, const float* values, const float* weights, int len, bool vec,
                             float* wacc) {
  constexpr int kN = VEC * NV, kWarps = kDecodeAttentionThreads / 32;
  const int hs = a.head_size, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[kN];
#pragma unroll
  for (int i = 0; i < kN; i++) acc[i] = 0.0f;
#pragma unroll 4
  for (int j = warp; j < len; j += kWarps) {
    const float w = weights[j];
    float v[kN];
    LoadLane<VEC, NV>(values + j * a.pos_stride, lane, hs, vec, v);
#pragma unroll
    for (int i = 0; i < kN; i++) acc[i] += w * v[i];
  }
#pragma unroll
  for (int r = 0; r < NV; r++)
#pragma unroll
    for (int i = 0; i < VEC; i++) {
      const int e = ew::LaneValue(r, lane, i, VEC);
      if (e < hs) wacc[warp * hs + e] = acc[r * VEC + i];
    }
  __syncthreads();
  float o = 0.0f;
  if (static_cast<int>(threadIdx.x) < hs)
    for (int w = 0; w < kWarps; w++) o += wacc[w * hs + threadIdx.x];
  return o;
}

// The chunk's partial: its max score *m, the weights e^(score - m), their sum
// *sum (every thread), and head value threadIdx.x of the weighted values.
// Shared memory: a chunk of scores, the warps' sums, a float per warp.
template <int VEC, int NV>
__device__ float ChunkPartial(const AttentionDeviceArgs& a, const float* q, const float* keys, const float* values,
                              int len, bool vec, float* smem, float* m, float* sum) {
  constexpr int kWarps = kDecodeAttentionThreads / 32;
  float* scores = smem;
  float* wacc = scores + kDecodeChunk;
  float* red = wacc + kWarps * a.head_size;
  ChunkScores<VEC, NV>(a, q, keys, len, vec, scores);
  __syncthreads();
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < len; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  *m = BlockReduce<true>(local_max, red);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    scores[j] = expf(ew::Sub(scores[j], *m));
    local_sum += scores[j];
  }
  *sum = BlockReduce<false>(local_sum, red);  // its leading __syncthreads publishes the weights
  return ChunkValues<VEC, NV>(a, values, scores, len, vec, wacc);
}

// Reads the other blocks' partials from L2, where their fenced stores are,
// never from a stale L1 line (L1 is not coherent across SMs).
struct L2Load {
  __device__ float operator()(const float* p) const { return __ldcg(p); }
};

// Grid (n_heads, chunks of the capacity): see PlanDecodeAttention. A head's
// counter counts its finished chunks; the block that brings it to `chunks`
// is the last, combines, and puts the counter back to zero for the next launch
// (the next launch on the stream, or the graph's next replay, starts after).
template <int VEC, int NV>
__global__ void __launch_bounds__(kDecodeAttentionThreads)
    DecodeAttentionKernel(AttentionDeviceArgs a, DecodeAttentionScratch s, bool vec) {
  GridDependents();  // the output projection after it may start its weights' prefetch
  extern __shared__ float smem[];
  __shared__ int last;
  const int hs = a.head_size, h = blockIdx.x, z = blockIdx.z, tid = threadIdx.x;
  const int64_t pos = a.row_pos ? a.row_pos[z] : (a.pos0_at ? *a.pos0_at : a.pos0);
  // The attended positions: first .. pos (a window's, or all of them).
  const int64_t first = ew::FirstAttended(pos, a.window), n = pos + 1 - first;
  const int64_t chunks = (n + kDecodeChunk - 1) / kDecodeChunk;
  const int64_t head = map::RowHead(z, gridDim.x, h);  // this row's head: its counter and partials
  const int64_t cache = a.row_slot ? a.row_slot[z] * a.slot_stride : 0;
  float* out = a.out + z * a.row_stride + static_cast<int64_t>(h) * hs;
  if (chunks > static_cast<int64_t>(gridDim.y)) {
    // A position past the capacity launched for (cannot happen: the cache
    // holds seq_len positions): NaN rather than a wrong answer.
    if (blockIdx.y == 0)
      for (int i = tid; i < hs; i += blockDim.x) out[i] = __int_as_float(0x7fffffff);
    return;
  }
  if (blockIdx.y >= chunks) return;  // a chunk past the position
  const int64_t t0 = first + static_cast<int64_t>(blockIdx.y) * kDecodeChunk;
  const int len = static_cast<int>(min(static_cast<int64_t>(kDecodeChunk), pos + 1 - t0));
  const int64_t kv_off = cache + static_cast<int64_t>(h / (a.n_heads / a.n_kv_heads)) * hs;
  float q[VEC * NV];
  LoadLane<VEC, NV>(a.q + z * a.row_stride + static_cast<int64_t>(h) * hs, tid & 31, hs, vec, q);
  float m = 0.0f, sum = 0.0f;
  const float o = ChunkPartial<VEC, NV>(a, q, a.key_cache + t0 * a.pos_stride + kv_off,
                                        a.value_cache + t0 * a.pos_stride + kv_off, len, vec, smem, &m, &sum);
  if (chunks == 1) {  // the whole context in this block: no partial to combine
    if (tid < hs) out[tid] = o / sum;
    return;
  }
  float* base = s.partials + map::PartialsOf(head, gridDim.y, hs);
  float* part = base + static_cast<int64_t>(blockIdx.y) * (hs + 2);
  if (tid < hs) part[2 + tid] = o;
  if (tid == 0) part[0] = m, part[1] = sum;
  __threadfence();  // each thread's partial is visible device-wide before the block is counted
  __syncthreads();
  if (tid == 0) {
    last = atomicAdd(&s.counters[head], 1u) == static_cast<unsigned>(chunks - 1);
    __threadfence();  // the other blocks' partials are read after their count was seen
  }
  __syncthreads();
  if (!last) return;
  if (tid == 0)
    atomicExch(&s.counters[head], 0u);  // every other chunk of the head has counted: zero for the next launch
  if (tid < hs) out[tid] = ew::CombineChunks(base, chunks, hs, tid, L2Load());
}

// q8_0 in the device layout (q8_layout.h) to bf16, 8 weights a thread:
// weight g is scale * q[g] rounded once in f32, as q8::Weight computes it,
// then rounded to nearest even.
__device__ __forceinline__ uint32_t PackBF16(float lo, float hi) {
  return static_cast<uint32_t>(ew::F32ToBF16(lo)) | (static_cast<uint32_t>(ew::F32ToBF16(hi)) << 16);
}
__device__ __forceinline__ uint32_t Q8PairBF16(float scale, int q4, int k) {
  const float a = ew::Mul(scale, static_cast<float>(static_cast<signed char>((q4 >> (8 * k)) & 0xff)));
  const float b = ew::Mul(scale, static_cast<float>(static_cast<signed char>((q4 >> (8 * k + 8)) & 0xff)));
  return PackBF16(a, b);
}
__global__ void Q8_0ToBF16Kernel(uint4* out, const unsigned char* w, int64_t chunks) {
  const float* scales = q8::Scales(w, chunks * 8);
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Chunk c is weights 8c .. 8c+7, of block c / 4.
    const float scale = scales[c >> 2];
    const int2 q = reinterpret_cast<const int2*>(q8::Quants(w))[c];
    const int lo = q.x, hi = q.y;
    out[c] = make_uint4(Q8PairBF16(scale, lo, 0), Q8PairBF16(scale, lo, 2), Q8PairBF16(scale, hi, 0),
                        Q8PairBF16(scale, hi, 2));
  }
}

// Thread h (grid-stride): query head h's six pointers (LaunchAttentionPointers).
__global__ void AttentionPointersKernel(AttentionBlockPointers p, int heads, int group, int head_size, int64_t tn,
                                        void** arrays) {
  for (int h = blockIdx.x * blockDim.x + threadIdx.x; h < heads; h += gridDim.x * blockDim.x) {
    const ew::AttentionHeadOffsets at = ew::AttentionHeadAt(h, group, head_size, tn);
    arrays[h] = const_cast<float*>(p.keys + at.kv);
    arrays[heads + h] = const_cast<float*>(p.q + at.q);
    arrays[2 * heads + h] = p.scores + at.scores;
    arrays[3 * heads + h] = const_cast<float*>(p.values + at.kv);
    arrays[4 * heads + h] = p.scores + at.scores;
    arrays[5 * heads + h] = p.out + at.q;
  }
}

// Block (t, h): row t of head h. Each thread keeps its own positions across
// the three passes, so no pass needs a barrier beyond the reductions'.
// Positions first .. len - 1 are attended (a window's, or 0 on).
__global__ void CausalSoftmaxKernel(float* scores, int64_t n, int T, int64_t pos0, int window, float softcap) {
  extern __shared__ float red[];
  const int t = blockIdx.x, h = blockIdx.y;
  float* row = scores + (static_cast<int64_t>(h) * T + t) * n;
  const int64_t len = pos0 + t + 1, first = ew::FirstAttended(pos0 + t, window);
  float mx = -INFINITY;
  for (int64_t j = first + threadIdx.x; j < len; j += blockDim.x) {
    if (softcap > 0.0f) row[j] = ew::SoftCap(row[j], softcap);
    mx = fmaxf(mx, row[j]);
  }
  mx = BlockReduce<true>(mx, red);
  float sum = 0.0f;
  for (int64_t j = first + threadIdx.x; j < len; j += blockDim.x) {
    row[j] = expf(ew::Sub(row[j], mx));
    sum += row[j];
  }
  sum = BlockReduce<false>(sum, red);
  for (int64_t j = first + threadIdx.x; j < len; j += blockDim.x) row[j] /= sum;
  for (int64_t j = threadIdx.x; j < first; j += blockDim.x) row[j] = 0.0f;
  for (int64_t j = len + threadIdx.x; j < n; j += blockDim.x) row[j] = 0.0f;
}

__global__ void SwiGLUKernel(float* hb, const float* hb2, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    hb[i] = ew::SwiGLU(hb[i], hb2[i]);
}

__global__ void GeGLUKernel(float* hb, const float* hb2, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    hb[i] = ew::GeGLU(hb[i], hb2[i]);
}

__global__ void MoeTopKKernel(const float* logits, int n_experts, int k, int* chosen, float* weights) {
  if (threadIdx.x != 0) return;
  const size_t row = blockIdx.x;
  ew::MoeTopK(logits + row * n_experts, n_experts, k, chosen + row * k, weights + row * k);
}

// Block r: row r of x (n values) into out[r].
__global__ void ArgmaxKernel(const float* x, int64_t n, int* out) {
  extern __shared__ float smem[];
  x += blockIdx.x * n;
  out += blockIdx.x;
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
    case DType::kBlock:  // never launched: a block-quantized model is refused (runs_block_weights)
      break;
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
    case DType::kBlock:  // never launched: a block-quantized model is refused (runs_block_weights)
      break;
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

namespace {
template <int VEC, int NV>
Status LaunchDecodeAttentionAs(const LaunchPlan& plan, const AttentionDeviceArgs& a, const DecodeAttentionScratch& s,
                               cudaStream_t stream, const std::string& ctx) {
  // Vector loads where q and both caches are aligned to VEC floats at every position.
  const uintptr_t bytes = sizeof(float) * VEC;
  const bool vec = VEC > 1 && reinterpret_cast<uintptr_t>(a.q) % bytes == 0 &&
                   reinterpret_cast<uintptr_t>(a.key_cache) % bytes == 0 &&
                   reinterpret_cast<uintptr_t>(a.value_cache) % bytes == 0 && a.pos_stride % VEC == 0 &&
                   a.row_stride % VEC == 0 && a.slot_stride % VEC == 0;
  DecodeAttentionKernel<VEC, NV><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(a, s, vec);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}
}  // namespace

Status LaunchDecodeAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, const DecodeAttentionScratch& s,
                             cudaStream_t stream, const std::string& ctx) {
  if (a.n_queries != 1 || a.head_size < 1 || a.head_size > kDecodeMaxHeadSize)
    return Status::Error("cuda: " + ctx + ": kernel " + plan.kernel +
                         " takes one query and head_size <= " + std::to_string(kDecodeMaxHeadSize) + ", not " +
                         std::to_string(a.n_queries) + " and " + std::to_string(a.head_size));
  // One instance per lane shape (vector loads for heads of 64, 128 and 256).
  const LaneShape shape = DecodeAttentionLaneShape(a.head_size);
  if (shape.vec == 2 && shape.nv == 1) return LaunchDecodeAttentionAs<2, 1>(plan, a, s, stream, ctx);
  if (shape.vec == 4 && shape.nv == 1) return LaunchDecodeAttentionAs<4, 1>(plan, a, s, stream, ctx);
  if (shape.vec == 4 && shape.nv == 2) return LaunchDecodeAttentionAs<4, 2>(plan, a, s, stream, ctx);
  return LaunchDecodeAttentionAs<1, kDecodeMaxHeadSize / 32>(plan, a, s, stream, ctx);
}

Status LaunchQ8_0ToBF16(const LaunchPlan& plan, uint16_t* out, const void* w, int64_t n, cudaStream_t stream,
                        const std::string& ctx) {
  if (n % 8 != 0)
    return Status::Error("cuda: " + ctx + ": q8_0 to bf16 of " + std::to_string(n) + " weights (not a multiple of 8)");
  Q8_0ToBF16Kernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(reinterpret_cast<uint4*>(out),
                                                                           static_cast<const unsigned char*>(w), n / 8);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchCausalSoftmax(const LaunchPlan& plan, float* scores, int64_t n, int T, int64_t pos0, int window,
                           float softcap, cudaStream_t stream, const std::string& ctx) {
  CausalSoftmaxKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(scores, n, T, pos0, window, softcap);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchAttentionPointers(const LaunchPlan& plan, const AttentionBlockPointers& p, int heads, int group,
                               int head_size, int64_t tn, void** arrays, cudaStream_t stream, const std::string& ctx) {
  if (heads < 1 || group < 1 || heads % group != 0)
    return Status::Error("cuda: " + ctx + ": attention pointers of " + std::to_string(heads) + " heads in groups of " +
                         std::to_string(group));
  AttentionPointersKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(p, heads, group, head_size, tn,
                                                                                  arrays);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchSwiGLU(const LaunchPlan& plan, float* hb, const float* hb2, int64_t n, cudaStream_t stream,
                    const std::string& ctx) {
  SwiGLUKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(hb, hb2, n);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

Status LaunchGeGLU(const LaunchPlan& plan, float* hb, const float* hb2, int64_t n, cudaStream_t stream,
                   const std::string& ctx) {
  GeGLUKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(hb, hb2, n);
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
