// The one way a CUDA runtime call is checked, in the CUDA backend
// (kernels/cuda/check.h adds cuBLAS and kernel launches) and in the NCCL
// collective (parallel/nccl_check.h adds NCCL). tests/cuda_checks_test.cc
// fails if a call site in either lacks its check. Header-only, and included
// only by code compiled where the CUDA toolkit is found: the rest of base/
// knows nothing of CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "base/status.h"

namespace verity::cuda_check {

// "cuda: <ctx>: <expr> failed: <name> (<description>) at <file>:<line>".
inline Status CudaCallError(const char* expr, cudaError_t e, const std::string& ctx, const char* file, int line) {
  return Status::Error("cuda: " + ctx + ": " + expr + " failed: " + cudaGetErrorName(e) + " (" +
                       cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace verity::cuda_check

// Returns the error from the enclosing function (Status or Result<T>) when a
// CUDA runtime call fails; `ctx` says where (layer, operation).
#define VERITY_CUDA_CALL(expr, ctx)                                                                  \
  do {                                                                                               \
    const cudaError_t verity_cuda_e = (expr);                                                        \
    if (verity_cuda_e != cudaSuccess)                                                                \
      return ::verity::cuda_check::CudaCallError(#expr, verity_cuda_e, (ctx), __FILE__, __LINE__);   \
  } while (0)

// The same for a call whose failure can only be reported (destructors): prints it to stderr.
#define VERITY_CUDA_CALL_LOG(expr, ctx)                                                                       \
  do {                                                                                                        \
    const cudaError_t verity_cuda_e = (expr);                                                                 \
    if (verity_cuda_e != cudaSuccess)                                                                         \
      std::fprintf(stderr, "verity: %s\n",                                                                    \
                   ::verity::cuda_check::CudaCallError(#expr, verity_cuda_e, (ctx), __FILE__, __LINE__)      \
                       .message()                                                                             \
                       .c_str());                                                                             \
  } while (0)
