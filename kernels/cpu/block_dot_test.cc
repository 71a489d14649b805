// The block-quantized kernels (kernels/cpu/block_dot.h) against
// formats/quants' reference dequantization (itself gguf-py's, bit for bit:
// quants_test), on every instruction set this CPU runs: random blocks of each
// type (every byte random, the f16 scales finite), dotted with random x.
//  - Against x as the kernels quantized it, the only error left is f32
//    rounding: a sub-block scale read from the wrong place, a nibble from
//    the wrong half or a min of the wrong sign is orders of magnitude
//    outside it.
//  - Against x itself, the error is within x's rounding (half a step of its
//    block's scale, times the weights' magnitudes).
//  - MatMulBlock gives MatVecBlock's bits, vector by vector.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/quants.h"
#include "formats/safetensors.h"
#include "kernels/cpu/block_dot.h"
#include "kernels/cpu/simd.h"

namespace verity {
namespace {
using kernels::simd::BlockX;

struct TypeCase {
  uint32_t type;
  int cols;  // a row: whole blocks
};

// Every type; the 32-weight types also at a width that is not a multiple of
// 256 (x then has a scale per 32) and at one that is (a scale per 256).
const TypeCase kCases[] = {{2, 288}, {2, 512},  {3, 288},  {3, 512},  {6, 288},  {6, 512}, {7, 288},
                           {7, 512}, {10, 768}, {11, 768}, {12, 768}, {13, 768}, {14, 768}};

// Byte offsets of a block's f16 scales (d, and dmin/m where the type has one).
std::vector<int> HalfOffsets(uint32_t type) {
  switch (type) {
    case 2:
    case 6: return {0};
    case 3:
    case 7: return {0, 2};
    case 10: return {80, 82};
    case 11: return {108};
    case 12:
    case 13: return {0, 2};
    case 14: return {208};
  }
  return {};
}

// `rows` rows of random blocks with finite f16 scales in [-0.05, 0.05].
std::vector<uint8_t> RandomRows(uint32_t type, int rows, int cols, std::mt19937* rng) {
  const quants::Layout* l = quants::FindLayout(type);
  const int64_t blocks = static_cast<int64_t>(rows) * cols / l->block_elems;
  std::vector<uint8_t> w(static_cast<size_t>(blocks * l->block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(*rng));
  for (int64_t b = 0; b < blocks; b++)
    for (int off : HalfOffsets(type)) {
      const uint16_t h = F32ToF16(scale(*rng));
      std::memcpy(&w[static_cast<size_t>(b * l->block_bytes + off)], &h, 2);
    }
  return w;
}

std::vector<float> Dequantized(uint32_t type, const std::vector<uint8_t>& w, int rows, int cols) {
  const quants::Layout* l = quants::FindLayout(type);
  std::vector<float> out(static_cast<size_t>(rows) * cols);
  const Status st =
      quants::Dequantize(type, w.data(), static_cast<int64_t>(rows) * cols / l->block_elems, out.data(), "test");
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

std::vector<float> RandomX(int cols, std::mt19937* rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = n(*rng);
  x[3] = 7.5f;  // an outlier, as activations have
  return x;
}

class BlockDot : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::simd::ForceTargetForTest(GetParam())) << GetParam(); }
  void TearDown() override { kernels::simd::ForceTargetForTest(""); }
};

TEST_P(BlockDot, QuantizedXIsWithinHalfAStepAndSums16AreExact) {
  std::mt19937 rng(7);
  for (int cols : {288, 512}) {
    const std::vector<float> x = RandomX(cols, &rng);
    BlockX xq;
    kernels::simd::QuantizeBlockX(x.data(), cols, &xq);
    ASSERT_TRUE(xq.finite);
    EXPECT_EQ(xq.block, cols % 256 == 0 ? 256 : 32);
    for (int i = 0; i < cols; i++) {
      const float s = xq.scale[static_cast<size_t>(i / xq.block)];
      ASSERT_LE(std::fabs(xq.q[i] * s - x[i]), s * 0.5001f + 1e-7f) << i;
    }
    for (int i = 0; i < cols / 16; i++) {
      int32_t sum = 0;
      for (int k = 0; k < 16; k++) sum += xq.q[static_cast<size_t>(16 * i + k)];
      ASSERT_EQ(sum, xq.sum16[static_cast<size_t>(i)]);
    }
    std::vector<float> bad = x;
    bad[static_cast<size_t>(cols - 1)] = std::nanf("");
    kernels::simd::QuantizeBlockX(bad.data(), cols, &xq);
    EXPECT_FALSE(xq.finite);
  }
}

TEST_P(BlockDot, EveryTypeAgreesWithTheReferenceDequantization) {
  std::mt19937 rng(2026);
  constexpr int kRows = 7, kT = 9;
  for (const TypeCase& c : kCases) {
    SCOPED_TRACE(std::string(quants::FindLayout(c.type)->name) + " cols " + std::to_string(c.cols));
    ASSERT_TRUE(kernels::simd::HasBlockKernel(c.type));
    const std::vector<uint8_t> w = RandomRows(c.type, kRows, c.cols, &rng);
    const std::vector<float> deq = Dequantized(c.type, w, kRows, c.cols);
    std::vector<BlockX> xs(kT);
    std::vector<std::vector<float>> x(kT);
    for (int t = 0; t < kT; t++) {
      x[t] = RandomX(c.cols, &rng);
      kernels::simd::QuantizeBlockX(x[t].data(), c.cols, &xs[t]);
    }
    std::vector<float> rows_out(static_cast<size_t>(kT) * kRows);
    kernels::simd::MatMulBlock(c.type, w.data(), xs.data(), rows_out.data(), kT, kRows, 0, kRows);
    for (int t = 0; t < kT; t++) {
      std::vector<float> out(kRows, -1.0f);
      kernels::simd::MatVecBlock(c.type, w.data(), xs[t], out.data(), 0, kRows);
      for (int r = 0; r < kRows; r++) {
        const float* wr = deq.data() + static_cast<size_t>(r) * c.cols;
        double exact_q = 0, magnitude_q = 0, exact = 0, x_rounding = 0;
        for (int j = 0; j < c.cols; j++) {
          const double xs_j = static_cast<double>(xs[t].q[j]) * xs[t].scale[static_cast<size_t>(j / xs[t].block)];
          exact_q += static_cast<double>(wr[j]) * xs_j;
          magnitude_q += std::fabs(static_cast<double>(wr[j]) * xs_j);
          exact += static_cast<double>(wr[j]) * x[t][j];
          x_rounding += std::fabs(wr[j]) * 0.5 * xs[t].scale[static_cast<size_t>(j / xs[t].block)];
        }
        ASSERT_NEAR(out[r], exact_q, 1e-5 * magnitude_q + 1e-6) << "row " << r << " vector " << t;
        ASSERT_NEAR(out[r], exact, x_rounding + 1e-5 * magnitude_q + 1e-6) << "row " << r << " vector " << t;
        const float m = rows_out[static_cast<size_t>(t) * kRows + r];
        ASSERT_EQ(std::memcmp(&m, &out[r], 4), 0) << "MatMulBlock " << m << " MatVecBlock " << out[r];
      }
    }
    // Rows are independent: a range writes only its rows, and each the bits
    // it has in any other range (threads split rows anywhere; the kernels
    // finish rows 4 at a time).
    std::vector<float> whole(kRows), part(kRows, -1.0f);
    kernels::simd::MatVecBlock(c.type, w.data(), xs[0], whole.data(), 0, kRows);
    kernels::simd::MatVecBlock(c.type, w.data(), xs[0], part.data(), 2, 7);
    EXPECT_EQ(part[1], -1.0f);
    for (int r = 2; r < 7; r++) EXPECT_EQ(std::memcmp(&part[r], &whole[r], 4), 0) << "row " << r;
    std::vector<float> tile(static_cast<size_t>(kRows) * 2, -1.0f);
    kernels::simd::MatMulBlock(c.type, w.data(), xs.data(), tile.data(), 2, kRows, 1, 6);
    for (int r = 1; r < 6; r++) EXPECT_EQ(std::memcmp(&tile[r], &whole[r], 4), 0) << "MatMulBlock row " << r;
  }
}

TEST_P(BlockDot, NonFiniteXGivesNaN) {
  std::mt19937 rng(1);
  std::vector<float> x = RandomX(768, &rng);
  x[100] = INFINITY;
  BlockX xq;
  kernels::simd::QuantizeBlockX(x.data(), 768, &xq);
  const std::vector<uint8_t> w = RandomRows(12, 2, 768, &rng);
  float out[2];
  kernels::simd::MatVecBlock(12, w.data(), xq, out, 0, 2);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
}

INSTANTIATE_TEST_SUITE_P(Targets, BlockDot, ::testing::ValuesIn(kernels::simd::AvailableTargets()));

}  // namespace
}  // namespace verity
