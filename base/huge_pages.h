// Memory for data streamed once per pass: the weights and KV cache every
// token reads, and the buffers that measure read bandwidth. On 4 KB pages a
// stream costs a page walk and a restart of the hardware prefetchers every
// 4 KB, so large buffers are 2 MB aligned and their whole 2 MB extents are
// asked for as transparent huge pages (the engine, `verity roofline` and
// kernels_bench all allocate through here, so they stream alike).
#pragma once

#include <cstddef>

namespace verity {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page

// `bytes` of uninitialized memory, not yet touched (pages become resident when
// first written): 2 MB aligned with MADV_HUGEPAGE over every whole 2 MB extent
// when bytes >= 2 MB, else 64-byte aligned. The tail past the last whole extent
// keeps small pages. Free it with std::free. Throws std::bad_alloc.
void* AllocateStreamed(size_t bytes);

}  // namespace verity
