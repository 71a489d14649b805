// The one way parallel/nccl.cc checks a NCCL call (CUDA runtime calls go
// through base/cuda_check.h); tests/cuda_checks_test.cc fails if a call site
// lacks its check. Compiled only into libverity_nccl.so.
#pragma once

#include <nccl.h>

#include <cstdio>
#include <string>

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
// NCCL call fails; `ctx` says where.
#define VERITY_NCCL_CALL(expr, ctx)                                                                       \
  do {                                                                                                    \
    const ncclResult_t verity_nccl_r = (expr);                                                            \
    if (verity_nccl_r != ncclSuccess)                                                                     \
      return ::verity::parallel::nccl::NcclCallError(#expr, verity_nccl_r, (ctx), __FILE__, __LINE__);    \
  } while (0)

// The same for a call whose failure can only be reported (destructors): prints it to stderr.
#define VERITY_NCCL_CALL_LOG(expr, ctx)                                                                            \
  do {                                                                                                             \
    const ncclResult_t verity_nccl_r = (expr);                                                                     \
    if (verity_nccl_r != ncclSuccess)                                                                              \
      std::fprintf(stderr, "verity: %s\n",                                                                         \
                   ::verity::parallel::nccl::NcclCallError(#expr, verity_nccl_r, (ctx), __FILE__, __LINE__)       \
                       .message()                                                                                  \
                       .c_str());                                                                                  \
  } while (0)
