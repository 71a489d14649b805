// The one way a CUDA or cuBLAS call or a kernel launch is checked in
// kernels/cuda/ (CUDA runtime calls through base/cuda_check.h;
// tests/cuda_checks_test.cc fails if any call site or `<<<` launch lacks its
// check). Each failure becomes a Status
// naming the call or kernel, the context (layer and operation), the error and
// the source line; the backend records the first one and poisons its outputs.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "base/cuda_check.h"  // VERITY_CUDA_CALL, VERITY_CUDA_CALL_LOG
#include "base/status.h"

namespace verity::kernels::cuda {

inline Status CublasCallError(const char* expr, cublasStatus_t e, const std::string& ctx, const char* file, int line) {
  VERITY_CUDA_CONSUME_LAST_ERROR();  // whatever runtime error cuBLAS left behind is this Status's (see CudaCallError)
  return Status::Error("cublas: " + ctx + ": " + expr + " failed: " + cublasGetStatusName(e) + " (" +
                       cublasGetStatusString(e) + ") at " + file + ":" + std::to_string(line));
}
inline Status LaunchError(const std::string& kernel, cudaError_t e, const std::string& ctx, const char* file,
                          int line) {
  return Status::Error("cuda: " + ctx + ": launch of kernel " + kernel + " failed: " + cudaGetErrorName(e) + " (" +
                       cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace verity::kernels::cuda

// Returns the error from the enclosing function when a cuBLAS call fails;
// the _LOG form prints it (destructors).
#define VERITY_CUBLAS_CALL(expr, ctx) \
  VERITY_CHECKED_CALL_RETURN(cublasStatus_t, CUBLAS_STATUS_SUCCESS, ::verity::kernels::cuda::CublasCallError, expr, ctx)
#define VERITY_CUBLAS_CALL_LOG(expr, ctx) \
  VERITY_CHECKED_CALL_LOG(cublasStatus_t, CUBLAS_STATUS_SUCCESS, ::verity::kernels::cuda::CublasCallError, expr, ctx)

// Immediately after every `kernel<<<...>>>(...)`: the launch's own error
// (bad configuration, no kernel image for this device), named by kernel and context.
#define VERITY_CUDA_LAUNCH_CHECK(kernel, ctx)                                                            \
  do {                                                                                                   \
    const cudaError_t verity_launch_e = cudaGetLastError();                                              \
    if (verity_launch_e != cudaSuccess)                                                                  \
      return ::verity::kernels::cuda::LaunchError((kernel), verity_launch_e, (ctx), __FILE__, __LINE__); \
  } while (0)
