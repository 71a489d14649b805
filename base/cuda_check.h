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

// Clears the thread's last CUDA error (see CudaCallError); the one sanctioned
// unchecked call, for an error already reported as a Status.
#define VERITY_CUDA_CONSUME_LAST_ERROR() ((void)cudaGetLastError())

namespace verity::cuda_check {

// "cuda: <ctx>: <expr> failed: <name> (<description>) at <file>:<line>".
// A failed runtime call also leaves its error as the thread's last error,
// which the next launch check (cudaGetLastError) would report as its own: a
// refused memset on one backend then failed an unrelated launch elsewhere in
// the process (issue 42). The error is in the Status, so it is consumed here.
// A sticky error (a kernel fault) stays: it has broken the whole context.
inline Status CudaCallError(const char* expr, cudaError_t e, const std::string& ctx, const char* file, int line) {
  VERITY_CUDA_CONSUME_LAST_ERROR();
  return Status::Error("cuda: " + ctx + ": " + expr + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                       ") at " + file + ":" + std::to_string(line));
}

}  // namespace verity::cuda_check

// The two ways a checked call reports failure, for every library's check
// macros (CUDA here, cuBLAS in kernels/cuda/check.h, NCCL in
// parallel/nccl_check.h): `type` is the call's result type, `ok` its success
// value, `error_fn(expr_text, result, ctx, file, line)` makes the Status.
// Returns that Status from the enclosing function (Status or Result<T>):
#define VERITY_CHECKED_CALL_RETURN(type, ok, error_fn, expr, ctx)                                \
  do {                                                                                           \
    const type verity_call_r = (expr);                                                           \
    if (verity_call_r != (ok)) return error_fn(#expr, verity_call_r, (ctx), __FILE__, __LINE__); \
  } while (0)
// Prints it to stderr (for destructors, which cannot return it):
#define VERITY_CHECKED_CALL_LOG(type, ok, error_fn, expr, ctx)                                   \
  do {                                                                                           \
    const type verity_call_r = (expr);                                                           \
    if (verity_call_r != (ok))                                                                   \
      std::fprintf(stderr, "verity: %s\n",                                                       \
                   error_fn(#expr, verity_call_r, (ctx), __FILE__, __LINE__).message().c_str()); \
  } while (0)

// Returns the error from the enclosing function (Status or Result<T>) when a
// CUDA runtime call fails; `ctx` says where (layer, operation).
#define VERITY_CUDA_CALL(expr, ctx) \
  VERITY_CHECKED_CALL_RETURN(cudaError_t, cudaSuccess, ::verity::cuda_check::CudaCallError, expr, ctx)
// The same for a call whose failure can only be reported (destructors).
#define VERITY_CUDA_CALL_LOG(expr, ctx) \
  VERITY_CHECKED_CALL_LOG(cudaError_t, cudaSuccess, ::verity::cuda_check::CudaCallError, expr, ctx)
