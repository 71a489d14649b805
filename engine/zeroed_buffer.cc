#include "engine/zeroed_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/host_parallel.h"

namespace verity {

// Zeroing is what faults a fresh buffer's pages in, each first cleared by
// the kernel: on one thread that was the largest part of writing a 7B synth
// (27 GB of f32) and a serial step of every converted load (a 7B's 7.5 GB of
// q8_0). A large buffer is zeroed on the load's threads, in whole 2 MB
// extents (a huge page is touched by one thread); a small one where it is.
void ZeroOnLoadThreads(void* p, size_t bytes) {
  unsigned char* at = static_cast<unsigned char*>(p);
  ParallelBytes(static_cast<int64_t>(bytes),
                [&](int64_t a, int64_t b) { std::memset(at + a, 0, static_cast<size_t>(b - a)); });
}

void* AlignedZeroed(size_t bytes) {
  void* p = AllocateStreamed(bytes);
  ZeroOnLoadThreads(p, bytes);
  return p;
}

ZeroedFloats::ZeroedFloats(size_t n)
    : p_(static_cast<float*>(AlignedZeroed((std::max<size_t>(n, 1) * sizeof(float) + 63) / 64 * 64))), n_(n) {}

void ZeroedFloats::Free::operator()(float* p) const { std::free(p); }

}  // namespace verity
