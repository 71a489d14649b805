// Which pages of a mapped source a batched conversion hands back (engine/
// weights.cc: MADV_DONTNEED after each batch of rows), as a pure function so
// its promise is tested over many shapes (page_release_test.cc): a page is
// handed back only once every byte of it that belongs to the tensor was
// converted, never twice, and by the end every page lying wholly inside the
// tensor was. The page straddling a batch's end goes with a later batch; the
// partial pages at the tensor's two ends, which may hold a neighbour's
// bytes, are never handed back.
#pragma once

#include <algorithm>
#include <cstdint>

namespace verity {

struct PageRelease {
  uintptr_t begin = 0, end = 0;  // whole pages to hand back now: [begin, end), maybe empty
  uintptr_t next = 0;            // where the next hand-back may start
};

// After the tensor's source [base, done) was converted, where [base, from)
// was already dealt with (`from`: base, then the previous call's `next`).
inline PageRelease NextPageRelease(uintptr_t base, uintptr_t from, uintptr_t done, uintptr_t page) {
  PageRelease r;
  r.begin = (from + page - 1) / page * page;
  r.end = std::max(r.begin, done / page * page);
  r.next = std::max(base, done / page * page);
  return r;
}

}  // namespace verity
