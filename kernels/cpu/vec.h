// Internal to kernels/: which vector-kernel library the CPU backends call.
// simd.h (Highway, dispatched per CPU) once it is in the tree; until then the
// scalar stand-ins with the same signatures.
#pragma once

#include "kernels/cpu/scalar_fallback.h"

namespace verity::kernels {
namespace vec = fallback;
}  // namespace verity::kernels
