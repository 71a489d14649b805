// Which output a thread of the rows and rotate-and-cache kernels writes,
// written once as __host__ __device__ functions: the kernels (rows.cu,
// rope_cache.cu) call them on the device, and tests/cuda_plan_test.cc walks
// every thread of a plan on the CPU and checks that each output is written
// exactly once. Plain C++17 without CUDA headers when compiled by the host
// compiler.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elementwise.h"  // VERITY_HD

namespace verity::kernels::cuda::map {

// ---- The rows kernel (rows.cu): warps of kMatvecWarps a block, rows_per_warp
// weight rows each, row blocks along grid y then z, vector groups along x.

// The first stacked row warp `warp` of the block at (y, z) takes.
VERITY_HD int64_t FirstRow(unsigned block_y, unsigned block_z, unsigned grid_y, int warps, int warp,
                           int rows_per_warp) {
  const int64_t row_block = static_cast<int64_t>(block_z) * grid_y + block_y;
  return (row_block * warps + warp) * rows_per_warp;
}

// Stacked row g's matrix (target) and its row there; begin_at(i) is target
// i's first stacked row, begin_at(count) the total.
struct StackedRow {
  int target, row;
};
template <class BeginAt>
VERITY_HD StackedRow Locate(BeginAt begin_at, int count, int g) {
  int i = 0;
  while (i + 1 < count && g >= begin_at(i + 1)) i++;
  return {i, g - begin_at(i)};
}

// Where vector t of group x (vectors_per_group each) puts row `row` of a
// target of `rows` rows: its output is row-major [T x rows].
VERITY_HD size_t OutputIndex(unsigned block_x, int vectors_per_group, int t, int rows, int row) {
  return (static_cast<size_t>(block_x) * vectors_per_group + t) * rows + row;
}

// ---- The rotate-and-cache kernel (rope_cache.cu): work item p of a row is
// a q pair, then a key pair (rotated and cached), then a value float (cached).
enum class RopeCacheWork { kQPair, kKeyPair, kValue };
struct RopeCacheItem {
  RopeCacheWork kind;
  int index;  // the pair, or the value float
};
VERITY_HD RopeCacheItem RopeCacheWorkItem(int p, int q_width, int kv_width) {
  const int q_pairs = q_width / 2, kv_pairs = kv_width / 2;
  if (p < q_pairs) return {RopeCacheWork::kQPair, p};
  if (p < q_pairs + kv_pairs) return {RopeCacheWork::kKeyPair, p - q_pairs};
  return {RopeCacheWork::kValue, p - q_pairs - kv_pairs};
}
VERITY_HD int RopeCacheWorkItems(int q_width, int kv_width) { return q_width / 2 + kv_width / 2 + kv_width; }
// The two values of a row (heads of head_size) that pair `pair` rotates.
VERITY_HD void RopePairOf(int pair, int head_size, bool interleaved, int* a, int* b) {
  const int half = head_size / 2;
  ew::RopePairIndex((pair / half) * head_size, pair % half, head_size, interleaved, a, b);
}

// ---- The split decode attention (kernels.cu): block (h, y, z) is head h,
// chunk y of row z. Row z's head h owns counter RowHead(...) and the partials
// from PartialsOf(RowHead(...), grid_y, head_size); its chunk y's partial is
// head_size + 2 floats on from there.
VERITY_HD int64_t RowHead(unsigned z, unsigned grid_x, unsigned h) { return static_cast<int64_t>(z) * grid_x + h; }
VERITY_HD int64_t PartialsOf(int64_t row_head, unsigned grid_y, int head_size) {
  return row_head * grid_y * (head_size + 2);
}

}  // namespace verity::kernels::cuda::map
