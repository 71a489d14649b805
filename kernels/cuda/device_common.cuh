// Device helpers the kernel files share: warp reductions and a plan's launch
// dimensions. Warp-level code assumes a warp of 32 threads (every NVIDIA GPU;
// DeviceLimits::warp_size is checked at backend creation). Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullMask, v, o);
  return v;  // complete in lane 0
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(kFullMask, v, o));
  return v;
}

// The sum of squares of x[0 .. size) as a block of `threads` threads (a
// multiple of 32, at most 1024) sums it: thread v takes x[v], x[v + threads],
// ... (one FMA each), each warp of them adds its 32 sums (WarpSum), and the
// warps' sums are added in warp order. Run by a block of any number of
// warps, each taking the virtual warps w, w + warps, ...: the same sums in
// the same order, so RmsnormKernel (one thread a virtual thread) and a rows
// kernel that normalizes its input in its prologue (8 warps) get the same
// bits. `red`: threads / 32 floats of shared memory. Every thread of the
// block must call it; each gets the sum.
__device__ __forceinline__ float RowSumOfSquares(const float* x, int size, int threads, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, groups = threads >> 5;
  __syncthreads();  // red may still be read by a previous reduction
  for (int g = warp; g < groups; g += warps) {
    float ss = 0.0f;
    for (int j = g * 32 + lane; j < size; j += threads) ss = fmaf(x[j], x[j], ss);
    ss = WarpSum(ss);
    if (lane == 0) red[g] = ss;
  }
  __syncthreads();
  float r = red[0];
  for (int g = 1; g < groups; g++) r += red[g];
  return r;
}

// Rotates pair `p` of a row of heads (head_size values each) by the cosine
// and sine of its table row cs; *a and *b are the two values it turned.
__device__ __forceinline__ void RotatePair(float* row, int p, const float* cs, int head_size, bool interleaved, int* a,
                                           int* b) {
  const int i = p % (head_size / 2);  // the pair within its head: its angle
  map::RopePairOf(p, head_size, interleaved, a, b);
  ew::RopePair(&row[*a], &row[*b], cs[2 * i], cs[2 * i + 1]);
}

// Programmatic dependent launch (sm_90; docs/cuda.md, "Dependent launches").
// A kernel launched with LaunchPlan::dependent_launch may start while the
// kernel before it on the stream still runs: it must read nothing that kernel
// writes, and write nothing, before GridDependencyWait, which returns once
// that kernel has completed and its writes are visible. GridDependents lets
// the next such kernel be scheduled once every block of this one has started
// (it promises nothing about this kernel's writes). Both are no-ops for a
// kernel launched without the attribute, and compile to nothing below sm_90.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void GridDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Asks L2 for the line holding p (no register, no wait): a dependent
// kernel's weights, fetched before GridDependencyWait.
__device__ __forceinline__ void PrefetchL2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
// The 128-byte lines of [p, p + bytes) asked of L2, a line a lane of the warp
// (`lane` its index): from p's line, so nothing before it and past the
// range's last line is asked for.
__device__ __forceinline__ void PrefetchLinesL2(const void* p, int64_t bytes, int lane) {
  if (bytes <= 0) return;
  const auto* b = static_cast<const unsigned char*>(p);
  const int64_t skew = reinterpret_cast<uintptr_t>(p) & 127;
  for (int64_t o = 128 * lane - skew; o < bytes; o += 128 * 32) PrefetchL2(b + (o < 0 ? 0 : o));
}
// [p, p + bytes) asked of L2 by the warp: one bulk prefetch from lane 0 on
// sm_90 (p 16-byte aligned, bytes a multiple of 16, as the rows kernels'
// rows and RowsPrefetchBytes give), lines a lane below it.
__device__ __forceinline__ void PrefetchRangeL2(const void* p, int64_t bytes, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (lane == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(__cvta_generic_to_global(p)),
                 "r"(static_cast<uint32_t>(bytes)));
#else
  PrefetchLinesL2(p, bytes, lane);
#endif
}

inline dim3 Grid(const LaunchPlan& p) { return dim3(p.grid.x, p.grid.y, p.grid.z); }
inline dim3 Block(const LaunchPlan& p) { return dim3(p.block.x, p.block.y, p.block.z); }

}  // namespace verity::kernels::cuda
