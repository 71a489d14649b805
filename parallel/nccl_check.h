// The one way parallel/nccl.cc checks a NCCL call (CUDA runtime calls go
// through base/cuda_check.h); tests/cuda_checks_test.cc fails if a call site
// lacks its check. Compiled only into libverity_nccl.so.
#pragma once

#include <nccl.h>

#include <cstdio>
#include <string>

#include "base/cuda_check.h"  // VERITY_CHECKED_CALL_RETURN, VERITY_CHECKED_CALL_LOG
#include "base/status.h"

namespace verity::parallel::nccl {

// "nccl: <ctx>: <expr> failed: <result> (<NCCL's last error>) at <file>:<line>".
// NCCL's last error says what was wrong ("Duplicate GPU detected ..."), where
// the result alone says only "invalid usage".
inline Status NcclCallError(const char* expr, ncclResult_t r, const std::string& ctx, const char* file, int line) {
  const char* detail = ncclGetLastError(nullptr);
  return Status::Error("nccl: " + ctx + ": " + expr + " failed: " + ncclGetErrorString(r) +
                       (detail && *detail ? std::string(" (") + detail + ")" : std::string()) + " at " + file + ":" +
                       std::to_string(line));
}

}  // namespace verity::parallel::nccl

// Returns the error from the enclosing function (Status or Result<T>) when a
// NCCL call fails; `ctx` says where. The _LOG form prints it (destructors).
#define VERITY_NCCL_CALL(expr, ctx) \
  VERITY_CHECKED_CALL_RETURN(ncclResult_t, ncclSuccess, ::verity::parallel::nccl::NcclCallError, expr, ctx)
#define VERITY_NCCL_CALL_LOG(expr, ctx) \
  VERITY_CHECKED_CALL_LOG(ncclResult_t, ncclSuccess, ::verity::parallel::nccl::NcclCallError, expr, ctx)
