// What the two rows kernels (rows.cu: CUDA cores; mma_rows.cu: tensor
// cores) share: a target's entries of RowsTargets read by constant indices,
// and one launch of a kernel with a plan's dimensions, as a programmatic
// dependent launch where the plan says so. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/rows.h"

namespace verity::kernels::cuda {

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

// One launch of the kernel `k` with the plan's dimensions, as a programmatic
// dependent launch where the plan says so.
template <class... Params, class... Args>
Status LaunchRowsKernel(void (*k)(Params...), const LaunchPlan& plan, cudaStream_t stream, const std::string& name,
                        const std::string& ctx, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = Grid(plan);
  cfg.blockDim = Block(plan);
  cfg.dynamicSmemBytes = plan.shared_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = plan.dependent_launch ? 1 : 0;
  VERITY_CUDA_CALL(cudaLaunchKernelEx(&cfg, k, args...), ctx + ": launch of kernel " + name);
  return OkStatus();
}

}  // namespace verity::kernels::cuda
