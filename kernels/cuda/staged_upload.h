// A weight matrix's device copy sent through small pinned staging buffers
// (model_copies.cc). From pageable memory the driver stages a copy itself,
// on the calling thread: the H200's first calls uploaded at 4.6-5.5 GB/s on
// 2026-12-04 (docs/cuda.md), ~3 s of every 7B run. From pinned memory a copy
// is a DMA at the bus's speed, and the staging (a copy, or q8_0's repack into
// the device layout) runs on the load's threads while the previous buffer's
// DMA runs. Which rows fill a buffer, and where their bytes go in the whole
// matrix's copy, is this header's; the CUDA calls are model_copies.cc's.
// Host code only: tests/cuda_elementwise_test.cc runs it with memcpy as the
// copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/host_parallel.h"
#include "base/status.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/q8_upload.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda::staged {

// A run of staged bytes (at `src` in the buffer) and its place (`dst`) in the
// matrix's device copy.
struct Piece {
  size_t dst = 0, src = 0, bytes = 0;
};

// The bytes a staging buffer needs for w: `capacity`, less for a smaller
// matrix, and never less than one row (rows are staged whole).
inline size_t BufferBytes(const Weights& w, size_t capacity) {
  return std::max(w.row_bytes(), std::min(capacity, w.bytes()));
}
// Whole rows a buffer of `bytes` holds (at least one).
inline int64_t RowsPerBuffer(const Weights& w, size_t bytes) {
  return std::max<int64_t>(1, static_cast<int64_t>(bytes / w.row_bytes()));
}

// Rows [r0, r1) of w's device copy written at `staging` ((r1 - r0) rows'
// bytes), on up to `threads` threads, and the pieces that put them in place.
// q8_0's device layout (q8_layout.h) is all quants, then all scales, so
// those rows are staged as a matrix of their own (their quants, then their
// scales) and sent as two pieces; every other type is the host's bytes.
inline std::vector<Piece> StageRows(const Weights& w, int64_t r0, int64_t r1, unsigned char* staging, int threads) {
  const size_t row_bytes = w.row_bytes(), rows = static_cast<size_t>(r1 - r0);
  if (w.dtype != DType::kQ8_0) {
    const unsigned char* from = w.row(static_cast<int>(r0));
    const int64_t grain = int64_t{1} << 20;
    ParallelRanges(static_cast<int64_t>(rows * row_bytes), grain, threads,
                   [&](int64_t a, int64_t b) { std::memcpy(staging + a, from + a, static_cast<size_t>(b - a)); });
    return {{static_cast<size_t>(r0) * row_bytes, 0, rows * row_bytes}};
  }
  Weights part = w;
  part.data = w.row(static_cast<int>(r0));
  part.rows = static_cast<int>(rows);
  q8::RepackMatrix(part, staging, threads);
  const size_t cols = static_cast<size_t>(w.cols), n = static_cast<size_t>(w.rows) * cols;
  const size_t scale_bytes = cols / kQ8_0BlockSize * sizeof(float);
  return {{static_cast<size_t>(r0) * cols, 0, rows * cols},
          {n + static_cast<size_t>(r0) * scale_bytes, rows * cols, rows * scale_bytes}};
}

// Every row of w once, a buffer at a time, the buffers taken in turn from
// *next (of `slots`, carried from one matrix to the next so a matrix's first
// fill does not wait for the buffer just sent): acquire(slot) gives the
// buffer once its last copies are done (Result<unsigned char*>), send(piece,
// buffer) queues a copy, sent(slot) marks the buffer's copies queued.
template <class Acquire, class Send, class Sent>
Status Upload(const Weights& w, int64_t rows_per_buffer, int slots, int threads, int* next, Acquire acquire, Send send,
              Sent sent) {
  for (int64_t r0 = 0; r0 < w.rows; r0 += rows_per_buffer) {
    const int64_t r1 = std::min<int64_t>(w.rows, r0 + rows_per_buffer);
    const int slot = *next;
    *next = (*next + 1) % slots;
    VERITY_ASSIGN_OR_RETURN(unsigned char* buffer, acquire(slot));
    for (const Piece& p : StageRows(w, r0, r1, buffer, threads)) VERITY_RETURN_IF_ERROR(send(p, buffer));
    VERITY_RETURN_IF_ERROR(sent(slot));
  }
  return OkStatus();
}

}  // namespace verity::kernels::cuda::staged
