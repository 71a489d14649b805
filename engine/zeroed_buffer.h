// Zeroed storage for what every token streams through (the weights, the KV
// cache): 2 MB aligned with its whole 2 MB extents asked for as transparent
// huge pages when it spans one, else 64-byte aligned. On 4 KB pages a stream
// costs a page walk and a restart of the hardware prefetchers every 4 KB.
#pragma once

#include <cstddef>
#include <memory>

namespace verity {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page

// `bytes` (a multiple of 64) of zeroed storage; free it with std::free. The
// tail past the last whole 2 MB extent keeps small pages, so nothing beyond
// the buffer is made resident. Throws std::bad_alloc when out of memory.
void* AlignedZeroed(size_t bytes);

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
