#include "engine/page_release.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

namespace verity {
namespace {

// Many tensors (unaligned starts, rows of 1 byte to 3 pages, batches of 1 to
// 40 rows, pages of 4 KB and 64 KB) converted batch by batch: each hand-back
// lies in whole pages of converted bytes, never overlaps another, and all of
// them together are every page wholly inside the tensor.
TEST(PageRelease, EveryWholePageOnceAndOnlyAfterItWasConverted) {
  std::mt19937_64 rng(11);
  long pages_released = 0;
  for (int trial = 0; trial < 3000; trial++) {
    const uintptr_t page = trial % 2 ? 4096 : 65536;
    const uintptr_t base = (uintptr_t{1} << 32) + rng() % (4 * page);
    const uintptr_t row_bytes = 1 + rng() % (3 * page);
    const int64_t rows = static_cast<int64_t>(rng() % 200), batch = 1 + static_cast<int64_t>(rng() % 40);
    const uintptr_t end = base + static_cast<uintptr_t>(rows) * row_bytes;
    uintptr_t from = base, released_to = 0;  // hand-backs come in order: each starts at or after the last's end
    uintptr_t covered = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += batch) {
      const uintptr_t done = base + static_cast<uintptr_t>(std::min(rows, r0 + batch)) * row_bytes;
      const PageRelease r = NextPageRelease(base, from, done, page);
      ASSERT_LE(r.begin, r.end);
      if (r.end > r.begin) {
        ASSERT_EQ(r.begin % page, 0u);
        ASSERT_EQ(r.end % page, 0u);
        ASSERT_GE(r.begin, base) << "a page holding bytes before the tensor";
        ASSERT_LE(r.end, done) << "a page holding bytes not yet converted";
        ASSERT_GE(r.begin, released_to) << "a page handed back twice";
        released_to = r.end;
        covered += r.end - r.begin;
      }
      from = r.next;
    }
    // Every page wholly inside [base, end).
    const uintptr_t first = (base + page - 1) / page * page, last = end / page * page;
    const uintptr_t whole = last > first ? last - first : 0;
    ASSERT_EQ(covered, whole) << "base " << base << " row " << row_bytes << " rows " << rows << " batch " << batch;
    pages_released += static_cast<long>(whole / page);
  }
  std::printf("page release: 3000 batched conversions, %ld pages handed back, each once and after its rows\n",
              pages_released);
}

}  // namespace
}  // namespace verity
