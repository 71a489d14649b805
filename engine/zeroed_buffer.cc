#include "engine/zeroed_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace verity {

void* AlignedZeroed(size_t bytes) {
  void* p = AllocateStreamed(bytes);
  std::memset(p, 0, bytes);
  return p;
}

ZeroedFloats::ZeroedFloats(size_t n)
    : p_(static_cast<float*>(AlignedZeroed((std::max<size_t>(n, 1) * sizeof(float) + 63) / 64 * 64))), n_(n) {}

void ZeroedFloats::Free::operator()(float* p) const { std::free(p); }

}  // namespace verity
