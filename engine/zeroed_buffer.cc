#include "engine/zeroed_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace verity {

void* AlignedZeroed(size_t bytes) {
  void* p = nullptr;
  // posix_memalign: unlike aligned_alloc, the size need not be a multiple of the alignment.
  if (posix_memalign(&p, bytes >= kHugePageBytes ? kHugePageBytes : 64, bytes) != 0) throw std::bad_alloc();
  if (bytes >= kHugePageBytes) madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return p;
}

ZeroedFloats::ZeroedFloats(size_t n)
    : p_(static_cast<float*>(AlignedZeroed((std::max<size_t>(n, 1) * sizeof(float) + 63) / 64 * 64))), n_(n) {}

void ZeroedFloats::Free::operator()(float* p) const { std::free(p); }

}  // namespace verity
