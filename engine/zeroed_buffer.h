// Storage for what every token reads. The weights and the KV cache are
// streamed: zeroed, 2 MB aligned, with their whole 2 MB extents asked for as
// transparent huge pages when they span one, else 64-byte aligned (on 4 KB
// pages a stream costs a page walk and a restart of the hardware prefetchers
// every 4 KB). The activations are small and reread: AlignedVector keeps
// their rows on cache-line boundaries.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "base/huge_pages.h"  // AllocateStreamed, kHugePageBytes

namespace verity {

// `bytes` (a multiple of 64) of zeroed AllocateStreamed storage; free it with
// std::free. Throws std::bad_alloc when out of memory.
void* AlignedZeroed(size_t bytes);
// Zeroes [p, p + bytes): from 8 MB on, in 2 MB extents on the load's threads
// (base/host_parallel.h's LoadThreads), since zeroing fresh memory is what
// faults its pages in.
void ZeroOnLoadThreads(void* p, size_t bytes);

// std::vector storage that starts on a 64-byte boundary (operator new gives
// 16): a row whose width is a multiple of 16 floats then never has a SIMD load
// straddle two cache lines (the activations the kernels read per token).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: converting, as allocators must
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }
};
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

// n floats of AlignedZeroed storage.
class ZeroedFloats {
 public:
  ZeroedFloats() = default;
  explicit ZeroedFloats(size_t n);
  float* data() { return p_.get(); }
  const float* data() const { return p_.get(); }
  size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> p_;
  size_t n_ = 0;
};

}  // namespace verity
