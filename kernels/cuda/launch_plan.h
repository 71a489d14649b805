// Launch configurations of the CUDA kernels (kernels/cuda/kernels.cu),
// computed on the host from the shape and checked against the device's limits
// before anything is launched. Plain C++ (no CUDA headers), so every plan is
// unit-tested on a machine without a GPU (tests/cuda_plan_test.cc).
//
// A plan is what the kernel is launched with: grid, block, dynamic shared
// memory, and the kernel's tiling parameters. No kernel's shared memory
// grows with the context, and no grid with the position: prefill attention
// walks the KV cache in tiles of kAttentionTile positions with an online
// softmax, so contexts past 64k (or 1M) positions launch with the same
// configuration as short ones; decode attention's grid has a block per chunk
// of the cache's capacity (seq_len: fixed for a model), its shared memory one
// chunk's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda {

// What a device allows one launch. The defaults are those of every sm_80 and
// sm_90 device without the opt-in for more than 48 KiB of shared memory; the
// backend fills them from cudaGetDeviceProperties.
struct DeviceLimits {
  int max_threads_per_block = 1024;
  int max_block_dim[3] = {1024, 1024, 64};
  int64_t max_grid_dim[3] = {2147483647, 65535, 65535};
  size_t max_shared_per_block = 48 * 1024;
  int warp_size = 32;
  int compute_major = 0;  // the device's compute capability major (9: Hopper, dependent launches)
  int64_t l2_bytes = 0;   // the device's L2 cache (0: unknown)
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

struct LaunchPlan {
  std::string kernel;  // the kernel's name, as errors and checked launches print it
  std::string shape;   // "rows=4096 cols=4096 dtype=bf16", for errors
  Dim3 grid, block;
  size_t shared_bytes = 0;  // dynamic shared memory
  int tile = 0;             // kernel-specific: rows per block, positions per tile, ...
  // The rows kernel's form (PlanRows): weight rows per warp, and chunks of
  // its loop unrolled (16-byte loads a lane has in flight). Every form sums a
  // row's products in the same order: the same bits.
  int rows_per_warp = 1, unroll = 4;
  // Launched as a programmatic dependent launch (sm_90): the kernel's prologue
  // (the rows kernel's weight prefetch) runs while the kernel before it on
  // the stream finishes. Set by the backend, never by a planner.
  bool dependent_launch = false;
  // Bytes at the start of each weight row the rows kernel asks L2 for before
  // that wait (0: none; RowsPrefetchBytes). Set by the backend with
  // dependent_launch; a prefetch changes no bit.
  int64_t prefetch_bytes = 0;
  // The rows kernel's q8_0 products on int16 x (PlanRowsQ8Int, q8_int.h):
  // simd::MatVecQ8_0's arithmetic, x quantized into shared memory.
  bool int16_x = false;
};

// A decode step's (T = 1) rows-kernel forms: {rows per warp, unroll};
// CudaBench.RowsForms times them all on a device. Form 4 (4 rows a warp) has
// not run on one yet: a candidate for q8_0, whose products are bound by the
// work a weight costs, not by HBM (docs/cuda.md).
struct RowsForm {
  int rows_per_warp, unroll;
};
inline constexpr RowsForm kRowsForms[] = {{1, 4}, {1, 8}, {1, 16}, {2, 8}, {4, 4}};
inline constexpr int kRowsFormCount = sizeof(kRowsForms) / sizeof(kRowsForms[0]);
// The form a decode step takes, as measured on an H200 (docs/cuda.md): q8_0's
// 2 rows a warp (each chunk of x serves both rows: 1.3-1.4x form 0 on the 7B
// products), the default elsewhere (no other form is faster on bf16).
inline constexpr int DefaultRowsForm(DType dtype) { return dtype == DType::kQ8_0 ? 3 : 0; }
// The form of the q8_0 products on int16 x (PlanRowsQ8Int): 2 rows a warp
// as q8_0's, 4 chunks of each in flight (8 took 135-148 registers a thread
// with ptxas for sm_90: one block of 8 warps an SM; 4 keeps it near the
// f32-x form's 93-100).
inline constexpr RowsForm kQ8IntRowsForm = {2, 4};

// What a dependent rows launch asks L2 for before its wait, of each of its
// `rows` weight rows of `row_bytes` (docs/cuda.md, "Whole rows into L2"): the
// whole row where the launch's weights fit in half the L2 (l2_bytes), else
// an equal share of that half in 128-byte lines, never less than
// kRowsPrefetchFloor (the 2 KB a row every launch asked before 2026-12-07)
// nor more than the row. A multiple of 16 for a row_bytes that is one (the
// bulk prefetch's unit). 0 for no rows.
inline constexpr int64_t kRowsPrefetchFloor = 2048;
int64_t RowsPrefetchBytes(int64_t row_bytes, int64_t rows, int64_t l2_bytes);
// A dependent rows launch's prefetch_bytes for `rows` stacked rows of `cols`
// weights stored as dtype, `mats` matrices of them read (2 for SwiGLU's gate
// and up): RowsPrefetchBytes of its weight rows (a q8_0 row's cols quants;
// its scales, an eighth more, are not counted in the budget), or with
// whole_rows false (VERITY_CUDA_L2_PREFETCH=0) the 2 KB floor.
int64_t RowsLaunchPrefetch(DType dtype, int rows, int cols, int mats, int64_t l2_bytes, bool whole_rows);

// Warps (one row each) per block of the matrix-vector kernels.
inline constexpr int kMatvecWarps = 8;
// Query rows each warp of the batched matmul carries at once (reads the weight row once per group).
inline constexpr int kMatmulRowsPerWarp = 8;
// Weight rows each warp of the rows kernel takes for a batched step (tile
// kMatmulRowsPerWarp), so a vector chunk loaded once serves 4 rows; 1 for a
// single vector (a decode step: every warp's loads for one row in flight).
inline constexpr int kBatchedRowsPerWarp = 4;
// Positions of the KV cache scored per attention tile (shared memory holds one tile).
inline constexpr int kAttentionTile = 1024;
// Split decode attention (flash-decoding): positions per chunk, threads per
// block, and the largest head it takes (a lane holds head_size / 32 values of
// q, k, v and the accumulator in registers; larger heads take the tiled kernel).
inline constexpr int kDecodeChunk = 256;
inline constexpr int kDecodeAttentionThreads = 256;
inline constexpr int kDecodeMaxHeadSize = 256;
// Threads per block of the element-wise kernels (SwiGLU, RoPE).
inline constexpr int kElementwiseThreads = 256;
// Grid cap of the element-wise kernels, which loop over the rest (grid-stride).
inline constexpr int64_t kElementwiseMaxBlocks = 65535;

// Returns OK iff `p` fits `lim`: every block and grid dimension positive and
// within its maximum, threads per block within the maximum and a multiple of
// the warp size, shared memory within the per-block maximum. An error names
// the kernel, its shape, the value and the limit it exceeds.
Status Validate(const LaunchPlan& p, const DeviceLimits& lim);

// A decode step's product (T = 1, PlanRows's default form) that normalizes
// its input first (LaunchRowsNormed, rows.h): shared memory for the normed
// row and the sum's partials (norm_threads / 32, RmsnormKernel's block:
// PlanRmsnorm(1, cols)'s); a row that does not fit refused by name.
Result<LaunchPlan> PlanRowsNormed(DType dtype, int rows, int cols, int norm_threads, const DeviceLimits& lim);
// A decode step's q8_0 product on int16 x (opt-in, VERITY_CUDA_Q8_INT16=1;
// q8_int.h): PlanRows's grid for q8_0 (or, with norm_threads > 0,
// PlanRowsNormed's) in kQ8IntRowsForm, with x's int16 quants and scales in
// shared memory after the normed row; a width whose quants do not fit a
// block's shared memory is refused by name. cols % 32 == 0.
Result<LaunchPlan> PlanRowsQ8Int(int rows, int cols, int norm_threads, const DeviceLimits& lim);
// out[rows] = W[rows x cols] x[cols]: one warp per row, kMatvecWarps rows per block.
// q8_0 requires cols % 32 == 0.
Result<LaunchPlan> PlanMatvec(DType dtype, int rows, int cols, const DeviceLimits& lim);
// Positions per prefill pass (VERITY_CUDA_PREFILL_BLOCK's text, base/env.h):
// 512 for an empty text, else its value, a multiple of 16 from 16 to 8192;
// anything else is an error naming the variable and the value.
inline constexpr int kDefaultPrefillBlock = 512;
Result<int> PrefillBlockFromText(const std::string& text);
// out[T x rows] = x[T x cols] W^T: grid.y groups of kMatmulRowsPerWarp query rows.
Result<LaunchPlan> PlanMatmulBatch(DType dtype, int rows, int cols, int T, const DeviceLimits& lim);
// out[T x rows] = x[T x cols] W^T in 16-byte loads (LaunchRows): one warp
// per weight row (kBatchedRowsPerWarp rows for T > 1), kMatvecWarps warps per
// block; tile = vectors per warp (1 for T == 1, else kMatmulRowsPerWarp;
// grid.x their groups; grid.y, then z, the row blocks). cols % 8 == 0.
// `form` (T == 1 only): an index into kRowsForms; -1: DefaultRowsForm(dtype).
Result<LaunchPlan> PlanRows(DType dtype, int rows, int cols, int T, const DeviceLimits& lim, int form = -1);
// A batched step's products on tensor cores (mma_rows.cu; opt-in,
// VERITY_CUDA_BATCH_MMA=1): out[T x rows] = x[T x cols] W^T for bf16 or
// q8_0 W, cols % 32 == 0. A block of kMmaRowsWarps warps takes `tile` weight rows
// (kMmaRowsTile; 16 with SwiGLU, whose block holds the gate's and the up's)
// for up to 32 vectors, its warps splitting the columns (warp w takes the
// 32-column steps w, w + kMmaRowsWarps, ...) and adding their sums in warp
// order in shared memory: a row's sum for a vector depends on neither the
// other vectors nor their count. grid.x the vector groups, grid.y then z
// the row blocks.
inline constexpr int kMmaRowsWarps = 8;
inline constexpr int kMmaRowsTile = 32;
Result<LaunchPlan> PlanRowsMma(DType dtype, int rows, int cols, int T, bool swiglu, const DeviceLimits& lim);
// out[T x rows] = x[T x cols] W^T for W in llama.cpp blocks of ggml type
// `block_type` (Q4_K or Q6_K: kquant_layout.h; another is refused by id):
// one warp per weight row, kMatvecWarps a block; tile = vectors per warp (1
// for T == 1, else kMatmulRowsPerWarp; grid.x their groups; grid.y, then z,
// the row blocks). cols % 256 == 0.
Result<LaunchPlan> PlanBlockRows(uint32_t block_type, int rows, int cols, int T, const DeviceLimits& lim);
// n rows of dim floats gathered from a table (grid.y: one row each).
Result<LaunchPlan> PlanEmbed(int dim, int n, const DeviceLimits& lim);
// An element-wise update of n floats (`name`: "add", "axpy", "divide").
Result<LaunchPlan> PlanElementwise(const char* name, int64_t n, const DeviceLimits& lim);
// `rows` independent RMSNorms of `size` values: one block per row.
Result<LaunchPlan> PlanRmsnorm(int rows, int size, const DeviceLimits& lim);
// RoPE over `rows` vectors of `size` values (heads of head_size), one thread
// per rotated pair; the per-pair table (head_size / 2 entries) is an argument.
Result<LaunchPlan> PlanRope(int rows, int size, int head_size, const DeviceLimits& lim);
// Attention of `n_queries` consecutive positions (1: decode; a prefill block:
// more) whose last attends to `n_positions` cached positions; one block per
// (head, query), the cache walked in tiles of kAttentionTile positions.
Result<LaunchPlan> PlanAttention(int n_heads, int n_kv_heads, int head_size, int n_queries, int64_t n_positions,
                                 const DeviceLimits& lim);
// RoPE of `rows` q rows (q_width floats) and key rows (kv_width), and the
// key and value rows written into the KV cache, in one launch: one thread per
// q pair, key pair and value float; grid.y one row each.
Result<LaunchPlan> PlanRopeCache(int rows, int q_width, int kv_width, int head_size, const DeviceLimits& lim);
// Decode attention (one query) split over the context: grid (n_heads,
// chunks), chunks = ceil(capacity / kDecodeChunk), where capacity is the most
// positions the cache holds (the model's seq_len), never the current position:
// a recorded decode step replays at every position with the position read on
// the device, so its launch shape must not move; blocks whose chunk starts past
// the position exit at once. Each block writes its chunk's softmax partial to
// scratch (DecodeAttentionPartialFloats) and the last block of a head to finish
// combines them in chunk order. tile = kDecodeChunk. Refuses (by name) heads
// larger than kDecodeMaxHeadSize and capacities whose chunks exceed grid.y.
Result<LaunchPlan> PlanDecodeAttention(int n_heads, int n_kv_heads, int head_size, int64_t capacity,
                                       const DeviceLimits& lim);
// The same for `rows` independent rows (a batched step: grid.z, one row each,
// each at its own position in its own slot's cache); row z's launch is the
// single row's, so its bits are.
Result<LaunchPlan> PlanDecodeAttentionRows(int n_heads, int n_kv_heads, int head_size, int64_t capacity, int rows,
                                           const DeviceLimits& lim);
// How the split decode attention lays a head over a warp: each lane holds
// vec * nv values (elementwise.h's LaneValue), loaded vec floats at a time:
// {2, 1} for head_size 64, {4, 1} for 128, {4, 2} for 256 (they fill the
// head exactly), {1, 8} for any other head up to 256 (values past it zero).
struct LaneShape {
  int vec, nv;
};
LaneShape DecodeAttentionLaneShape(int head_size);
// Floats of partial results a PlanDecodeAttention launch writes: per row, head
// and chunk, the chunk's max score, its sum of weights and head_size accumulated values.
int64_t DecodeAttentionPartialFloats(const LaunchPlan& plan, int head_size);
// The flash-style prefill attention (flash_attention.cu): a block of 4 warps
// a (64 query rows, head), grid (ceil(T / 64), heads); shared memory for one
// tile of keys and values (flash_map.h). Head sizes other than 64, 96 and 128
// and devices below compute capability 8.0 (no TF32 mma.sync) refused by name.
Result<LaunchPlan> PlanFlashAttention(int n_heads, int n_kv_heads, int head_size, int n_queries,
                                      const DeviceLimits& lim);
// The causal softmax of a prefill block's scores [heads][T][n] (the GEMM
// attention): one block a (query row, head), grid (T, heads).
Result<LaunchPlan> PlanCausalSoftmax(int heads, int T, int64_t n, const DeviceLimits& lim);
// hb[i] = silu(hb[i]) * hb2[i] for n values.
Result<LaunchPlan> PlanSwiGLU(int64_t n, const DeviceLimits& lim);
// Top-k of n_experts router logits and their softmax weights, for `rows` tokens.
Result<LaunchPlan> PlanMoeTopK(int rows, int n_experts, int k, const DeviceLimits& lim);
// The index of the largest of n values (ties: the lower index), one block.
Result<LaunchPlan> PlanArgmax(int64_t n, const DeviceLimits& lim);
// The same for each of `rows` rows of n values (grid.x: one block a row).
Result<LaunchPlan> PlanArgmaxRows(int rows, int64_t n, const DeviceLimits& lim);

}  // namespace verity::kernels::cuda
