// The CUDA kernels' launch plans (kernels/cuda/launch_plan.h), on the CPU:
// every shape of the table gets a configuration that fits an sm_80/sm_90
// device, contexts past 64k included, and shapes that cannot fit fail with an
// error naming the kernel, the shape and the limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

const DeviceLimits kLimits;  // sm_80 / sm_90 without the shared-memory opt-in

// Asserts `r` is a valid plan (Validate agrees) and returns it.
LaunchPlan Ok(const Result<LaunchPlan>& r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_TRUE(Validate(r.value(), kLimits).ok());
  return r.value();
}

void ExpectError(const Result<LaunchPlan>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

// Model shapes: stories260K, stories110M, Llama-3-8B, Llama-2-70B (GQA),
// Mixtral-8x7B, and a 1B-class synthetic one.
struct Shape {
  const char* name;
  int dim, hidden, heads, kv_heads, vocab;
};
const Shape kShapes[] = {{"stories260K", 64, 172, 8, 4, 512},       {"stories110M", 768, 2048, 12, 12, 32000},
                         {"llama3-8B", 4096, 14336, 32, 8, 128256}, {"llama2-70B", 8192, 28672, 64, 8, 32000},
                         {"mixtral", 4096, 14336, 32, 8, 32000},    {"synth-1B", 2048, 5632, 32, 4, 32000}};
// Contexts (positions attended) including past 64k and 1M.
const int64_t kContexts[] = {1, 2, 255, 1024, 1025, 4096, 65535, 65536, 65537, 131072, 1 << 20};

TEST(CudaPlan, EveryShapeOfTheTableFits) {
  int plans = 0;
  for (const Shape& s : kShapes) {
    const int hs = s.dim / s.heads;
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
      const int ffn = (s.hidden + 31) / 32 * 32;  // q8_0 pads the FFN width (Model::ffn_dim)
      for (auto [rows, cols] : {std::pair{s.dim, s.dim}, {ffn, s.dim}, {s.dim, ffn}, {s.vocab, s.dim}}) {
        if (cols % 8 == 0)
          for (int T : {1, 8, 32}) {
            LaunchPlan r = Ok(PlanRows(t, rows, cols, T, kLimits));
            const int per_warp = T == 1 ? kRowsForms[DefaultRowsForm(t)].rows_per_warp : kBatchedRowsPerWarp;
            EXPECT_EQ(r.rows_per_warp, per_warp) << s.name;
            EXPECT_GE(static_cast<int64_t>(r.grid.y) * r.grid.z * kMatvecWarps * per_warp, rows) << s.name;
            EXPECT_LT((static_cast<int64_t>(r.grid.y) * r.grid.z - 1) * kMatvecWarps * per_warp, rows) << s.name;
            EXPECT_GE(static_cast<int64_t>(r.grid.x) * r.tile, T) << s.name;
            EXPECT_EQ(r.tile, T == 1 ? 1 : kMatmulRowsPerWarp);
            plans++;
          }
        LaunchPlan p = Ok(PlanMatvec(t, rows, cols, kLimits));
        EXPECT_GE(static_cast<int64_t>(p.grid.x) * kMatvecWarps, rows) << s.name;  // every row has a warp
        for (int T : {1, 7, 8, 64}) {
          LaunchPlan b = Ok(PlanMatmulBatch(t, rows, cols, T, kLimits));
          EXPECT_GE(static_cast<int64_t>(b.grid.y) * kMatmulRowsPerWarp, T);
          plans++;
        }
        plans++;
      }
    }
    for (int rows : {1, 64}) {
      LaunchPlan e = Ok(PlanEmbed(s.dim, rows, kLimits));
      EXPECT_EQ(e.grid.y, static_cast<uint32_t>(rows));
      for (const char* op : {"add", "axpy", "divide"}) Ok(PlanElementwise(op, int64_t{rows} * s.dim, kLimits));
      Ok(PlanRmsnorm(rows, s.dim, kLimits));
      Ok(PlanRope(rows, s.dim, hs, kLimits));
      Ok(PlanRope(rows, s.kv_heads * hs, hs, kLimits));
      if (rows >= 16) {
        const LaunchPlan sm = Ok(PlanCausalSoftmax(s.heads, rows, int64_t{rows} + 4096, kLimits));
        EXPECT_EQ(sm.grid.x, static_cast<uint32_t>(rows));
        EXPECT_EQ(sm.grid.y, static_cast<uint32_t>(s.heads));
      }
      LaunchPlan rc = Ok(PlanRopeCache(rows, s.dim, s.kv_heads * hs, hs, kLimits));
      // One thread per q pair, key pair and value float: the grid covers them all (or loops).
      EXPECT_GE(int64_t{rc.grid.x} * rc.block.x, std::min<int64_t>(s.dim / 2 + s.kv_heads * hs / 2 + s.kv_heads * hs,
                                                                   kElementwiseMaxBlocks * rc.block.x));
      EXPECT_EQ(rc.grid.y, static_cast<uint32_t>(rows));
      Ok(PlanSwiGLU(static_cast<int64_t>(rows) * s.hidden, kLimits));
      plans += 4;
    }
    Ok(PlanArgmax(s.vocab, kLimits));
    plans++;
    for (int64_t n : kContexts) {
      LaunchPlan d = Ok(PlanAttention(s.heads, s.kv_heads, hs, 1, n, kLimits));
      EXPECT_EQ(d.grid.x, static_cast<uint32_t>(s.heads));
      EXPECT_LE(d.tile, kAttentionTile);  // shared memory holds one tile, never the context
      EXPECT_LE(d.shared_bytes, (2 * hs + kAttentionTile + 32) * sizeof(float));
      if (n >= 64) {
        LaunchPlan pf = Ok(PlanAttention(s.heads, s.kv_heads, hs, 64, n, kLimits));
        EXPECT_EQ(pf.kernel, "attention_prefill");
        EXPECT_EQ(pf.grid.y, 64u);
        plans++;
      }
      plans++;
    }
  }
  Ok(PlanMoeTopK(64, 8, 2, kLimits));
  Ok(PlanMoeTopK(1, 256, 8, kLimits));
  plans += 2;
  std::printf("cuda plans: %d shapes planned and validated\n", plans);
  EXPECT_GT(plans, 300);
}

// VERITY_CUDA_PREFILL_BLOCK's text: 512 unset, a multiple of 16 from 16 to
// 8192 taken as is, anything else refused with the variable and the value.
TEST(CudaPlan, PrefillBlockIsAMultipleOf16OrAnErrorNamingIt) {
  EXPECT_EQ(PrefillBlockFromText("").value(), 512);
  for (int n : {16, 32, 512, 1024, 2048, 8192}) EXPECT_EQ(PrefillBlockFromText(std::to_string(n)).value(), n);
  for (const char* bad : {"0", "8", "100", "8208", "99999", "2048x", "-512", " 512", "1e3", "4096.0", "123456"}) {
    auto r = PrefillBlockFromText(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("VERITY_CUDA_PREFILL_BLOCK='") + bad +
                                        "': positions per prefill pass must be a multiple of 16 from 16 to 8192");
  }
}

TEST(CudaPlan, AttentionPast64kIsTheSameLaunchAsAShortOne) {
  // The configuration stops depending on the context once it exceeds a tile.
  LaunchPlan a = Ok(PlanAttention(32, 8, 128, 1, 4096, kLimits));
  for (int64_t n : {65537LL, 131072LL, 1LL << 20, 1LL << 30}) {
    LaunchPlan b = Ok(PlanAttention(32, 8, 128, 1, n, kLimits));
    EXPECT_EQ(b.shared_bytes, a.shared_bytes) << n;
    EXPECT_EQ(b.grid.x, a.grid.x);
    EXPECT_EQ(b.block.x, a.block.x);
    EXPECT_EQ(b.tile, kAttentionTile);
  }
  // A short context uses a tile no longer than itself.
  EXPECT_EQ(Ok(PlanAttention(8, 4, 8, 1, 3, kLimits)).tile, 3);
}

TEST(CudaPlan, ShapesThatCannotFitNameKernelShapeAndLimit) {
  // Prefill blocks beyond grid.y's 65535.
  ExpectError(PlanAttention(32, 8, 128, 70000, 70000, kLimits), "grid.y=70000 is outside [1, 65535]");
  ExpectError(PlanAttention(32, 8, 128, 70000, 70000, kLimits), "kernel attention_prefill (heads=32");
  // A head too large for 48 KiB of shared memory.
  ExpectError(PlanAttention(1, 1, 16384, 1, 10, kLimits), "bytes of shared memory exceed the per-block maximum 49152");
  // A device with less shared memory than a tile needs.
  DeviceLimits small;
  small.max_shared_per_block = 1024;
  ExpectError(PlanAttention(8, 8, 64, 1, 100000, small), "kernel attention_decode (heads=8 kv_heads=8 head_size=64");
  // A device allowing fewer threads than a matvec block.
  DeviceLimits narrow;
  narrow.max_threads_per_block = 128;
  narrow.max_block_dim[0] = 128;
  ExpectError(PlanMatvec(DType::kBF16, 4096, 4096, narrow), "block.x=256 is outside [1, 128]");
  // More rows than grid.x can hold on a device with a small grid.
  DeviceLimits tiny_grid;
  tiny_grid.max_grid_dim[0] = 100;
  ExpectError(PlanMatvec(DType::kF32, 32000, 64, tiny_grid),
              "kernel matvec_f32 (rows=32000 cols=64 dtype=f32): grid.x=4000");
  // Shape errors.
  ExpectError(PlanMatvec(DType::kQ8_0, 64, 48, kLimits), "q8_0 needs cols to be a multiple of 32");
  {
    // Past grid.y's limit the row blocks continue along z.
    LaunchPlan big = PlanRows(DType::kBF16, 1 << 20, 64, 1, kLimits).value();
    EXPECT_EQ(big.grid.y, 65535u);
    EXPECT_EQ(big.grid.z, 3u);  // 131072 row blocks of 8 rows
  }
  ExpectError(PlanRows(DType::kBF16, 64, 172, 1, kLimits),
              "kernel rows_bf16 (rows=64 cols=172 T=1 dtype=bf16): cols must be a multiple of 8");
  ExpectError(PlanRows(DType::kQ8_0, 64, 48, 8, kLimits), "q8_0 needs cols to be a multiple of 32");
  ExpectError(PlanEmbed(0, 1, kLimits), "dim and n must be >= 1");
  ExpectError(PlanElementwise("add", 0, kLimits), "kernel add (n=0): n must be >= 1");
  ExpectError(PlanAttention(6, 4, 8, 1, 5, kLimits), "heads must be a multiple of kv_heads");
  ExpectError(PlanAttention(8, 4, 8, 4, 2, kLimits), "positions must be >= queries");
  ExpectError(PlanRope(1, 10, 4, kLimits), "head_size must be even and divide size");
  ExpectError(PlanCausalSoftmax(8, 16, 15, kLimits), "heads, T >= 1 and n >= T required");
  ExpectError(PlanRopeCache(1, 64, 24, 16, kLimits), "head_size must be even and divide q_width and kv_width");
  ExpectError(PlanRopeCache(0, 64, 32, 16, kLimits), "rows, q_width, kv_width >= 1 and head_size >= 2 required");
  ExpectError(PlanMoeTopK(1, 4, 5, kLimits), "1 <= k <= experts");
  ExpectError(PlanArgmax(0, kLimits), "n must be in [1, 2^31-1]");
  ExpectError(PlanSwiGLU(0, kLimits), "n must be >= 1");
}

// The split decode attention's launch is fixed by the cache's capacity (the
// model's seq_len): a recorded decode step replays it at every position, so
// nothing about it may follow the position; blocks past the position exit.
TEST(CudaPlan, DecodeAttentionGridIsFixedByTheCapacityNotThePosition) {
  int plans = 0;
  for (const Shape& s : kShapes) {
    const int hs = s.dim / s.heads;
    for (int64_t capacity : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{2048}, int64_t{4096},
                             int64_t{65537}, int64_t{131072}, int64_t{1} << 20}) {
      LaunchPlan p = Ok(PlanDecodeAttention(s.heads, s.kv_heads, hs, capacity, kLimits));
      EXPECT_EQ(p.kernel, "attention_decode_split");
      EXPECT_EQ(p.grid.x, static_cast<uint32_t>(s.heads)) << s.name;
      EXPECT_EQ(p.grid.y, static_cast<uint32_t>((capacity + kDecodeChunk - 1) / kDecodeChunk))
          << s.name << " " << capacity;
      EXPECT_EQ(p.block.x, static_cast<uint32_t>(kDecodeAttentionThreads));
      EXPECT_EQ(p.tile, kDecodeChunk);
      // Shared memory: one chunk of scores and the warps' sums, whatever the context.
      EXPECT_EQ(p.shared_bytes, (kDecodeChunk + 8 * static_cast<size_t>(hs) + 8) * sizeof(float));
      EXPECT_EQ(DecodeAttentionPartialFloats(p, hs), int64_t{s.heads} * p.grid.y * (hs + 2));
      plans++;
    }
  }
  // A batched step's rows: the single row's launch once per row along z, partials for each.
  const LaunchPlan one = Ok(PlanDecodeAttention(32, 8, 128, 4096, kLimits));
  const LaunchPlan rows = Ok(PlanDecodeAttentionRows(32, 8, 128, 4096, 32, kLimits));
  EXPECT_EQ(rows.grid.x, one.grid.x);
  EXPECT_EQ(rows.grid.y, one.grid.y);
  EXPECT_EQ(rows.grid.z, 32u);
  EXPECT_EQ(rows.shared_bytes, one.shared_bytes);
  EXPECT_EQ(DecodeAttentionPartialFloats(rows, 128), 32 * DecodeAttentionPartialFloats(one, 128));
  EXPECT_FALSE(PlanDecodeAttentionRows(32, 8, 128, 4096, 0, kLimits).ok());
  EXPECT_FALSE(PlanDecodeAttentionRows(32, 8, 128, 4096, 70000, kLimits).ok()) << "grid.z's limit";
  // 1M positions: 4096 chunks, the same block and shared memory as 256 positions.
  const LaunchPlan a = Ok(PlanDecodeAttention(32, 8, 128, 256, kLimits)),
                   b = Ok(PlanDecodeAttention(32, 8, 128, 1 << 20, kLimits));
  EXPECT_EQ(a.grid.y, 1u);
  EXPECT_EQ(b.grid.y, 4096u);
  EXPECT_EQ(a.shared_bytes, b.shared_bytes);
  EXPECT_EQ(a.block.x, b.block.x);
  std::printf("cuda plans: %d split decode attention plans, grid.y from the capacity alone\n", plans);
}

TEST(CudaPlan, DecodeAttentionFitsEveryHeadUpTo256) {
  size_t most = 0;
  for (int hs = 1; hs <= kDecodeMaxHeadSize; hs++) {
    LaunchPlan p = Ok(PlanDecodeAttention(4, 2, hs, 4096, kLimits));
    EXPECT_LE(p.shared_bytes, kLimits.max_shared_per_block) << hs;
    EXPECT_GE(static_cast<int>(p.block.x), hs) << "the combine gives each head value a thread";
    most = std::max(most, p.shared_bytes);
    // The lane shape covers each head value exactly once (values past the head are not loaded).
    const LaneShape ls = DecodeAttentionLaneShape(hs);
    if (ls.vec > 1) {
      EXPECT_EQ(32 * ls.vec * ls.nv, hs) << "a vector shape fills the head exactly";
    }
    EXPECT_GE(32 * ls.vec * ls.nv, hs);
    std::vector<int> seen(hs, 0);
    for (int lane = 0; lane < 32; lane++)
      for (int r = 0; r < ls.nv; r++)
        for (int i = 0; i < ls.vec; i++) {
          const int e = ew::LaneValue(r, lane, i, ls.vec);
          if (e < hs) seen[e]++;
        }
    for (int e = 0; e < hs; e++) ASSERT_EQ(seen[e], 1) << "head_size " << hs << " value " << e;
  }
  EXPECT_EQ(DecodeAttentionLaneShape(64).vec, 2);
  EXPECT_EQ(DecodeAttentionLaneShape(128).vec, 4);
  EXPECT_EQ(DecodeAttentionLaneShape(256).nv, 2);
  std::printf("cuda plans: split decode attention for heads 1..%d, at most %zu bytes of shared memory\n",
              kDecodeMaxHeadSize, most);
}

TEST(CudaPlan, DecodeAttentionRefusesByNameWhatItCannotTake) {
  ExpectError(
      PlanDecodeAttention(8, 8, 257, 4096, kLimits),
      "kernel attention_decode_split (heads=8 kv_heads=8 head_size=257 capacity=4096): head_size 257 exceeds 256");
  ExpectError(PlanDecodeAttention(6, 4, 64, 4096, kLimits), "heads must be a multiple of kv_heads");
  ExpectError(PlanDecodeAttention(8, 8, 64, 0, kLimits), "capacity must be >= 1");
  ExpectError(PlanDecodeAttention(0, 1, 64, 10, kLimits), "heads, kv_heads, head_size and capacity must be >= 1");
  // More chunks than grid.y holds: 65536 chunks of 256.
  ExpectError(PlanDecodeAttention(8, 8, 64, int64_t{65536} * kDecodeChunk, kLimits),
              "grid.y=65536 is outside [1, 65535]");
  Ok(PlanDecodeAttention(8, 8, 64, int64_t{65535} * kDecodeChunk, kLimits));
  // A device with less shared memory than a chunk needs, or smaller blocks.
  DeviceLimits small;
  small.max_shared_per_block = 4096;
  ExpectError(PlanDecodeAttention(8, 8, 256, 4096, small), "bytes of shared memory exceed the per-block maximum 4096");
  DeviceLimits narrow;
  narrow.max_threads_per_block = 128;
  narrow.max_block_dim[0] = 128;
  ExpectError(PlanDecodeAttention(8, 8, 64, 4096, narrow), "kernel attention_decode_split");
}

TEST(CudaPlan, ValidateChecksEveryLimit) {
  LaunchPlan p;
  p.kernel = "k";
  p.shape = "s";
  p.block.x = 64;
  EXPECT_TRUE(Validate(p, kLimits).ok());
  p.block.x = 48;  // not a warp multiple
  EXPECT_NE(Validate(p, kLimits).message().find("not a multiple of the warp size 32"), std::string::npos);
  p.block = {32, 32, 2};  // 2048 threads
  EXPECT_NE(Validate(p, kLimits).message().find("2048 threads per block exceed the maximum 1024"), std::string::npos);
  p.block = {32, 1, 65};
  EXPECT_NE(Validate(p, kLimits).message().find("block.z=65 is outside [1, 64]"), std::string::npos);
  p.block = {32, 1, 1};
  p.grid.z = 0;
  EXPECT_NE(Validate(p, kLimits).message().find("grid.z=0 is outside"), std::string::npos);
  p.grid.z = 1;
  p.shared_bytes = 48 * 1024 + 1;
  EXPECT_NE(Validate(p, kLimits).message().find("49153 bytes of shared memory"), std::string::npos);
}

TEST(CudaPlan, ElementwiseGridsAreCappedAndLoop) {
  // 2^31 values: the grid is capped, the kernel's grid-stride loop covers the rest.
  LaunchPlan p = Ok(PlanSwiGLU(int64_t{1} << 31, kLimits));
  EXPECT_EQ(p.grid.x, static_cast<uint32_t>(kElementwiseMaxBlocks));
  LaunchPlan r = Ok(PlanRope(64, 8192, 128, kLimits));
  EXPECT_EQ(r.grid.x, 16u);  // 4096 pairs / 256 threads
  EXPECT_EQ(r.grid.y, 64u);
}

// Every (vector, row) of every stacked target is written by exactly one warp
// of a PlanRows launch, walking the rows kernel's own mapping (work_map.h)
// over the plan's whole grid: q/k/v stacked, a lone matrix, ragged stacks,
// a decode step and batched steps of several sizes.
TEST(CudaPlan, RowsKernelWritesEveryOutputOnce) {
  const std::vector<std::vector<int>> stacks = {{2048, 256, 256}, {5632}, {64}, {1, 7, 9}, {32000}, {100, 3}};
  long outputs = 0;
  for (const std::vector<int>& stack : stacks)
    for (int T : {1, 5, 8, 13, 32})
      for (int form = 0; form < (T == 1 ? kRowsFormCount : 1); form++) {
        std::vector<int> begin = {0};
        for (int r : stack) begin.push_back(begin.back() + r);
        const int count = static_cast<int>(stack.size()), total = begin.back();
        const LaunchPlan p = Ok(PlanRows(DType::kBF16, total, 64, T, kLimits, form));
        EXPECT_EQ(p.rows_per_warp, T == 1 ? kRowsForms[form].rows_per_warp : kBatchedRowsPerWarp);
        const int R = p.rows_per_warp, NT = p.tile, warps = static_cast<int>(p.block.x) / 32;
        std::vector<std::vector<int>> written(count);
        for (int i = 0; i < count; i++) written[i].assign(static_cast<size_t>(T) * stack[i], 0);
        auto begin_at = [&](int i) { return begin[i]; };
        for (unsigned x = 0; x < p.grid.x; x++)
          for (unsigned z = 0; z < p.grid.z; z++)
            for (unsigned y = 0; y < p.grid.y; y++)
              for (int warp = 0; warp < warps; warp++) {
                const int64_t first = map::FirstRow(y, z, p.grid.y, warps, warp, R);
                const int nt = std::min(NT, T - static_cast<int>(x) * NT);
                for (int k = 0; k < R && first + k < total; k++) {
                  const map::StackedRow at = map::Locate(begin_at, count, static_cast<int>(first + k));
                  const int rows = begin[at.target + 1] - begin[at.target];
                  for (int t = 0; t < nt; t++) {
                    const size_t o = map::OutputIndex(x, NT, t, rows, at.row);
                    ASSERT_LT(o, written[at.target].size()) << "T=" << T << " row " << first + k;
                    written[at.target][o]++;
                  }
                }
              }
        for (int i = 0; i < count; i++)
          for (size_t o = 0; o < written[i].size(); o++) {
            ASSERT_EQ(written[i][o], 1) << "target " << i << " of " << count << ", T=" << T << ", form " << form
                                        << ", output " << o;
            outputs++;
          }
      }
  std::printf("cuda plans: every one of %ld rows-kernel outputs written once\n", outputs);
}

// The tensor-core rows kernel's plan (mma_rows.cu; its arithmetic and
// coverage are simulated in cuda_elementwise_test): 32 rows a block (16
// with SwiGLU), 32 vectors a block along x, row blocks past grid.y's limit
// along z, shared memory within the default 48 KiB; other dtypes and widths
// refused by name.
TEST(CudaPlan, MmaRowsPlanCoversEveryRowAndVector) {
  for (DType t : {DType::kBF16, DType::kQ8_0})
    for (bool swiglu : {false, true})
      for (int rows : {1, 16, 2560, 5632, 128256, 2200000})
        for (int T : {1, 31, 32, 33, 64}) {
          const LaunchPlan p = Ok(PlanRowsMma(t, rows, 2048, T, swiglu, kLimits));
          EXPECT_EQ(p.tile, swiglu ? 16 : 32);
          EXPECT_EQ(p.block.x, static_cast<uint32_t>(kMmaRowsWarps * 32));
          EXPECT_LE(p.shared_bytes, kLimits.max_shared_per_block);
          EXPECT_EQ(p.grid.x, static_cast<uint32_t>((T + 31) / 32));
          const int64_t blocks = int64_t{p.grid.y} * p.grid.z;
          EXPECT_GE(blocks * p.tile, rows);
          EXPECT_LT((blocks - p.grid.y) * p.tile, rows) << "a whole z plane past the last row";
        }
  const auto f32 = PlanRowsMma(DType::kF32, 64, 64, 8, false, kLimits);
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.status().message().find("bf16 and q8_0 weights only"), std::string::npos) << f32.status().message();
  const auto odd = PlanRowsMma(DType::kBF16, 64, 172, 8, false, kLimits);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("cols=172"), std::string::npos) << odd.status().message();
  EXPECT_NE(odd.status().message().find("multiple of 32"), std::string::npos) << odd.status().message();
  DeviceLimits volta = kLimits;
  volta.compute_major = 7;
  const auto old_device = PlanRowsMma(DType::kBF16, 64, 64, 8, false, volta);
  ASSERT_FALSE(old_device.ok());
  EXPECT_NE(old_device.status().message().find("compute capability 8.0"), std::string::npos)
      << old_device.status().message();
}

// What a dependent rows launch asks L2 for before its wait
// (RowsPrefetchBytes): whole rows while the launch's weights fit in half
// the L2, else an equal share of that half, never under the 2 KB a row of
// before nor over the row, always whole 16-byte units (the bulk prefetch's),
// never more for more rows. Prints what the 1B's and 7B's decode products
// get on a 50 MB L2 (an H100's or H200's).
TEST(CudaPlan, RowsPrefetchIsWholeRowsWithinHalfTheL2) {
  long checked = 0;
  for (int64_t l2 : {int64_t{0}, int64_t{6} << 20, int64_t{40} << 20, int64_t{50} << 20, int64_t{96} << 20})
    for (int64_t row : {16, 64, 576, 2048, 2064, 4096, 8192, 11008, 22016, 65536})
      for (int64_t rows : {1, 7, 64, 2048, 2560, 4096, 11264, 12288, 22016, 128256, 2200000}) {
        const int64_t p = RowsPrefetchBytes(row, rows, l2);
        const std::string what = "row " + std::to_string(row) + " B x " + std::to_string(rows) + ", L2 " +
                                 std::to_string(l2) + ": " + std::to_string(p);
        EXPECT_EQ(p % 16, 0) << what;
        EXPECT_TRUE(p == row || p == kRowsPrefetchFloor || p % 128 == 0) << what << ": a share is whole lines";
        EXPECT_LE(p, row) << what;
        EXPECT_GE(p, std::min(row, kRowsPrefetchFloor)) << what;
        if (rows * row <= l2 / 2) {
          EXPECT_EQ(p, row) << what << ": the launch fits, so whole rows";
        }
        if (p > std::min(row, kRowsPrefetchFloor)) {
          EXPECT_LE(rows * p, l2 / 2) << what << ": past half the L2";
        }
        EXPECT_LE(RowsPrefetchBytes(row, rows + 1, l2), p) << what << ": more rows, more a row";
        checked++;
      }
  EXPECT_EQ(RowsPrefetchBytes(0, 64, int64_t{50} << 20), 0);
  EXPECT_EQ(RowsPrefetchBytes(4096, 0, int64_t{50} << 20), 0);
  // A launch's weight rows, and how many of them: gate/up's launch reads both matrices.
  struct Product {
    const char* name;
    int64_t row_bytes, rows;
  };
  const Product products[] = {{"1B q/k/v", 4096, 2560},    {"1B o", 4096, 2048},      {"1B gate/up", 4096, 11264},
                              {"1B down", 11264, 2048},    {"7B q/k/v", 8192, 12288}, {"7B o", 8192, 4096},
                              {"7B gate/up", 8192, 22016}, {"7B down", 22016, 4096}};
  std::string line;
  for (const Product& p : products) {
    const int64_t b = RowsPrefetchBytes(p.row_bytes, p.rows, int64_t{50} << 20);
    line += std::string(line.empty() ? "" : ", ") + p.name + " " +
            (b == p.row_bytes ? "whole" : std::to_string(b) + " of " + std::to_string(p.row_bytes) + " B");
  }
  std::printf("rows prefetch: %ld shapes checked; bf16 rows on a 50 MB L2: %s\n", checked, line.c_str());
  // A launch's rows as the backend counts them: SwiGLU reads two matrices,
  // a q8_0 row is its cols quants, and VERITY_CUDA_L2_PREFETCH=0 the floor.
  const int64_t l2 = int64_t{50} << 20;
  EXPECT_EQ(RowsLaunchPrefetch(DType::kBF16, 5632, 2048, 2, l2, true), RowsPrefetchBytes(4096, 11264, l2));
  EXPECT_LT(RowsLaunchPrefetch(DType::kBF16, 5632, 2048, 2, l2, true), 4096) << "1B gate/up: both matrices counted";
  EXPECT_EQ(RowsLaunchPrefetch(DType::kBF16, 5632, 2048, 1, l2, true), 4096) << "one 1B matrix fits";
  EXPECT_EQ(RowsLaunchPrefetch(DType::kQ8_0, 4096, 4096, 1, l2, true), 4096) << "a q8_0 row: its quants";
  EXPECT_EQ(RowsLaunchPrefetch(DType::kF32, 64, 288, 1, l2, true), 288 * 4);
  EXPECT_EQ(RowsLaunchPrefetch(DType::kBF16, 4096, 4096, 1, l2, false), kRowsPrefetchFloor);
  EXPECT_EQ(RowsLaunchPrefetch(DType::kQ8_0, 64, 288, 1, l2, false), 288) << "the floor, never past the row";
}

// A decode product that normalizes its input (PlanRowsNormed): the decode
// form's grid, shared memory for the normed row and the norm's warp sums;
// a row past the block's shared memory refused by name.
TEST(CudaPlan, NormedRowsPlanHoldsTheRowInSharedMemory) {
  for (DType t : {DType::kBF16, DType::kQ8_0})
    for (int cols : {288, 2048, 4096, 8192}) {
      const int threads = std::min(1024, (cols + 31) / 32 * 32);  // PlanRmsnorm's block for one row
      ASSERT_EQ(Ok(PlanRmsnorm(1, cols, kLimits)).block.x, static_cast<uint32_t>(threads));
      const LaunchPlan p = Ok(PlanRowsNormed(t, 3 * cols, cols, threads, kLimits));
      const LaunchPlan plain = Ok(PlanRows(t, 3 * cols, cols, 1, kLimits));
      EXPECT_EQ(p.grid.y, plain.grid.y);
      EXPECT_EQ(p.grid.z, plain.grid.z);
      EXPECT_EQ(p.rows_per_warp, plain.rows_per_warp);
      EXPECT_EQ(p.shared_bytes, (static_cast<size_t>(cols) + threads / 32) * sizeof(float));
    }
  const auto wide = PlanRowsNormed(DType::kBF16, 64, 16384, 1024, kLimits);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("does not fit"), std::string::npos) << wide.status().message();
  EXPECT_NE(wide.status().message().find("cols=16384"), std::string::npos) << wide.status().message();
  EXPECT_FALSE(PlanRowsNormed(DType::kBF16, 64, 2048, 100, kLimits).ok()) << "threads not whole warps";
}

// The flash-style prefill attention's plan (flash_attention.cu; its
// arithmetic is simulated in cuda_flash_test): 64 query rows a block of 4
// warps, a head along y, one tile of keys and values in shared memory within
// the default 48 KiB; other head sizes and pre-Ampere devices refused by name.
TEST(CudaPlan, FlashAttentionPlanCoversEveryRowAndHead) {
  for (int hs : {64, 96, 128})
    for (auto [heads, kv_heads] : {std::pair{32, 8}, {32, 32}, {64, 8}, {8, 1}})
      for (int T : {1, 16, 63, 64, 65, 512, 2048}) {
        const LaunchPlan p = Ok(PlanFlashAttention(heads, kv_heads, hs, T, kLimits));
        EXPECT_EQ(p.block.x, 128u);
        EXPECT_EQ(p.grid.y, static_cast<uint32_t>(heads));
        EXPECT_GE(int64_t{p.grid.x} * 64, T);
        EXPECT_LT(int64_t{p.grid.x - 1} * 64, T) << "a block past the last row";
        EXPECT_LE(p.shared_bytes, kLimits.max_shared_per_block);
        EXPECT_EQ(p.shared_bytes, 2u * 32 * (hs + 4) * sizeof(float));
      }
  const auto odd = PlanFlashAttention(32, 8, 80, 512, kLimits);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("head_size=80"), std::string::npos) << odd.status().message();
  EXPECT_NE(odd.status().message().find("64, 96 or 128"), std::string::npos) << odd.status().message();
  const auto ragged = PlanFlashAttention(12, 8, 64, 512, kLimits);
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("multiple of kv_heads"), std::string::npos) << ragged.status().message();
  DeviceLimits volta = kLimits;
  volta.compute_major = 7;
  const auto old_device = PlanFlashAttention(32, 8, 128, 512, volta);
  ASSERT_FALSE(old_device.ok());
  EXPECT_NE(old_device.status().message().find("compute capability 8.0"), std::string::npos)
      << old_device.status().message();
}

// The Q4_K / Q6_K products (block_rows.h): every (vector, row) written by
// exactly one warp, walking the kernel's mapping over the whole grid, for a
// decode step and batched steps, on the Q4_K_M shapes of the table; other
// block types and rows that are not whole blocks refused by name.
TEST(CudaPlan, BlockRowsKernelWritesEveryOutputOnce) {
  long outputs = 0;
  for (uint32_t type : {12u, 14u})
    for (int rows : {1, 9, 768, 2048, 32000})
      for (int T : {1, 5, 8, 13, 32}) {
        const LaunchPlan p = Ok(PlanBlockRows(type, rows, 768, T, kLimits));
        EXPECT_EQ(p.kernel, type == 12 ? "block_rows_q4_k" : "block_rows_q6_k");
        EXPECT_EQ(p.tile, T == 1 ? 1 : kMatmulRowsPerWarp);
        const int NT = p.tile, warps = static_cast<int>(p.block.x) / 32;
        std::vector<int> written(static_cast<size_t>(T) * rows, 0);
        for (unsigned x = 0; x < p.grid.x; x++)
          for (unsigned z = 0; z < p.grid.z; z++)
            for (unsigned y = 0; y < p.grid.y; y++)
              for (int warp = 0; warp < warps; warp++) {
                const int64_t row = map::FirstRow(y, z, p.grid.y, warps, warp, 1);
                if (row >= rows) continue;
                for (int t = 0; t < std::min(NT, T - static_cast<int>(x) * NT); t++)
                  written[map::OutputIndex(x, NT, t, rows, static_cast<int>(row))]++;
              }
        for (size_t o = 0; o < written.size(); o++, outputs++)
          ASSERT_EQ(written[o], 1) << "type " << type << " rows " << rows << " T " << T << " output " << o;
      }
  ExpectError(PlanBlockRows(13, 64, 256, 1, kLimits),
              "kernel block_rows_type13 (rows=64 cols=256 T=1 dtype=block type13): no kernel for ggml block type 13 "
              "(Q4_K and Q6_K only)");
  ExpectError(PlanBlockRows(12, 64, 288, 1, kLimits), "cols must be a multiple of 256 (whole blocks)");
  ExpectError(PlanBlockRows(14, 0, 256, 1, kLimits), "rows, cols and T must be >= 1");
  std::printf("cuda plans: every one of %ld block-rows outputs written once\n", outputs);
}

// The split decode attention over a batched step's rows: each (row, head)
// its own counter, each (row, head, chunk) its own partial, all inside the
// scratch the plan asks for (DecodeAttentionPartialFloats) and the counters
// the backend allocates (heads x rows).
TEST(CudaPlan, SplitAttentionRowsNeverShareScratch) {
  for (int rows : {1, 3, 32})
    for (auto [heads, hs, capacity] : {std::tuple{32, 128, 4096}, {8, 64, 600}, {4, 8, 256}}) {
      const LaunchPlan p =
          Ok(PlanDecodeAttentionRows(heads, heads / 2 > 0 ? heads / 2 : 1, hs, capacity, rows, kLimits));
      const int64_t floats = DecodeAttentionPartialFloats(p, hs);
      std::vector<int> partial(static_cast<size_t>(floats)), counter(static_cast<size_t>(heads) * rows);
      for (unsigned z = 0; z < p.grid.z; z++)
        for (unsigned h = 0; h < p.grid.x; h++) {
          const int64_t head = map::RowHead(z, p.grid.x, h);
          counter.at(static_cast<size_t>(head))++;
          for (unsigned y = 0; y < p.grid.y; y++) {
            const int64_t at = map::PartialsOf(head, p.grid.y, hs) + int64_t{y} * (hs + 2);
            for (int i = 0; i < hs + 2; i++) partial.at(static_cast<size_t>(at + i))++;
          }
        }
      EXPECT_EQ(std::count(partial.begin(), partial.end(), 1), floats) << rows << " rows, " << heads << " heads";
      EXPECT_EQ(std::count(counter.begin(), counter.end(), 1), static_cast<long>(counter.size()));
    }
}

// Every q value, key value and cached key and value of a row is written by
// exactly one work item of the rotate-and-cache kernel (work_map.h), in both
// RoPE layouts, for MHA and GQA widths.
TEST(CudaPlan, RotateAndCacheCoversEveryValueOnce) {
  for (auto [q_width, kv_width, hs] : {std::tuple{4096, 1024, 128}, {512, 512, 64}, {288, 96, 48}, {8, 8, 2}})
    for (bool interleaved : {false, true}) {
      std::vector<int> q(q_width), key(kv_width), cached_key(kv_width), cached_value(kv_width);
      for (int p = 0; p < map::RopeCacheWorkItems(q_width, kv_width); p++) {
        const map::RopeCacheItem item = map::RopeCacheWorkItem(p, q_width, kv_width);
        int a = -1, b = -1;
        if (item.kind == map::RopeCacheWork::kValue) {
          cached_value.at(item.index)++;
          continue;
        }
        map::RopePairOf(item.index, hs, interleaved, &a, &b);
        std::vector<int>& row = item.kind == map::RopeCacheWork::kQPair ? q : key;
        row.at(a)++, row.at(b)++;
        if (item.kind == map::RopeCacheWork::kKeyPair) cached_key.at(a)++, cached_key.at(b)++;
      }
      for (const std::vector<int>* v : {&q, &key, &cached_key, &cached_value})
        EXPECT_EQ(std::count(v->begin(), v->end(), 1), static_cast<long>(v->size()))
            << q_width << "/" << kv_width << " head " << hs << (interleaved ? " interleaved" : " halves");
    }
}

}  // namespace
}  // namespace verity::kernels::cuda
