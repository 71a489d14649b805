// q8_0 decode products on int16 x (kernels/cuda/q8_int.h; the rows kernel's
// DT 3, VERITY_CUDA_Q8_INT16=1) on the CPU: dp2a against the PTX ISA's
// statement, x's quants against simd::QuantizeX's, and whole rows computed
// warp step by warp step, lane by lane (a shuffle as a read of another
// lane's value), through q8_int.h's functions and the device layout's
// readers (q8_layout.h), against simd::MatVecQ8_0, bit for bit. The device
// test CudaDevice.Q8IntRowsGiveTheFastKernelsBits runs the kernel itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/q8_int.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/kernels.h"
#include "tests/float_values.h"

namespace verity::kernels::cuda {
namespace {

// PTX ISA, dp2a.mode.s32.s32: d = c + sext(a.h[0]) * sext(b.byte[s]) +
// sext(a.h[1]) * sext(b.byte[s + 1]), s = 0 (.lo) or 2 (.hi).
int Dp2Spec(uint32_t a, uint32_t b, int c, bool hi) {
  const int s = hi ? 2 : 0;
  int64_t d = c;
  for (int i = 0; i < 2; i++) {
    const auto ah = static_cast<int16_t>((a >> (16 * i)) & 0xffffu);
    const auto bb = static_cast<int8_t>((b >> (8 * (s + i))) & 0xffu);
    d += int64_t{ah} * bb;
  }
  return static_cast<int>(d);
}

TEST(CudaQ8Int, Dp2IsThePtxIsasTwoWayDot) {
  std::mt19937 rng(7);
  std::vector<uint32_t> words = {0u, 0xffffffffu, 0x80008000u, 0x7fff7fffu, 0x80807f7fu, 0x7f7f8080u, 0x00018000u};
  for (int i = 0; i < 2000; i++) words.push_back(rng());
  long checked = 0;
  for (uint32_t a : words)
    for (uint32_t b : {words[checked % words.size()], words[(checked * 7 + 3) % words.size()], 0x80808080u}) {
      const int c = static_cast<int>(rng() % 2000001) - 1000000;
      ASSERT_EQ(q8i::Dp2Lo(a, b, c), Dp2Spec(a, b, c, false)) << std::hex << a << " " << b;
      ASSERT_EQ(q8i::Dp2Hi(a, b, c), Dp2Spec(a, b, c, true)) << std::hex << a << " " << b;
      checked++;
    }
  // The extreme chunk: every quant -128, every x -32768: 16 x 2^22, exact.
  const uint32_t w[4] = {0x80808080u, 0x80808080u, 0x80808080u, 0x80808080u};
  const uint32_t x[4] = {0x80008000u, 0x80008000u, 0x80008000u, 0x80008000u};
  EXPECT_EQ(q8i::ChunkDot(w, x, x), 16 * 128 * 32768);
  std::printf("cuda q8 int16: dp2a lo and hi as the PTX ISA states them for %ld word pairs\n", checked);
}

// x's int16 quants and scales as QuantizeXShared (rows.cu) writes them:
// each block of 32 by one warp (fmaxf of |x|), each quant at XSlot.
struct SharedX {
  std::vector<int16_t> q;
  std::vector<float> scale;
  bool finite = true;
};
SharedX QuantizeLikeTheKernel(const float* x, int cols) {
  SharedX s;
  s.q.assign(static_cast<size_t>(cols), 0);
  s.scale.assign(static_cast<size_t>(cols / q8i::kBlock), 0.0f);
  for (int b = 0; b < cols / q8i::kBlock; b++) {
    float amax = 0.0f;
    for (int lane = 0; lane < 32; lane++) {
      s.finite = s.finite && std::isfinite(x[32 * b + lane]);
      amax = std::fmax(amax, std::fabs(x[32 * b + lane]));
    }
    for (int lane = 0; lane < 32; lane++)
      s.q[q8i::XSlot(32 * b + lane, cols)] = q8i::XQuant(x[32 * b + lane], q8i::XInverse(amax));
    s.scale[b] = q8i::XScale(amax);
  }
  return s;
}

// Where simd::QuantizedX keeps quant j: PackRowQ8_0's group layout (simd.h:
// block l of a group of 8 has its values 4k..4k+3 at step k, lane l), the
// blocks past the last whole group plain.
size_t CpuSlot(int j, int cols) {
  const int block = j / 32, groups = cols / 256;
  if (block >= groups * 8) return static_cast<size_t>(j);
  const int g = block / 8, l = block % 8, v = j % 32;
  return static_cast<size_t>(g * 256 + 32 * (v / 4) + 4 * l + v % 4);
}

// Four words from 8 int16 at q[at..at+7], as a lane's 16-byte shared load.
void Words(const std::vector<int16_t>& q, int at, uint32_t (&out)[4]) { std::memcpy(out, &q[at], 16); }

// One weight row's product as a warp of RowDotsQ8Int computes it: every
// step, each lane's chunk dot, the pair's add (shfl_xor 1), the block's
// value and scale, the chain lanes' folds of their own block and lane + 16's
// (shfl_down 16), the tail blocks kept by their lanes; then lane 0's
// Lanes8Sum of the chain lanes and the tail in column order.
float WarpRow(const unsigned char* dev, int rows, int cols, int row, const SharedX& x) {
  const unsigned char* quants = q8::RowQuants(dev, row, cols);
  const float* ws = q8::RowScales(dev, rows, cols, row);
  const int chunks = cols / q8i::kChunk, nb = cols / q8i::kBlock, grouped = nb / q8i::kGroup * q8i::kGroup;
  const int steps = (chunks + 31) / 32;
  float chain[32] = {}, tail_a[32] = {}, tail_s[32] = {};
  for (int i = 0; i < steps; i++) {
    int half[32];
    float a[32], s[32];
    for (int lane = 0; lane < 32; lane++) {
      const int c = 32 * i + lane;
      uint32_t w[4] = {}, lo[4] = {}, hi[4] = {};
      if (c < chunks) {
        std::memcpy(w, quants + 16 * c, 16);
        Words(x.q, q8i::ChunkLo(c), lo);
        Words(x.q, q8i::ChunkHi(c, cols), hi);
      }
      half[lane] = q8i::ChunkDot(w, lo, hi);
    }
    for (int lane = 0; lane < 32; lane++) {
      const int b = q8i::LaneBlock(i, lane);
      a[lane] = q8i::IntToFloat(half[lane] + half[lane ^ 1]);
      s[lane] = q8i::BlockScale(b < nb ? ws[b] : 0.0f, b < nb ? x.scale[b] : 0.0f);
    }
    for (int lane = 0; lane < q8i::kSecondGroupLanes; lane++)
      chain[lane] = q8i::FoldStep(chain[lane], i, lane >> 1, grouped, a[lane], s[lane],
                                  a[lane + q8i::kSecondGroupLanes], s[lane + q8i::kSecondGroupLanes]);
    for (int lane = 0; lane < 32; lane++) {
      const int b = q8i::LaneBlock(i, lane);
      if (b >= grouped && b < nb) tail_a[lane] = a[lane], tail_s[lane] = s[lane];
    }
  }
  float lanes[q8i::kGroup];
  for (int l = 0; l < q8i::kGroup; l++) lanes[l] = chain[q8i::ChainLane(l)];
  float total = q8i::Lanes8Sum(lanes);
  for (int b = grouped; b < nb; b++) total = q8i::Fold(total, tail_a[q8i::TailLane(b)], tail_s[q8i::TailLane(b)]);
  return x.finite ? total : std::numeric_limits<float>::quiet_NaN();
}

// x for a case: random, with (past the first block) an all-zero block, a
// block of exact rounding ties (amax 32767: x * 1 = k + 1/2, which rounds
// to even, not away from zero), from 128 columns a block whose largest |x|
// is 1e-36 (32767 / amax overflows: saturated quants, 0 x inf's NaN) and,
// for `scale` extremes, large or tiny values.
std::vector<float> CaseX(int cols, uint32_t seed, float scale) {
  std::vector<float> x = RandomNormal(static_cast<size_t>(cols), seed, scale);
  if (cols >= 96) {
    for (int j = 32; j < 64; j++) x[j] = 0.0f;
    for (int j = 64; j < 96; j++) x[j] = j == 64 ? 32767.0f : static_cast<float>(j - 80) + 0.5f;
  }
  if (cols >= 128)
    for (int j = 96; j < 128; j++) x[j] = j % 3 == 0 ? 0.0f : (j % 2 ? 1e-36f : -0.7e-36f);
  return x;
}

TEST(CudaQ8Int, XQuantsAreQuantizeXs) {
  long checked = 0;
  for (int cols : {32, 96, 288, 2048, 4096}) {
    for (float scale : {1.0f, 3e4f, 1e-20f}) {
      const std::vector<float> x = CaseX(cols, static_cast<uint32_t>(cols), scale);
      simd::QuantizedX want;
      simd::QuantizeX(x.data(), cols, &want);
      const SharedX got = QuantizeLikeTheKernel(x.data(), cols);
      ASSERT_TRUE(want.finite && got.finite);
      for (int b = 0; b < cols / 32; b++)
        ASSERT_EQ(FloatBits(got.scale[b]), FloatBits(want.scale[b])) << cols << " block " << b;
      for (int j = 0; j < cols; j++, checked++) {
        ASSERT_EQ(got.q[q8i::XSlot(j, cols)], want.q[CpuSlot(j, cols)]) << cols << " x" << scale << " col " << j;
        // Where a lane's two 16-byte loads find it (RowDotsQ8Int), each index once.
        const int c = j / 16, k = j % 16;
        ASSERT_EQ(q8i::XSlot(j, cols), k < 8 ? q8i::ChunkLo(c) + k : q8i::ChunkHi(c, cols) + k - 8) << cols << " " << j;
      }
    }
  }
  // The ties round to even: 0.5 -> 0, 1.5 -> 2, -0.5 -> -0, -1.5 -> -2.
  const std::vector<float> ties = CaseX(96, 1, 1.0f);
  const SharedX t = QuantizeLikeTheKernel(ties.data(), 96);
  EXPECT_EQ(t.q[q8i::XSlot(80, 96)], 0);   // 0.5
  EXPECT_EQ(t.q[q8i::XSlot(81, 96)], 2);   // 1.5
  EXPECT_EQ(t.q[q8i::XSlot(79, 96)], 0);   // -0.5
  EXPECT_EQ(t.q[q8i::XSlot(78, 96)], -2);  // -1.5
  std::printf("cuda q8 int16: %ld quants of x and their scales are simd::QuantizeX's\n", checked);
}

TEST(CudaQ8Int, WarpSimulationGivesMatVecQ8_0sBits) {
  long outputs = 0, shapes = 0;
  for (int cols : {32, 64, 96, 224, 256, 288, 512, 544, 800, 2048, 4096, 5632, 11008}) {
    const int rows = 5;
    const int64_t n = int64_t{rows} * cols;
    std::vector<float> wf = RandomNormal(static_cast<size_t>(n), static_cast<uint32_t>(cols) * 3 + 1, 0.05f);
    for (int j = 0; j < std::min(cols, 64); j++) wf[static_cast<size_t>(cols) + j] = 0.0f;  // row 1: zero blocks
    std::vector<unsigned char> q(RowBytes(DType::kQ8_0, cols) * rows), plain(q.size());
    EncodeF32(DType::kQ8_0, wf.data(), rows, cols, q.data());
    const Weights w{DType::kQ8_0, q.data(), rows, cols};
    UnpackQ8_0Rows(w, plain.data());
    std::vector<unsigned char> dev(static_cast<size_t>(q8::Bytes(n)));
    q8::Repack(plain.data(), n, dev.data());
    for (float scale : {1.0f, 3e4f, 1e-20f}) {
      const std::vector<float> x = CaseX(cols, static_cast<uint32_t>(cols) + 11, scale);
      simd::QuantizedX xq;
      simd::QuantizeX(x.data(), cols, &xq);
      std::vector<float> want(static_cast<size_t>(rows));
      simd::MatVecQ8_0(q.data(), xq, want.data(), 0, rows);
      const SharedX sx = QuantizeLikeTheKernel(x.data(), cols);
      for (int r = 0; r < rows; r++, outputs++)
        ASSERT_EQ(FloatBits(WarpRow(dev.data(), rows, cols, r, sx)), FloatBits(want[r]))
            << cols << " columns, x" << scale << ", row " << r << ": " << WarpRow(dev.data(), rows, cols, r, sx)
            << " vs " << want[r];
      shapes++;
    }
    // x with a NaN or an infinity: every product NaN, as on the CPU.
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> x = CaseX(cols, 5, 1.0f);
      x[static_cast<size_t>(cols) - 1] = bad;
      const SharedX sx = QuantizeLikeTheKernel(x.data(), cols);
      for (int r = 0; r < rows; r++) ASSERT_TRUE(std::isnan(WarpRow(dev.data(), rows, cols, r, sx))) << cols;
    }
  }
  std::printf("cuda q8 int16: %ld outputs of %ld simulated warps' rows bit for bit simd::MatVecQ8_0's\n", outputs,
              shapes);
}

TEST(CudaPlan, Q8IntPlanHoldsXsQuantsInSharedMemory) {
  DeviceLimits lim;
  for (int cols : {32, 2048, 4096, 11008}) {
    Result<LaunchPlan> p = PlanRowsQ8Int(4096, cols, 0, lim);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_TRUE(p->int16_x);
    EXPECT_EQ(p->shape, "rows=4096 cols=" + std::to_string(cols) + " T=1 dtype=q8_0 int16_x");
    EXPECT_EQ(p->shared_bytes, static_cast<size_t>(cols * 2 + cols / 32 * 4));
    EXPECT_EQ(p->rows_per_warp, kQ8IntRowsForm.rows_per_warp);
    EXPECT_EQ(p->unroll, kQ8IntRowsForm.unroll);
    EXPECT_EQ(p->tile, 1);
  }
  // Normed: the quants start after the normed row and the norm's warp sums, 16-byte aligned.
  Result<LaunchPlan> normed = PlanRowsQ8Int(12288, 4096, 1024, lim);
  ASSERT_TRUE(normed.ok()) << normed.status().message();
  EXPECT_EQ(normed->shared_bytes, static_cast<size_t>((4096 + 32) * 4 + 4096 * 2 + 128 * 4));
  EXPECT_EQ(q8i::AfterNorm(288, 96) % 16, 0);
  // Too wide for 48 KB: refused by name, not launched to overrun.
  Result<LaunchPlan> wide = PlanRowsQ8Int(64, 8192, 1024, lim);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("int16 quants"), std::string::npos) << wide.status().message();
  EXPECT_FALSE(PlanRowsQ8Int(64, 48, 0, lim).ok()) << "q8_0 needs whole blocks";
}

}  // namespace
}  // namespace verity::kernels::cuda
