#include "kernels/cuda/launch_plan.h"

#include <algorithm>

#include "base/env.h"
#include "kernels/cuda/flash_map.h"
#include "kernels/cuda/kquant_layout.h"
#include "kernels/cuda/q8_int.h"

namespace verity::kernels::cuda {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status PlanError(const LaunchPlan& p, const std::string& what) {
  return Status::Error("cuda launch plan: kernel " + p.kernel + " (" + p.shape + "): " + what);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Sets a grid dimension from a 64-bit count; Validate rejects what does not fit.
uint32_t GridDim(int64_t blocks) { return blocks > 0xffffffffLL ? 0xffffffffu : static_cast<uint32_t>(blocks); }

LaunchPlan Named(const char* kernel, std::string shape) {
  LaunchPlan p;
  p.kernel = kernel;
  p.shape = std::move(shape);
  return p;
}

// Checks the plan and hands it back (the plan functions' common tail).
Result<LaunchPlan> Checked(LaunchPlan p, const DeviceLimits& lim) {
  VERITY_RETURN_IF_ERROR(Validate(p, lim));
  return p;
}

// The threads of a one-block reduction over `n` values: a warp multiple, at most 1024 or the device's maximum.
int ReductionThreads(int64_t n, const DeviceLimits& lim) {
  const int64_t cap = std::min<int64_t>(1024, lim.max_threads_per_block);
  const int64_t want = std::min<int64_t>(cap, CeilDiv(std::max<int64_t>(n, 1), lim.warp_size) * lim.warp_size);
  return static_cast<int>(std::max<int64_t>(want, lim.warp_size));
}

}  // namespace

Status Validate(const LaunchPlan& p, const DeviceLimits& lim) {
  const uint32_t block[3] = {p.block.x, p.block.y, p.block.z};
  const uint32_t grid[3] = {p.grid.x, p.grid.y, p.grid.z};
  const char* axis = "xyz";
  for (int i = 0; i < 3; i++) {
    if (block[i] == 0 || block[i] > static_cast<uint32_t>(lim.max_block_dim[i]))
      return PlanError(p, std::string("block.") + axis[i] + "=" + Str(block[i]) + " is outside [1, " +
                              Str(lim.max_block_dim[i]) + "] (max block dimension)");
    if (grid[i] == 0 || grid[i] > lim.max_grid_dim[i])
      return PlanError(p, std::string("grid.") + axis[i] + "=" + Str(grid[i]) + " is outside [1, " +
                              Str(lim.max_grid_dim[i]) + "] (max grid dimension)");
  }
  const int64_t threads = int64_t{p.block.x} * p.block.y * p.block.z;
  if (threads > lim.max_threads_per_block)
    return PlanError(p, Str(threads) + " threads per block exceed the maximum " + Str(lim.max_threads_per_block));
  if (threads % lim.warp_size != 0)
    return PlanError(p, Str(threads) + " threads per block are not a multiple of the warp size " + Str(lim.warp_size));
  if (p.shared_bytes > lim.max_shared_per_block)
    return PlanError(p, Str(static_cast<int64_t>(p.shared_bytes)) +
                            " bytes of shared memory exceed the per-block maximum " +
                            Str(static_cast<int64_t>(lim.max_shared_per_block)));
  return OkStatus();
}

Result<int> PrefillBlockFromText(const std::string& text) {
  if (text.empty()) return kDefaultPrefillBlock;
  const bool digits = text.size() <= 5 && text.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(text) : 0;
  if (!env::IsCudaPrefillBlock(n))
    return Status::Error("VERITY_CUDA_PREFILL_BLOCK='" + text + "': positions per prefill pass must be " +
                         env::kCudaPrefillBlockRule);
  return n;
}

Result<LaunchPlan> PlanMatvec(DType dtype, int rows, int cols, const DeviceLimits& lim) {
  LaunchPlan p = Named((std::string("matvec_") + DTypeName(dtype)).c_str(),
                       "rows=" + Str(rows) + " cols=" + Str(cols) + " dtype=" + DTypeName(dtype));
  if (rows < 1 || cols < 1) return PlanError(p, "rows and cols must be >= 1");
  if (dtype == DType::kQ8_0 && cols % kQ8_0BlockSize != 0)
    return PlanError(p, "q8_0 needs cols to be a multiple of " + Str(kQ8_0BlockSize));
  p.tile = kMatvecWarps;
  p.block.x = static_cast<uint32_t>(kMatvecWarps * lim.warp_size);
  p.grid.x = GridDim(CeilDiv(rows, kMatvecWarps));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanMatmulBatch(DType dtype, int rows, int cols, int T, const DeviceLimits& lim) {
  LaunchPlan p = Named((std::string("matmul_batch_") + DTypeName(dtype)).c_str(),
                       "rows=" + Str(rows) + " cols=" + Str(cols) + " T=" + Str(T) + " dtype=" + DTypeName(dtype));
  if (rows < 1 || cols < 1 || T < 1) return PlanError(p, "rows, cols and T must be >= 1");
  if (dtype == DType::kQ8_0 && cols % kQ8_0BlockSize != 0)
    return PlanError(p, "q8_0 needs cols to be a multiple of " + Str(kQ8_0BlockSize));
  p.tile = kMatmulRowsPerWarp;
  p.block.x = static_cast<uint32_t>(kMatvecWarps * lim.warp_size);
  p.grid.x = GridDim(CeilDiv(rows, kMatvecWarps));
  p.grid.y = GridDim(CeilDiv(T, kMatmulRowsPerWarp));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanRows(DType dtype, int rows, int cols, int T, const DeviceLimits& lim, int form) {
  LaunchPlan p = Named((std::string("rows_") + DTypeName(dtype)).c_str(),
                       "rows=" + Str(rows) + " cols=" + Str(cols) + " T=" + Str(T) + " dtype=" + DTypeName(dtype));
  if (rows < 1 || cols < 1 || T < 1) return PlanError(p, "rows, cols and T must be >= 1");
  if (cols % 8 != 0) return PlanError(p, "cols must be a multiple of 8 (16-byte loads)");
  if (dtype == DType::kQ8_0 && cols % kQ8_0BlockSize != 0)
    return PlanError(p, "q8_0 needs cols to be a multiple of " + Str(kQ8_0BlockSize));
  if (form == -1) form = T == 1 ? DefaultRowsForm(dtype) : 0;
  if (form < 0 || form >= kRowsFormCount || (form != 0 && T != 1))
    return PlanError(p, "form " + Str(form) + " (0 to " + Str(kRowsFormCount - 1) + ", and only 0 for T > 1)");
  p.tile = T == 1 ? 1 : kMatmulRowsPerWarp;
  p.rows_per_warp = T == 1 ? kRowsForms[form].rows_per_warp : kBatchedRowsPerWarp;
  p.unroll = T == 1 ? kRowsForms[form].unroll : 4;
  if (form != 0) p.shape += " form=" + Str(form);
  p.block.x = static_cast<uint32_t>(kMatvecWarps * lim.warp_size);
  // Vector groups along x, so the blocks that read the same weight rows are
  // launched side by side and all but the first read them from L2; row
  // blocks along y, and z where y's limit runs out.
  const int64_t row_blocks = CeilDiv(rows, kMatvecWarps * p.rows_per_warp);
  p.grid.x = GridDim(CeilDiv(T, p.tile));
  p.grid.y = GridDim(std::min<int64_t>(row_blocks, lim.max_grid_dim[1]));
  p.grid.z = GridDim(CeilDiv(row_blocks, p.grid.y));
  return Checked(std::move(p), lim);
}

int64_t RowsPrefetchBytes(int64_t row_bytes, int64_t rows, int64_t l2_bytes) {
  if (row_bytes <= 0 || rows <= 0) return 0;
  constexpr int64_t kLine = 128;
  const int64_t budget = l2_bytes / 2;
  if (rows <= budget / row_bytes) return row_bytes;  // rows x row_bytes <= budget, without overflow
  const int64_t share = budget / rows / kLine * kLine;
  return std::min(std::max(share, kRowsPrefetchFloor), row_bytes);
}

Result<LaunchPlan> PlanRowsNormed(DType dtype, int rows, int cols, int norm_threads, const DeviceLimits& lim) {
  VERITY_ASSIGN_OR_RETURN(LaunchPlan p, PlanRows(dtype, rows, cols, 1, lim));
  p.shape += " normed";
  if (norm_threads < lim.warp_size || norm_threads % lim.warp_size != 0)
    return PlanError(p, "the norm's threads (" + Str(norm_threads) + ") must be a positive multiple of the warp");
  p.shared_bytes = (static_cast<size_t>(cols) + norm_threads / lim.warp_size) * sizeof(float);
  if (p.shared_bytes > lim.max_shared_per_block)
    return PlanError(p, "the normed row (" + Str(static_cast<int64_t>(p.shared_bytes)) +
                            " bytes of shared memory) does not fit the block's " +
                            Str(static_cast<int64_t>(lim.max_shared_per_block)));
  return Checked(std::move(p), lim);
}

// The grid PlanRows sizes for q8_0's default form is the one int16 x needs.
static_assert(kQ8IntRowsForm.rows_per_warp == kRowsForms[DefaultRowsForm(DType::kQ8_0)].rows_per_warp,
              "PlanRowsQ8Int keeps PlanRows' grid: the same rows a warp");
Result<LaunchPlan> PlanRowsQ8Int(int rows, int cols, int norm_threads, const DeviceLimits& lim) {
  VERITY_ASSIGN_OR_RETURN(LaunchPlan p, norm_threads > 0 ? PlanRowsNormed(DType::kQ8_0, rows, cols, norm_threads, lim)
                                                         : PlanRows(DType::kQ8_0, rows, cols, 1, lim));
  p.kernel += "_int16x";
  p.shape =
      "rows=" + Str(rows) + " cols=" + Str(cols) + " T=1 dtype=q8_0 int16_x" + (norm_threads > 0 ? " normed" : "");
  p.int16_x = true;
  p.rows_per_warp = kQ8IntRowsForm.rows_per_warp;
  p.unroll = kQ8IntRowsForm.unroll;
  p.shared_bytes =
      static_cast<size_t>((norm_threads > 0 ? q8i::AfterNorm(cols, norm_threads) : 0) + q8i::SharedBytes(cols));
  if (p.shared_bytes > lim.max_shared_per_block)
    return PlanError(p, "x's int16 quants (" + Str(static_cast<int64_t>(p.shared_bytes)) +
                            " bytes of shared memory) do not fit the block's " +
                            Str(static_cast<int64_t>(lim.max_shared_per_block)));
  return Checked(std::move(p), lim);
}

int64_t RowsLaunchPrefetch(DType dtype, int rows, int cols, int mats, int64_t l2_bytes, bool whole_rows) {
  const int64_t row_bytes = dtype == DType::kQ8_0 ? cols : static_cast<int64_t>(RowBytes(dtype, cols));
  if (!whole_rows) return std::min(row_bytes, kRowsPrefetchFloor);
  return RowsPrefetchBytes(row_bytes, static_cast<int64_t>(rows) * mats, l2_bytes);
}

Result<LaunchPlan> PlanRowsMma(DType dtype, int rows, int cols, int T, bool swiglu, const DeviceLimits& lim) {
  LaunchPlan p = Named((std::string("rows_mma_") + DTypeName(dtype)).c_str(),
                       "rows=" + Str(rows) + " cols=" + Str(cols) + " T=" + Str(T) + " dtype=" + DTypeName(dtype));
  if (dtype != DType::kBF16 && dtype != DType::kQ8_0)
    return PlanError(p, "tensor-core rows take bf16 and q8_0 weights only");
  if (rows < 1 || cols < 1 || T < 1) return PlanError(p, "rows, cols and T must be >= 1");
  if (cols % 32 != 0) return PlanError(p, "cols must be a multiple of 32 (a warp's step)");
  if (lim.compute_major > 0 && lim.compute_major < 8)
    return PlanError(
        p, "bf16 mma.sync needs compute capability 8.0 or later (this device: " + Str(lim.compute_major) + ".x)");
  p.tile = swiglu ? kMmaRowsTile / 2 : kMmaRowsTile;
  p.block.x = static_cast<uint32_t>(kMmaRowsWarps * lim.warp_size);
  // Each warp's partial sums of the block's rows for 32 vectors (twice with SwiGLU: gate and up).
  p.shared_bytes = static_cast<size_t>(swiglu ? 2 : 1) * kMmaRowsWarps * p.tile * 32 * sizeof(float);
  const int64_t row_blocks = CeilDiv(rows, p.tile);
  p.grid.x = GridDim(CeilDiv(T, 32));
  p.grid.y = GridDim(std::min<int64_t>(row_blocks, lim.max_grid_dim[1]));
  p.grid.z = GridDim(CeilDiv(row_blocks, p.grid.y));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanBlockRows(uint32_t block_type, int rows, int cols, int T, const DeviceLimits& lim) {
  const std::string type = block_type == kq::kQ4_K   ? "q4_k"
                           : block_type == kq::kQ6_K ? "q6_k"
                                                     : "type" + Str(block_type);
  LaunchPlan p = Named(("block_rows_" + type).c_str(),
                       "rows=" + Str(rows) + " cols=" + Str(cols) + " T=" + Str(T) + " dtype=block " + type);
  if (!kq::Supported(block_type))
    return PlanError(p, "no kernel for ggml block type " + Str(block_type) + " (Q4_K and Q6_K only)");
  if (rows < 1 || cols < 1 || T < 1) return PlanError(p, "rows, cols and T must be >= 1");
  if (cols % kq::kBlockWeights != 0)
    return PlanError(p, "cols must be a multiple of " + Str(kq::kBlockWeights) + " (whole blocks)");
  p.tile = T == 1 ? 1 : kMatmulRowsPerWarp;
  p.block.x = static_cast<uint32_t>(kMatvecWarps * lim.warp_size);
  const int64_t row_blocks = CeilDiv(rows, kMatvecWarps);
  p.grid.x = GridDim(CeilDiv(T, p.tile));
  p.grid.y = GridDim(std::min<int64_t>(row_blocks, lim.max_grid_dim[1]));
  p.grid.z = GridDim(CeilDiv(row_blocks, p.grid.y));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanEmbed(int dim, int n, const DeviceLimits& lim) {
  LaunchPlan p = Named("embed", "dim=" + Str(dim) + " n=" + Str(n));
  if (dim < 1 || n < 1) return PlanError(p, "dim and n must be >= 1");
  p.block.x = kElementwiseThreads;
  p.grid.x = GridDim(std::min(CeilDiv(dim, kElementwiseThreads), kElementwiseMaxBlocks));
  p.grid.y = GridDim(n);
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanElementwise(const char* name, int64_t n, const DeviceLimits& lim) {
  LaunchPlan p = Named(name, "n=" + Str(n));
  if (n < 1) return PlanError(p, "n must be >= 1");
  p.block.x = kElementwiseThreads;
  p.grid.x = GridDim(std::min(CeilDiv(n, kElementwiseThreads), kElementwiseMaxBlocks));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanFlashAttention(int n_heads, int n_kv_heads, int head_size, int n_queries,
                                      const DeviceLimits& lim) {
  LaunchPlan p = Named("attention_flash", "heads=" + Str(n_heads) + " kv_heads=" + Str(n_kv_heads) +
                                              " head_size=" + Str(head_size) + " queries=" + Str(n_queries));
  if (n_heads < 1 || n_kv_heads < 1 || n_queries < 1) return PlanError(p, "heads, kv_heads and queries must be >= 1");
  if (n_heads % n_kv_heads != 0) return PlanError(p, "heads must be a multiple of kv_heads");
  if (!flash::HeadSizeFits(head_size)) return PlanError(p, "head_size must be 64, 96 or 128 (the kernel's instances)");
  if (lim.compute_major > 0 && lim.compute_major < 8)
    return PlanError(
        p, "TF32 mma.sync needs compute capability 8.0 or later (this device: " + Str(lim.compute_major) + ".x)");
  p.tile = flash::kKeyTile;
  p.block.x = static_cast<uint32_t>(flash::kWarps * lim.warp_size);
  p.grid.x = GridDim(CeilDiv(n_queries, flash::kBlockRows));
  p.grid.y = GridDim(n_heads);
  p.shared_bytes = 2 * static_cast<size_t>(flash::kKeyTile) * flash::SharedStride(head_size) * sizeof(float);
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanCausalSoftmax(int heads, int T, int64_t n, const DeviceLimits& lim) {
  LaunchPlan p = Named("causal_softmax", "heads=" + Str(heads) + " T=" + Str(T) + " n=" + Str(n));
  if (heads < 1 || T < 1 || n < T) return PlanError(p, "heads, T >= 1 and n >= T required");
  p.block.x = static_cast<uint32_t>(ReductionThreads(n, lim));
  p.grid.x = GridDim(T);
  p.grid.y = GridDim(heads);
  p.shared_bytes = (p.block.x / lim.warp_size) * sizeof(float);  // one partial per warp
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanRmsnorm(int rows, int size, const DeviceLimits& lim) {
  LaunchPlan p = Named("rmsnorm", "rows=" + Str(rows) + " size=" + Str(size));
  if (rows < 1 || size < 1) return PlanError(p, "rows and size must be >= 1");
  p.block.x = static_cast<uint32_t>(ReductionThreads(size, lim));
  p.grid.x = GridDim(rows);
  p.shared_bytes = (p.block.x / lim.warp_size) * sizeof(float);  // one partial sum per warp
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanRope(int rows, int size, int head_size, const DeviceLimits& lim) {
  LaunchPlan p = Named("rope", "rows=" + Str(rows) + " size=" + Str(size) + " head_size=" + Str(head_size));
  if (rows < 1 || size < 1 || head_size < 2) return PlanError(p, "rows, size >= 1 and head_size >= 2 required");
  if (head_size % 2 != 0 || size % head_size != 0) return PlanError(p, "head_size must be even and divide size");
  const int64_t pairs = size / 2;
  p.block.x = kElementwiseThreads;
  p.grid.x = GridDim(std::min(CeilDiv(pairs, kElementwiseThreads), kElementwiseMaxBlocks));
  p.grid.y = GridDim(rows);
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanRopeCache(int rows, int q_width, int kv_width, int head_size, const DeviceLimits& lim) {
  LaunchPlan p = Named("rope_cache", "rows=" + Str(rows) + " q_width=" + Str(q_width) + " kv_width=" + Str(kv_width) +
                                         " head_size=" + Str(head_size));
  if (rows < 1 || q_width < 1 || kv_width < 1 || head_size < 2)
    return PlanError(p, "rows, q_width, kv_width >= 1 and head_size >= 2 required");
  if (head_size % 2 != 0 || q_width % head_size != 0 || kv_width % head_size != 0)
    return PlanError(p, "head_size must be even and divide q_width and kv_width");
  const int64_t work = int64_t{q_width} / 2 + kv_width / 2 + kv_width;
  p.block.x = kElementwiseThreads;
  p.grid.x = GridDim(std::min(CeilDiv(work, kElementwiseThreads), kElementwiseMaxBlocks));
  p.grid.y = GridDim(rows);
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanAttention(int n_heads, int n_kv_heads, int head_size, int n_queries, int64_t n_positions,
                                 const DeviceLimits& lim) {
  LaunchPlan p = Named(n_queries == 1 ? "attention_decode" : "attention_prefill",
                       "heads=" + Str(n_heads) + " kv_heads=" + Str(n_kv_heads) + " head_size=" + Str(head_size) +
                           " queries=" + Str(n_queries) + " positions=" + Str(n_positions));
  if (n_heads < 1 || n_kv_heads < 1 || head_size < 1 || n_queries < 1)
    return PlanError(p, "heads, kv_heads, head_size and queries must be >= 1");
  if (n_heads % n_kv_heads != 0) return PlanError(p, "heads must be a multiple of kv_heads");
  if (n_positions < n_queries) return PlanError(p, "positions must be >= queries (each query sees itself)");
  p.tile = static_cast<int>(std::min<int64_t>(kAttentionTile, n_positions));
  p.block.x = static_cast<uint32_t>(ReductionThreads(std::max<int64_t>(head_size, p.tile), lim));
  p.block.x = std::min<uint32_t>(p.block.x, 256);  // enough for a tile; more only idles at the reductions
  p.grid.x = GridDim(n_heads);
  p.grid.y = GridDim(n_queries);
  // Shared: the query, the output accumulator, one tile of scores, one float per warp for reductions.
  p.shared_bytes = (2 * static_cast<size_t>(head_size) + p.tile + p.block.x / lim.warp_size) * sizeof(float);
  return Checked(std::move(p), lim);
}

static_assert(kDecodeAttentionThreads >= kDecodeMaxHeadSize, "the combine gives each head value a thread");

Result<LaunchPlan> PlanDecodeAttention(int n_heads, int n_kv_heads, int head_size, int64_t capacity,
                                       const DeviceLimits& lim) {
  LaunchPlan p = Named("attention_decode_split", "heads=" + Str(n_heads) + " kv_heads=" + Str(n_kv_heads) +
                                                     " head_size=" + Str(head_size) + " capacity=" + Str(capacity));
  if (n_heads < 1 || n_kv_heads < 1 || head_size < 1 || capacity < 1)
    return PlanError(p, "heads, kv_heads, head_size and capacity must be >= 1");
  if (n_heads % n_kv_heads != 0) return PlanError(p, "heads must be a multiple of kv_heads");
  if (head_size > kDecodeMaxHeadSize)
    return PlanError(p, "head_size " + Str(head_size) + " exceeds " + Str(kDecodeMaxHeadSize) +
                            " (a lane's registers); the tiled kernel (PlanAttention) takes it");
  p.tile = kDecodeChunk;
  p.block.x = static_cast<uint32_t>(kDecodeAttentionThreads);  // >= head_size: one thread per value at the combine
  p.grid.x = GridDim(n_heads);
  p.grid.y = GridDim(CeilDiv(capacity, kDecodeChunk));
  // Shared: one chunk of scores, each warp's accumulated values, one float per warp for reductions.
  const size_t warps = p.block.x / lim.warp_size;
  p.shared_bytes = (kDecodeChunk + warps * static_cast<size_t>(head_size) + warps) * sizeof(float);
  return Checked(std::move(p), lim);
}

LaneShape DecodeAttentionLaneShape(int head_size) {
  switch (head_size) {
    case 64: return {2, 1};
    case 128: return {4, 1};
    case 256: return {4, 2};
    default: return {1, kDecodeMaxHeadSize / 32};
  }
}

Result<LaunchPlan> PlanDecodeAttentionRows(int n_heads, int n_kv_heads, int head_size, int64_t capacity, int rows,
                                           const DeviceLimits& lim) {
  VERITY_ASSIGN_OR_RETURN(LaunchPlan p, PlanDecodeAttention(n_heads, n_kv_heads, head_size, capacity, lim));
  p.shape += " rows=" + Str(rows);
  if (rows < 1) return PlanError(p, "rows must be >= 1");
  p.grid.z = GridDim(rows);
  return Checked(std::move(p), lim);
}

int64_t DecodeAttentionPartialFloats(const LaunchPlan& plan, int head_size) {
  return int64_t{plan.grid.x} * plan.grid.y * plan.grid.z * (head_size + 2);
}

Result<LaunchPlan> PlanSwiGLU(int64_t n, const DeviceLimits& lim) {
  LaunchPlan p = Named("swiglu", "n=" + Str(n));
  if (n < 1) return PlanError(p, "n must be >= 1");
  p.block.x = kElementwiseThreads;
  p.grid.x = GridDim(std::min(CeilDiv(n, kElementwiseThreads), kElementwiseMaxBlocks));
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanMoeTopK(int rows, int n_experts, int k, const DeviceLimits& lim) {
  LaunchPlan p = Named("moe_topk", "rows=" + Str(rows) + " experts=" + Str(n_experts) + " k=" + Str(k));
  if (rows < 1 || n_experts < 1 || k < 1 || k > n_experts)
    return PlanError(p, "rows >= 1 and 1 <= k <= experts required");
  p.block.x = static_cast<uint32_t>(lim.warp_size);  // one warp; its first thread selects (n_experts is small)
  p.grid.x = GridDim(rows);
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanArgmax(int64_t n, const DeviceLimits& lim) {
  LaunchPlan p = Named("argmax", "n=" + Str(n));
  if (n < 1 || n > 2147483647) return PlanError(p, "n must be in [1, 2^31-1]");
  p.block.x = static_cast<uint32_t>(ReductionThreads(n, lim));
  p.shared_bytes = (p.block.x / lim.warp_size) * (sizeof(float) + sizeof(int));  // best value and index per warp
  return Checked(std::move(p), lim);
}

Result<LaunchPlan> PlanArgmaxRows(int rows, int64_t n, const DeviceLimits& lim) {
  VERITY_ASSIGN_OR_RETURN(LaunchPlan p, PlanArgmax(n, lim));
  p.shape += " rows=" + Str(rows);
  if (rows < 1) return PlanError(p, "rows must be >= 1");
  p.grid.x = GridDim(rows);
  return Checked(std::move(p), lim);
}

}  // namespace verity::kernels::cuda
