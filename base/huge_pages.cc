#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace verity {

void* AllocateStreamed(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = nullptr;
  // posix_memalign: unlike aligned_alloc, the size need not be a multiple of the alignment.
  if (posix_memalign(&p, bytes >= kHugePageBytes ? kHugePageBytes : 64, bytes) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (bytes >= kHugePageBytes) madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace verity
