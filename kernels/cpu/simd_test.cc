// The SIMD kernels (kernels/cpu/simd.h) against plain scalar loops, on every
// instruction set this binary holds kernels for and this CPU runs (each test
// below is instantiated once per target: AVX3, AVX2, SSE4, EMU128 on an
// AVX-512 box), on shapes that are not multiples of any vector width or unroll.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/simd.h"

namespace verity::kernels::simd {
namespace {

constexpr float kSentinel = -12345.0f;

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& f : v) f = u(rng);
  return v;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Plain loops, in double: the value each kernel must reproduce to f32 rounding.
struct Ref {
  double sum = 0, abs_sum = 0;
};
Ref RefDot(const std::vector<float>& w_row, const float* x) {
  Ref r;
  for (size_t j = 0; j < w_row.size(); j++) {
    r.sum += static_cast<double>(w_row[j]) * x[j];
    r.abs_sum += std::fabs(static_cast<double>(w_row[j]) * x[j]);
  }
  return r;
}
// f32 summation in any order is within n * eps * sum|terms|; random signs keep it
// near sqrt(n) * eps, so 16 * sqrt(n) * eps * sum|terms| is tight and safe.
double Tolerance(const Ref& r, size_t n) {
  return 16.0 * std::sqrt(static_cast<double>(n)) * std::numeric_limits<float>::epsilon() * r.abs_sum + 1e-30;
}

// A weight matrix in one dtype, with its exact f32 values (what the kernels
// must use: bf16 and q8_0 decode exactly to f32).
enum class Dtype { kF32, kBF16, kQ8 };
const char* Name(Dtype t) { return t == Dtype::kF32 ? "f32" : t == Dtype::kBF16 ? "bf16" : "q8_0"; }

struct Matrix {
  Dtype type;
  int rows, cols;
  // Stored one element past an aligned start, so no row is vector-aligned.
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<unsigned char> q8_bytes;
  std::vector<float> exact;  // rows x cols, the values the stored form decodes to

  const float* F32() const { return f32.data() + 1; }
  const uint16_t* BF16() const { return bf16.data() + 1; }
  const uint8_t* Q8() const { return q8_bytes.data() + 4; }
  std::vector<float> Row(int i) const {
    return std::vector<float>(exact.begin() + static_cast<long>(i) * cols,
                              exact.begin() + static_cast<long>(i + 1) * cols);
  }
};

Matrix MakeMatrix(Dtype t, int rows, int cols, uint32_t seed) {
  Matrix m{t, rows, cols, {}, {}, {}, {}};
  const size_t n = static_cast<size_t>(rows) * cols;
  std::vector<float> src = Random(n, seed);
  // Rows of very different magnitudes, as in real checkpoints.
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) src[static_cast<size_t>(i) * cols + j] *= std::ldexp(1.0f, (i % 5) - 2);
  m.exact.resize(n);
  switch (t) {
    case Dtype::kF32:
      m.f32.assign(n + 1, 0.0f);
      std::memcpy(m.f32.data() + 1, src.data(), n * 4);
      m.exact = src;
      break;
    case Dtype::kBF16:
      m.bf16.assign(n + 1, 0);
      ConvertF32ToBF16(src.data(), m.bf16.data() + 1, n);
      for (size_t k = 0; k < n; k++) m.exact[k] = BF16ToF32(m.bf16[k + 1]);
      break;
    case Dtype::kQ8: {
      const size_t row_bytes = static_cast<size_t>(cols / kQ8Block) * sizeof(BlockQ8_0);
      m.q8_bytes.assign(row_bytes * rows + 4, 0);
      for (int i = 0; i < rows; i++) {
        QuantizeRowQ8_0(src.data() + static_cast<size_t>(i) * cols, cols, m.q8_bytes.data() + 4 + i * row_bytes);
        DequantizeRowQ8_0(m.q8_bytes.data() + 4 + i * row_bytes, cols, m.exact.data() + static_cast<size_t>(i) * cols);
      }
      break;
    }
  }
  return m;
}

// x as a kernel of m's dtype sees it: itself, or for q8_0 rounded to int16
// per block of 32 (QuantizedX: scale = max|x| / 32767) and decoded exactly.
std::vector<float> Seen(Dtype t, const float* x, int cols) {
  std::vector<float> v(x, x + cols);
  if (t != Dtype::kQ8) return v;
  for (int b = 0; b < cols; b += kQ8Block) {
    float amax = 0.0f;
    for (int k = b; k < b + kQ8Block; k++) amax = std::max(amax, std::fabs(x[k]));
    const float scale = amax / 32767.0f, inv = amax == 0.0f ? 0.0f : 32767.0f / amax;
    for (int k = b; k < b + kQ8Block; k++) v[k] = std::nearbyint(x[k] * inv) * scale;
  }
  return v;
}

void MatVec(const Matrix& m, const float* x, float* out, int row_begin, int row_end) {
  switch (m.type) {
    case Dtype::kF32: MatVecF32(m.F32(), x, out, m.cols, row_begin, row_end); break;
    case Dtype::kBF16: MatVecBF16(m.BF16(), x, out, m.cols, row_begin, row_end); break;
    case Dtype::kQ8: {
      QuantizedX xq;
      QuantizeX(x, m.cols, &xq);
      MatVecQ8_0(m.Q8(), xq, out, row_begin, row_end);
      break;
    }
  }
}

void MatMul(const Matrix& m, const float* x, float* out, int T, int ld_out, int row_begin, int row_end) {
  switch (m.type) {
    case Dtype::kF32: MatMulF32(m.F32(), x, out, T, m.cols, ld_out, row_begin, row_end); break;
    case Dtype::kBF16: MatMulBF16(m.BF16(), x, out, T, m.cols, ld_out, row_begin, row_end); break;
    case Dtype::kQ8: {
      std::vector<QuantizedX> xq(T);
      for (int t = 0; t < T; t++) QuantizeX(x + static_cast<size_t>(t) * m.cols, m.cols, &xq[t]);
      MatMulQ8_0(m.Q8(), xq.data(), out, T, ld_out, row_begin, row_end);
      break;
    }
  }
}

std::vector<int> ColsFor(Dtype t) {
  if (t == Dtype::kQ8) return {32, 64, 96, 160, 256, 544, 800};  // groups of 8 blocks and plain tails
  return {1, 3, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 257, 775};
}

// Every test runs once per available target, dispatch pinned to it.
class SimdTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(ForceTargetForTest(GetParam())) << GetParam(); }
  void TearDown() override { ForceTargetForTest(""); }
};

TEST_P(SimdTest, DispatchesToTheForcedTarget) { EXPECT_EQ(std::string(TargetName()), GetParam()); }

TEST_P(SimdTest, MatVecMatchesScalarLoop) {
  for (Dtype t : {Dtype::kF32, Dtype::kBF16, Dtype::kQ8})
    for (int cols : ColsFor(t))
      for (int rows : {1, 3, 4, 5, 9}) {
        const Matrix m = MakeMatrix(t, rows, cols, 100 + rows * 1000 + cols);
        const std::vector<float> xs = Random(cols + 1, 7 + cols);
        const float* x = xs.data() + 1;  // unaligned
        // The whole matrix, then an inner range (rows outside it untouched).
        for (auto [b, e] : {std::pair{0, rows}, std::pair{rows > 2 ? 1 : 0, rows > 2 ? rows - 1 : rows}}) {
          std::vector<float> out(rows, kSentinel);
          MatVec(m, x, out.data(), b, e);
          for (int i = 0; i < rows; i++) {
            if (i < b || i >= e) {
              EXPECT_EQ(out[i], kSentinel) << Name(t) << " row " << i << " outside [" << b << "," << e << ")";
              continue;
            }
            const Ref r = RefDot(m.Row(i), Seen(t, x, cols).data());
            ASSERT_NEAR(out[i], r.sum, Tolerance(r, cols))
                << Name(t) << " " << rows << "x" << cols << " row " << i << " range [" << b << "," << e << ")";
          }
        }
      }
}

TEST_P(SimdTest, MatMulMatchesMatVecPerVector) {
  for (Dtype t : {Dtype::kF32, Dtype::kBF16, Dtype::kQ8})
    for (int cols : t == Dtype::kQ8 ? std::vector<int>{32, 96, 800} : std::vector<int>{1, 5, 17, 33, 100, 775})
      for (int rows : {1, 2, 3, 5, 7, 9})
        for (int T : {1, 3, 5, 17, 64, 70}) {
          const Matrix m = MakeMatrix(t, rows, cols, 7 + rows * 31 + cols);
          const std::vector<float> xs = Random(static_cast<size_t>(T) * cols + 1, 3 + T);
          const float* x = xs.data() + 1;
          const int ld = rows + 3;
          const int b = rows > 3 ? 1 : 0, e = rows > 3 ? rows - 1 : rows;
          std::vector<float> out(static_cast<size_t>(T) * ld, kSentinel);
          MatMul(m, x, out.data(), T, ld, b, e);
          std::vector<float> one(rows, kSentinel);
          for (int v = 0; v < T; v++) {
            MatVec(m, x + static_cast<size_t>(v) * cols, one.data(), b, e);
            for (int i = 0; i < ld; i++) {
              const float got = out[static_cast<size_t>(v) * ld + i];
              if (i < b || i >= e) {
                ASSERT_EQ(got, kSentinel) << Name(t) << " T " << T << " vector " << v << " row " << i;
                continue;
              }
              const Ref r = RefDot(m.Row(i), Seen(t, x + static_cast<size_t>(v) * cols, cols).data());
              const double tol = Tolerance(r, cols);
              ASSERT_NEAR(got, r.sum, tol)
                  << Name(t) << " " << rows << "x" << cols << " T " << T << " v " << v << " row " << i;
              ASSERT_NEAR(got, one[i], 2 * tol) << Name(t) << " MatMul vs MatVec, " << rows << "x" << cols << " T " << T
                                                << " v " << v << " row " << i;
            }
          }
        }
}

void MatRows(const Matrix& m, const float* x, int n, float* out, int ld_out, int row_begin, int row_end) {
  switch (m.type) {
    case Dtype::kF32: MatRowsF32(m.F32(), x, n, out, m.cols, ld_out, row_begin, row_end); break;
    case Dtype::kBF16: MatRowsBF16(m.BF16(), x, n, out, m.cols, ld_out, row_begin, row_end); break;
    case Dtype::kQ8: {
      std::vector<QuantizedX> xq(n);
      for (int t = 0; t < n; t++) QuantizeX(x + static_cast<size_t>(t) * m.cols, m.cols, &xq[t]);
      MatRowsQ8_0(m.Q8(), xq.data(), n, out, ld_out, row_begin, row_end);
      break;
    }
  }
}

// A continuous-batching step's kernel: each of its n outputs is bit for bit
// MatVec's for that vector (batch invariance), on every target, for column
// counts off every vector width and unroll, and vector counts off the kernel's
// group of vectors; rows outside the range are untouched.
TEST_P(SimdTest, MatRowsEqualsMatVecPerVectorBitForBit) {
  for (Dtype t : {Dtype::kF32, Dtype::kBF16, Dtype::kQ8})
    for (int cols : ColsFor(t))
      for (int n : {1, 2, 3, 4, 5, 6, 7, 13, 16}) {
        // 15 rows from 1 to 14: full row tiles and a remainder on every target.
        const int rows = 15, ld = rows + 2, b = 1, e = rows - 1;
        const Matrix m = MakeMatrix(t, rows, cols, 11 + n * 17 + cols);
        const std::vector<float> xs = Random(static_cast<size_t>(n) * cols + 1, 5 + n + cols);
        const float* x = xs.data() + 1;  // unaligned
        std::vector<float> out(static_cast<size_t>(n) * ld, kSentinel), one(rows, kSentinel);
        MatRows(m, x, n, out.data(), ld, b, e);
        for (int v = 0; v < n; v++) {
          MatVec(m, x + static_cast<size_t>(v) * cols, one.data(), b, e);
          for (int i = 0; i < ld; i++) {
            const float got = out[static_cast<size_t>(v) * ld + i];
            const float want = i < b || i >= e ? kSentinel : one[i];
            ASSERT_EQ(Bits(got), Bits(want)) << Name(t) << " " << rows << "x" << cols << " n " << n << " vector " << v
                                             << " row " << i << ": " << got << " vs MatVec " << want;
          }
        }
      }
}

TEST_P(SimdTest, MatMulFromSeveralThreadsAtOnce) {
  // The engine calls MatMul on disjoint row ranges from its pool; per-thread
  // scratch must keep them apart, and each row's result is deterministic.
  for (Dtype t : {Dtype::kF32, Dtype::kBF16, Dtype::kQ8}) {
    const int rows = 37, cols = 96, T = 9;
    const Matrix m = MakeMatrix(t, rows, cols, 5);
    const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 6);
    std::vector<float> serial(static_cast<size_t>(T) * rows), parallel(serial.size());
    MatMul(m, x.data(), serial.data(), T, rows, 0, rows);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; k++)
      threads.emplace_back([&, k] {
        for (int rep = 0; rep < 50; rep++)
          MatMul(m, x.data(), parallel.data(), T, rows, k * rows / 4, (k + 1) * rows / 4);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(serial, parallel) << Name(t);
  }
}

TEST_P(SimdTest, QuantizeQ8RoundTripBounds) {
  std::mt19937 rng(9);
  for (float magnitude : {1e-30f, 1e-6f, 1.0f, 3e4f}) {
    const size_t n = 32 * 40;
    std::vector<float> v = Random(n, static_cast<uint32_t>(magnitude * 7 + 1), -magnitude, magnitude);
    for (size_t k = 0; k < 32; k++) v[k] = 0.0f;            // an all-zero block
    for (size_t k = 32; k < 64; k++) v[k] = magnitude / 2;  // a constant block
    v[70] = -3 * magnitude;                                 // a block whose max is negative
    std::vector<BlockQ8_0> q(n / 32);
    QuantizeQ8_0(v.data(), q.data(), n);
    // Into an unaligned destination (no pointer argument needs alignment).
    std::vector<float> back_storage(n + 1);
    float* back = back_storage.data() + 1;
    DequantizeQ8_0(q.data(), back, n);
    for (size_t b = 0; b < n / 32; b++) {
      float amax = 0;
      for (int k = 0; k < 32; k++) amax = std::max(amax, std::fabs(v[b * 32 + k]));
      ASSERT_EQ(q[b].scale, amax / 127.0f) << "block " << b;
      for (int k = 0; k < 32; k++) {
        const size_t i = b * 32 + k;
        const float expect_q = q[b].scale == 0.0f ? 0.0f : std::nearbyint(v[i] / q[b].scale);
        ASSERT_EQ(q[b].q[k], static_cast<int8_t>(expect_q)) << "block " << b << " k " << k;
        ASSERT_EQ(back[i], q[b].scale * q[b].q[k]);
        ASSERT_LE(std::fabs(back[i] - v[i]), q[b].scale * 0.5f * (1 + 1e-5f) + 1e-38f) << "magnitude " << magnitude;
        if (std::fabs(v[i]) == amax && amax > 0) {
          ASSERT_EQ(std::abs(q[b].q[k]), 127);
        }
      }
    }
    EXPECT_EQ(q[0].scale, 0.0f);
  }
  (void)rng;
}

// q8_0's block sums are exact integers on every instruction set and their
// scaled sum runs in one fixed order, so every target returns the same bits;
// MatMul runs the same per-row function, so it matches MatVec bit for bit.
TEST(SimdQ8, EveryTargetReturnsTheSameBitsAndMatMulEqualsMatVec) {
  // Uncapped, every x86 host has at least two targets (its best and SCALAR).
  if (AvailableTargets().size() < 2 && !TargetCap().empty())
    GTEST_SKIP() << "one target under VERITY_SIMD_TARGET=" << TargetCap() << ": nothing to compare across";
  int compared = 0;
  for (int cols : {256, 544, 800, 2048}) {
    const int rows = 7, T = 3;
    const Matrix m = MakeMatrix(Dtype::kQ8, rows, cols, 17 + cols);
    const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 23 + cols, -3.0f, 3.0f);
    std::vector<float> first;
    for (const std::string& target : AvailableTargets()) {
      ASSERT_TRUE(ForceTargetForTest(target));
      std::vector<float> vec(static_cast<size_t>(T) * rows), mat(static_cast<size_t>(T) * rows);
      for (int t = 0; t < T; t++) MatVec(m, x.data() + static_cast<size_t>(t) * cols, vec.data() + t * rows, 0, rows);
      MatMul(m, x.data(), mat.data(), T, rows, 0, rows);
      ASSERT_EQ(0, std::memcmp(vec.data(), mat.data(), vec.size() * 4)) << target << " cols " << cols;
      if (first.empty()) first = vec;
      ASSERT_EQ(0, std::memcmp(first.data(), vec.data(), vec.size() * 4)) << target << " cols " << cols;
      compared++;
    }
    ForceTargetForTest("");
  }
  std::printf("q8_0: %d target x shape runs, every one bit-identical\n", compared);
  EXPECT_GE(compared, 4 * 2);
}

TEST(SimdQ8, RowLayoutRoundTripsAndGroupsBlocks) {
  for (int cols : {32, 224, 256, 288, 800}) {
    const int nb = cols / kQ8Block;
    std::vector<BlockQ8_0> blocks(nb), back(nb);
    for (int b = 0; b < nb; b++) {
      blocks[b].scale = 0.5f + b;
      for (int k = 0; k < kQ8Block; k++) blocks[b].q[k] = static_cast<int8_t>((b * 7 + k * 3) % 255 - 127);
    }
    std::vector<uint8_t> row(nb * sizeof(BlockQ8_0));
    PackRowQ8_0(blocks.data(), cols, row.data());
    UnpackRowQ8_0(row.data(), cols, back.data());
    ASSERT_EQ(0, std::memcmp(blocks.data(), back.data(), row.size())) << cols;
    if (nb >= kQ8Group) {  // group 0: 8 scales, then q[0..3] of blocks 0..7
      float s1;
      std::memcpy(&s1, row.data() + 4, 4);
      EXPECT_EQ(s1, blocks[1].scale);
      EXPECT_EQ(static_cast<int8_t>(row[32 + 4 * 2 + 1]), blocks[2].q[1]);
      EXPECT_EQ(static_cast<int8_t>(row[32 + 32 * 3 + 4 * 5 + 2]), blocks[5].q[3 * 4 + 2]);
    }
  }
}

TEST(SimdQ8, NonFiniteActivationsGiveNaNNotGarbage) {
  const Matrix m = MakeMatrix(Dtype::kQ8, 3, 256, 4);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = Random(256, 5);
    x[100] = bad;
    std::vector<float> out(3, 0.0f);
    MatVec(m, x.data(), out.data(), 0, 3);
    for (float v : out) EXPECT_TRUE(std::isnan(v)) << v;
  }
}

// DivideBy gives the scalar loop's bits (division is exactly rounded), at
// every count around the vector widths, and touches nothing past count.
TEST_P(SimdTest, DivideByEqualsTheScalarLoop) {
  for (int count : {0, 1, 3, 4, 7, 8, 15, 16, 17, 33, 100}) {
    std::vector<float> x = Random(count + 1, 23 + count), want = x;
    x[count] = want[count] = kSentinel;
    const float d = 0.37f + static_cast<float>(count);
    for (int i = 0; i < count; i++) want[i] /= d;
    DivideBy(x.data(), count, d);
    for (int i = 0; i <= count; i++) ASSERT_EQ(x[i], want[i]) << "count " << count << " i " << i;
  }
}

// Grouped-query attention: a group of heads sharing one KV head gets, per
// head, exactly the bits that head gets alone (group 1), and both agree with
// plain double-precision loops. Head widths cover full vectors, the narrow
// 8- and 4-lane paths and scalar tails; group sizes pass kGroup (2 or 4).
TEST_P(SimdTest, GroupedAttentionEqualsOneHeadAtATime) {
  for (int n : {3, 4, 8, 12, 16, 24, 64, 100, 128})
    for (int group : {1, 2, 3, 4, 5, 8}) {
      const int count = 37, kv_heads = 2;
      const long stride = static_cast<long>(kv_heads) * n + 1, ld = count + 5;  // odd strides: unaligned rows
      const std::vector<float> keys = Random(static_cast<size_t>(count) * stride, 11 + n);
      const std::vector<float> values = Random(static_cast<size_t>(count) * stride, 13 + n);
      const std::vector<float> q = Random(static_cast<size_t>(group) * n, 17 + group);
      const float* k = keys.data() + n;  // the second KV head
      const float* v = values.data() + n;
      std::vector<float> scores(group * ld, kSentinel), alone(count);
      AttentionScores(q.data(), group, k, stride, n, count, scores.data(), ld, std::sqrt(static_cast<float>(n)));
      std::vector<float> w = Random(static_cast<size_t>(group) * ld, 19 + n);  // as softmax weights
      std::vector<float> out(static_cast<size_t>(group) * n, kSentinel), out_alone(n);
      WeightedSum(w.data(), ld, group, v, stride, n, count, out.data());
      for (int g = 0; g < group; g++) {
        AttentionScores(q.data() + g * n, 1, k, stride, n, count, alone.data(), count,
                        std::sqrt(static_cast<float>(n)));
        WeightedSum(w.data() + g * ld, ld, 1, v, stride, n, count, out_alone.data());
        for (int t = 0; t < count; t++) {
          ASSERT_EQ(scores[g * ld + t], alone[t]) << "n " << n << " group " << group << " head " << g << " t " << t;
          double dot = 0;
          for (int i = 0; i < n; i++) dot += static_cast<double>(q[g * n + i]) * k[t * stride + i];
          ASSERT_NEAR(scores[g * ld + t], dot / std::sqrt(static_cast<double>(n)), 1e-5 * n);
        }
        for (int t = count; t < ld; t++) ASSERT_EQ(scores[g * ld + t], kSentinel) << "wrote past count";
        for (int i = 0; i < n; i++) {
          ASSERT_EQ(out[g * n + i], out_alone[i]) << "n " << n << " group " << group << " head " << g << " i " << i;
          double sum = 0;
          for (int t = 0; t < count; t++) sum += static_cast<double>(w[g * ld + t]) * v[t * stride + i];
          ASSERT_NEAR(out[g * n + i], sum, 1e-5 * count);
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, SimdTest, ::testing::ValuesIn(AvailableTargets()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Gemma's tanh steps (soft-cap, GeGLU) on every target agree with double
// precision within a few float ulp, across tanh's small, middle and
// saturated ranges, in the vectors and the scalar tail.
TEST_P(SimdTest, GemmaTanhStepsMatchDoublePrecision) {
  for (const int n : {1, 7, 16, 37, 300}) {
    std::vector<float> x(n), up(n);
    for (int i = 0; i < n; i++) x[i] = -60.0f + 120.0f * static_cast<float>(i) / n, up[i] = 0.5f + 0.01f * i;
    std::vector<float> capped = x, gated = x;
    SoftCapRow(capped.data(), n, 30.0f);
    GeGLURow(gated.data(), up.data(), n);
    for (int i = 0; i < n; i++) {
      const double v = x[i], want_cap = 30.0 * std::tanh(v / 30.0);
      const double want_gelu = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))) * up[i];
      EXPECT_NEAR(capped[i], want_cap, 4e-6 * std::fabs(want_cap) + 1e-6) << "n " << n << " x " << v;
      EXPECT_NEAR(gated[i], want_gelu, 4e-6 * std::fabs(want_gelu) + 1e-6) << "n " << n << " x " << v;
    }
  }
}

TEST(Simd, PrintsTheChosenTarget) {
  std::string all;
  for (const auto& t : AvailableTargets()) all += " " + t;
  std::printf("simd: dispatching to %s (kernels here for:%s)\n", TargetName(), all.c_str());
  ASSERT_FALSE(AvailableTargets().empty());
  EXPECT_EQ(std::string(TargetName()), AvailableTargets().front());  // the best one
  EXPECT_FALSE(ForceTargetForTest("NO_SUCH_TARGET"));
  EXPECT_EQ(std::string(TargetName()), AvailableTargets().front());
}

TEST(Simd, BF16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBF16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToBF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToBF16(-0.0f), 0x8000);
  // Exactly halfway: ties go to the even neighbour.
  EXPECT_EQ(F32ToBF16(FromBits(0x3F808000)), 0x3F80);  // ...0|1000: down to even 0x3F80
  EXPECT_EQ(F32ToBF16(FromBits(0x3F818000)), 0x3F82);  // ...1|1000: up to even 0x3F82
  EXPECT_EQ(F32ToBF16(FromBits(0xBF818000)), 0xBF82);  // sign does not matter
  // Either side of halfway: nearest.
  EXPECT_EQ(F32ToBF16(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(F32ToBF16(FromBits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(F32ToBF16(FromBits(0x3F80FFFF)), 0x3F81);
  // A carry through the mantissa into the exponent.
  EXPECT_EQ(F32ToBF16(FromBits(0x3FFFFFFF)), 0x4000);
  // Rounding past the largest finite bf16 gives infinity; infinities stay.
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(F32ToBF16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // Subnormals round like everything else.
  EXPECT_EQ(F32ToBF16(FromBits(0x00008000)), 0x0000);
  EXPECT_EQ(F32ToBF16(FromBits(0x00018000)), 0x0002);
  // NaN stays NaN, even one whose payload lives only in the dropped low bits.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F80FFFFu}) {
    const uint16_t b = F32ToBF16(FromBits(nan));
    EXPECT_TRUE(std::isnan(BF16ToF32(b))) << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << "sign kept";
  }
  // Every bf16 decodes exactly and converts back to itself.
  for (uint32_t v = 0; v <= 0xFFFF; v++) {
    const float f = BF16ToF32(static_cast<uint16_t>(v));
    ASSERT_EQ(Bits(f), v << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(F32ToBF16(f), v);
    }
  }
  // The array form is the scalar one per element; the nearest value, checked
  // against the two neighbours.
  const std::vector<float> src = Random(1001, 4, -1e3f, 1e3f);
  std::vector<uint16_t> dst(src.size());
  ConvertF32ToBF16(src.data(), dst.data(), src.size());
  std::vector<float> back(src.size());
  BF16ToF32Array(dst.data(), back.data(), dst.size());
  for (size_t i = 0; i < src.size(); i++) {
    ASSERT_EQ(dst[i], F32ToBF16(src[i]));
    ASSERT_EQ(back[i], BF16ToF32(dst[i]));
    const float lo = BF16ToF32(static_cast<uint16_t>(dst[i] - 1)), hi = BF16ToF32(static_cast<uint16_t>(dst[i] + 1));
    ASSERT_LE(std::fabs(back[i] - src[i]), std::fabs(lo - src[i]));
    ASSERT_LE(std::fabs(back[i] - src[i]), std::fabs(hi - src[i]));
  }
}

}  // namespace
}  // namespace verity::kernels::simd
