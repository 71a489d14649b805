// The fused forms of the 16-byte matrix-vector kernel (rows.cu): one launch
// for several matrices that read the same vectors (q, k and v), a projection
// whose store is the residual add (o, down), and the SwiGLU gate computed
// from a warp's gate and up rows. Every output gets the bits LaunchRows and
// the separate element-wise kernel give it, because one dot-product routine
// serves them all. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/launch_plan.h"

namespace verity::kernels::cuda {

inline constexpr int kMaxRowsTargets = 3;

// Matrices of one dtype and width, stacked: target i holds the launch's rows
// [begin[i], begin[i+1]) and writes out[i] row-major [T x its rows].
struct RowsTargets {
  int count = 0;
  int begin[kMaxRowsTargets + 1] = {};
  const void* w[kMaxRowsTargets] = {};
  float* out[kMaxRowsTargets] = {};
};

// What a warp does with its row's dot products: store them, add them to what
// out holds (a residual add), or (one target; w[1] the up matrix of the same
// shape) store silu(gate) * up.
enum class RowsEpilogue { kStore = 0, kAdd = 1, kSwiGLU = 2 };

// The launch over begin[count] rows (plan: PlanRows(dtype, begin[count], cols, T)).
// Every w 16-byte aligned (4-byte for q8_0), x 16-byte aligned, cols % 8 == 0
// (VectorizedRows).
Status LaunchRowsFused(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                       const float* x, int cols, int T, cudaStream_t stream, const std::string& ctx);

// A decode step's RMSNorm in its products' launch (LaunchRowsNormed): x is
// the residual row; each block normalizes it into shared memory with
// RmsnormKernel's arithmetic in its order (RowSumOfSquares over `threads`,
// PlanRmsnorm's block: ReductionThreads of cols; ew::RmsnormApply), and the
// first block also writes it to `out`, so the products and the state are
// bit for bit RmsnormRows' and the plain launch's.
struct RowsNorm {
  float* out = nullptr;
  const float* weight = nullptr;
  float eps = 0.0f;
  int threads = 0;
};
// One vector (T = 1), epilogue kStore or kSwiGLU; plan: PlanRowsNormed.
Status LaunchRowsNormed(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                        const RowsNorm& norm, const float* x, int cols, cudaStream_t stream, const std::string& ctx);

// The same products on tensor cores, for a batched step's rows (mma_rows.cu;
// plan: PlanRowsMma; opt-in: VERITY_CUDA_BATCH_MMA=1): bf16 or q8_0 weights
// (q8_layout.h), cols % 32 == 0, every w and x 16-byte aligned. Not LaunchRowsFused's bits: x
// enters the tensor cores as two bf16 values (hi + lo: 16 significant bits)
// and a row's sum is ordered otherwise. A vector's outputs are the same bits
// whatever vectors share the launch, and wherever it sits among them.
Status LaunchRowsMma(const LaunchPlan& plan, DType dtype, RowsEpilogue epilogue, const RowsTargets& targets,
                     const float* x, int cols, int T, cudaStream_t stream, const std::string& ctx);

}  // namespace verity::kernels::cuda
