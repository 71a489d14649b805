// A q8_0 matrix in the device layout (q8_layout.h), made on the host before
// its upload. A 7B model is 7e9 weights: one thread unpacking and repacking
// them (with a zeroed buffer for each step) cost seconds of every q8_0 run,
// so the rows are split over threads (base/host_parallel.h) straight from
// the CPU row layout to their places. Host code only.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

#include "base/host_parallel.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda::q8 {

// w (q8_0) in the device layout at out (w.bytes() bytes, every one written),
// on up to `threads` threads: the same bytes as UnpackQ8_0Rows then Repack.
// w.cols is a positive multiple of 32, as every q8_0 matrix's (WeightPlacer
// refuses others).
inline void RepackMatrix(const Weights& w, unsigned char* out, int threads) {
  assert(w.cols > 0 && w.cols % kQ8_0BlockSize == 0);
  const int64_t n = int64_t{w.rows} * w.cols, row_blocks = w.cols / kQ8_0BlockSize;
  const int64_t grain =
      std::max<int64_t>(1, int64_t{256 << 10} / std::max<int64_t>(1, static_cast<int64_t>(w.row_bytes())));
  ParallelRanges(w.rows, grain, threads, [&](int64_t r0, int64_t r1) {
    std::vector<unsigned char> plain;
    for (int64_t a = r0; a < r1; a += grain) {  // a grain of rows at a time: a bounded scratch
      const int64_t b = std::min(r1, a + grain);
      plain.resize(static_cast<size_t>(b - a) * w.row_bytes());
      UnpackQ8_0Rows(w, static_cast<int>(a), static_cast<int>(b), plain.data());
      RepackBlocks(plain.data(), a * row_blocks, (b - a) * row_blocks, n, out);
    }
  });
}

}  // namespace verity::kernels::cuda::q8
