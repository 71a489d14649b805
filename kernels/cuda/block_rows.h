// Products with llama.cpp's Q4_K and Q6_K blocks on the device (issue 43),
// the Q4_K_M pair: the weights stay in the file's blocks (uploaded as they
// lie) and each is computed as kquant_layout.h gives it, bit-exact to the
// CPU's dequantization. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/launch_plan.h"

namespace verity::kernels::cuda {

// out[T x rows] = x[T x cols] W^T for W in blocks of ggml type `type` (Q4_K
// or Q6_K; another is an error naming it), cols a multiple of 256 (plan:
// PlanBlockRows). Row t is bit for bit what T = 1 gives for x_t, whatever T.
Status LaunchBlockRows(const LaunchPlan& plan, uint32_t type, float* out, const void* w, const float* x, int rows,
                       int cols, int T, cudaStream_t stream, const std::string& ctx);

// out[i] = bf16(weight i) of the rows x cols weights (out 16-byte aligned;
// plan: PlanElementwise(name, rows * cols / 8)), for a prefill GEMM.
Status LaunchBlockToBF16(const LaunchPlan& plan, uint32_t type, uint16_t* out, const void* w, int rows, int cols,
                         cudaStream_t stream, const std::string& ctx);

}  // namespace verity::kernels::cuda
