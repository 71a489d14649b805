// A prefill block's attention as flash-style tiles on the tensor cores
// (LaunchFlashAttention, cuda_kernels.h; opt-in: VERITY_CUDA_FLASH_PREFILL=1):
// each block takes 64 query rows of one head and walks the positions they
// attend to in tiles of 32, keeping every row's scores in registers (S = Q K^T,
// masked, exponentiated against a running max) and adding P V into its
// output, so no score is written to memory and nothing grows with the
// context but the loop. mma.sync m16n8k8 with TF32 inputs (q, k, v and the
// weights rounded to 10 significand bits, ties away: flash::ToTf32) and f32
// accumulation; the max, the exponentials and the sums in f32 on the CUDA
// cores. Which lane holds what: flash_map.h, walked and simulated on the CPU
// by tests/cuda_flash_test.cc.
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/flash_map.h"

namespace verity::kernels::cuda {
namespace {

// D = A B + D for one m16n8k8 tile, TF32 in (the registers hold TF32 bit
// patterns), f32 accumulate. Compiled for sm_80 and later only; a build for
// an older device traps rather than return zeros.
__device__ __forceinline__ void MmaTf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

__device__ __forceinline__ uint32_t Tf32Bits(float x) { return __float_as_uint(flash::ToTf32(x)); }

// The max and the sum over the 4 lanes of a quad (one row's 32 positions):
// every lane of the quad gets the same bits.
__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float QuadSum(float v) {
  v = ew::Add(v, __shfl_xor_sync(kFullMask, v, 1));
  return ew::Add(v, __shfl_xor_sync(kFullMask, v, 2));
}

// Block (x, h): query rows 64x .. 64x+63 of head h (warp w: rows 16w ..
// 16w+15 of them), over positions FirstAttended(pos0 + 64x) .. pos0 + its
// last row. A row past the block's last loads the last row's q and stores
// nothing.
template <int D>
__global__ void __launch_bounds__(flash::kWarps * 32) FlashAttentionKernel(AttentionDeviceArgs a) {
  constexpr int KS = D / 8;  // k steps of S = Q K^T; n tiles of O = P V
  constexpr int SS = flash::SharedStride(D);
  extern __shared__ float tile[];  // the tile's keys, then its values: kKeyTile x SS each, TF32
  float* ks = tile;
  float* vs = tile + flash::kKeyTile * SS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, h = blockIdx.y;
  const int64_t kv_col = static_cast<int64_t>(h / (a.n_heads / a.n_kv_heads)) * D, q_col = int64_t{h} * D;
  const int64_t row0 = int64_t{blockIdx.x} * flash::kBlockRows, wrow0 = row0 + warp * flash::kWarpRows;
  const int64_t last = min(row0 + flash::kBlockRows, int64_t{a.n_queries}) - 1;
  const float divisor = ew::ScoreDivisor(a.scale_dim, D);
  uint32_t qa[KS][4];  // the warp's q rows as A, k step s: dimensions 8s .. 8s+7
#pragma unroll
  for (int s = 0; s < KS; s++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int64_t row = min(wrow0 + flash::ARow(lane, r), int64_t{a.n_queries} - 1);
      qa[s][r] = Tf32Bits(a.q[row * a.row_stride + q_col + 8 * s + flash::ACol(lane, r)]);
    }
  float o[KS][4] = {};                    // the output's accumulators, n tile i: dimensions 8i .. 8i+7
  float m[2] = {-INFINITY, -INFINITY};    // rows g and g + 8: the running max
  float l[2] = {0.0f, 0.0f};              // and the running sum of weights
  const int64_t end = a.pos0 + last + 1;  // the block's positions: < end
  const int64_t wlast = min(wrow0 + flash::kWarpRows - 1, last);
  const int64_t wfirst = ew::FirstAttended(a.pos0 + wrow0, a.window), wend = a.pos0 + wlast + 1;
  for (int64_t p0 = ew::FirstAttended(a.pos0 + row0, a.window); p0 < end; p0 += flash::kKeyTile) {
    __syncthreads();  // every warp is done with the previous tile
    for (int i = threadIdx.x; i < flash::kKeyTile * D / 4; i += blockDim.x) {
      const int p = i / (D / 4), c = (i % (D / 4)) * 4;
      float4 k = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v = k;  // zero past the block's last position
      if (p0 + p < end) {
        const int64_t at = (p0 + p) * a.pos_stride + kv_col + c;
        k = *reinterpret_cast<const float4*>(a.key_cache + at);
        v = *reinterpret_cast<const float4*>(a.value_cache + at);
      }
      // SS and c are multiples of 4: 16-byte stores.
      *reinterpret_cast<float4*>(ks + p * SS + c) =
          make_float4(flash::ToTf32(k.x), flash::ToTf32(k.y), flash::ToTf32(k.z), flash::ToTf32(k.w));
      *reinterpret_cast<float4*>(vs + p * SS + c) =
          make_float4(flash::ToTf32(v.x), flash::ToTf32(v.y), flash::ToTf32(v.z), flash::ToTf32(v.w));
    }
    __syncthreads();
    // A tile every row of this warp masks whole changes nothing of it (the
    // rescale would be 1, every weight 0): skipped, as is every tile of a
    // warp whose rows are all past the block's last (it stores nothing).
    if (wrow0 > last || p0 >= wend || p0 + flash::kKeyTile <= wfirst) continue;
    float s[flash::kKeyTiles][4] = {};
#pragma unroll
    for (int st = 0; st < KS; st++)
#pragma unroll
      for (int j = 0; j < flash::kKeyTiles; j++) {
        const float* kr = ks + (8 * j + flash::BCol(lane)) * SS + 8 * st;
        MmaTf32(s[j], qa[st], __float_as_uint(kr[flash::BRow(lane, 0)]), __float_as_uint(kr[flash::BRow(lane, 1)]));
      }
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < flash::kKeyTiles; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int64_t row = wrow0 + flash::CRow(lane, i), pos = p0 + 8 * j + flash::CCol(lane, i);
        s[j][i] = flash::MaskedScore(s[j][i], divisor, a.softcap, pos, a.pos0 + row, a.window);
        tmax[i >> 1] = fmaxf(tmax[i >> 1], s[j][i]);
      }
    float scale[2], base[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      const float mn = fmaxf(m[hh], QuadMax(tmax[hh]));
      scale[hh] = flash::Rescale(m[hh], mn);
      base[hh] = flash::ExpBase(mn);
      m[hh] = mn;
    }
    float tsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < flash::kKeyTiles; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        s[j][i] = flash::Weight(s[j][i], base[i >> 1]);
        tsum[i >> 1] = ew::Add(tsum[i >> 1], s[j][i]);
      }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) l[hh] = ew::Add(ew::Mul(l[hh], scale[hh]), QuadSum(tsum[hh]));
#pragma unroll
    for (int i = 0; i < KS; i++)
#pragma unroll
      for (int c = 0; c < 4; c++) o[i][c] = ew::Mul(o[i][c], scale[c >> 1]);
#pragma unroll
    for (int j = 0; j < flash::kKeyTiles; j++) {
      uint32_t pa[4];
#pragma unroll
      for (int r = 0; r < 4; r++) pa[r] = Tf32Bits(s[j][flash::PFromC(r)]);
      const float* v0 = vs + (8 * j + flash::VPosition(lane, 0)) * SS + flash::BCol(lane);
      const float* v1 = vs + (8 * j + flash::VPosition(lane, 1)) * SS + flash::BCol(lane);
#pragma unroll
      for (int i = 0; i < KS; i++) MmaTf32(o[i], pa, __float_as_uint(v0[8 * i]), __float_as_uint(v1[8 * i]));
    }
  }
#pragma unroll
  for (int i = 0; i < KS; i++)
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int64_t row = wrow0 + flash::CRow(lane, c);
      if (row <= last) a.out[row * a.row_stride + q_col + 8 * i + flash::CCol(lane, c)] = o[i][c] / l[c >> 1];
    }
}

template <int D>
Status LaunchFlash(const LaunchPlan& plan, const AttentionDeviceArgs& a, cudaStream_t stream, const std::string& ctx) {
  FlashAttentionKernel<D><<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(a);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

}  // namespace

bool FlashAttentionTakes(const AttentionDeviceArgs& a) {
  const auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return flash::HeadSizeFits(a.head_size) && a.n_kv_heads > 0 && a.n_heads % a.n_kv_heads == 0 &&
         aligned(a.key_cache) && aligned(a.value_cache) && a.pos_stride % 4 == 0 && a.pos0_at == nullptr &&
         a.row_pos == nullptr;
}

Status LaunchFlashAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, cudaStream_t stream,
                            const std::string& ctx) {
  if (!FlashAttentionTakes(a))
    return Status::Error("cuda: " + ctx + ": kernel " + plan.kernel + " takes head sizes 64, 96 and 128, caches " +
                         "16-byte aligned at every position and a block's rows at pos0; not head_size " +
                         std::to_string(a.head_size) + ", pos_stride " + std::to_string(a.pos_stride));
  if (plan.grid.y != static_cast<uint32_t>(a.n_heads) ||
      plan.grid.x != static_cast<uint32_t>((a.n_queries + flash::kBlockRows - 1) / flash::kBlockRows) ||
      plan.block.x != flash::kWarps * 32u ||
      plan.shared_bytes != 2 * static_cast<size_t>(flash::kKeyTile) * flash::SharedStride(a.head_size) * sizeof(float))
    return Status::Error("cuda: " + ctx + ": kernel " + plan.kernel + ": the plan is not PlanFlashAttention's for " +
                         std::to_string(a.n_queries) + " rows of " + std::to_string(a.n_heads) + " heads of " +
                         std::to_string(a.head_size));
  switch (a.head_size) {
    case 64: return LaunchFlash<64>(plan, a, stream, ctx);
    case 96: return LaunchFlash<96>(plan, a, stream, ctx);
    case 128: return LaunchFlash<128>(plan, a, stream, ctx);
  }
  return Status::Error("cuda: " + ctx + ": kernel " + plan.kernel + ": no instance for head_size " +
                       std::to_string(a.head_size));
}

}  // namespace verity::kernels::cuda
