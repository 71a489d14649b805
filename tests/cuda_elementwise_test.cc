// The CUDA kernels' per-element arithmetic (kernels/cuda/elementwise.h),
// compiled for the CPU and compared with the reference path: bit-exact where
// the arithmetic is the same (conversions, dequantization, SwiGLU, RoPE,
// RMSNorm, MoE routing, argmax), to float rounding where the kernel reorders
// it (the online softmax of tiled attention).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/float_values.h"
#include "kernels/cpu/backends.h"
#include "kernels/cpu/simd.h"
#include "base/half.h"
#include "formats/quantize.h"
#include "formats/quants.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/kquant_layout.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/mma_map.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/q8_upload.h"
#include "kernels/cuda/staged_upload.h"
#include "kernels/cuda/work_map.h"
#include "tests/mma_spec.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

TEST(CudaElementwise, BF16ConversionsMatchTheCpuBitForBit) {
  int checked = 0;
  for (uint32_t h = 0; h <= 0xffff; h++, checked++)
    ASSERT_EQ(FloatBits(ew::BF16ToF32(static_cast<uint16_t>(h))), FloatBits(simd::BF16ToF32(static_cast<uint16_t>(h))))
        << h;
  std::mt19937 rng(7);
  std::vector<float> specials = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4e38f, 1.00390625f, 1.01171875f};
  for (int i = 0; i < 200000; i++) {
    uint32_t b = rng();
    float f;
    std::memcpy(&f, &b, 4);
    specials.push_back(f);
  }
  for (float f : specials) {
    ASSERT_EQ(ew::F32ToBF16(f), simd::F32ToBF16(f)) << FloatBits(f);
    checked++;
  }
  std::printf("cuda elementwise: bf16 conversions of %d values bit-exact\n", checked);
}

TEST(CudaElementwise, Q8_0DequantizeMatchesDecodeRow) {
  const int cols = 256;
  std::vector<float> src = Random(cols, 3, 2.0f);
  std::vector<unsigned char> q(RowBytes(DType::kQ8_0, cols));
  EncodeF32(DType::kQ8_0, src.data(), 1, cols, q.data());
  std::vector<float> want(cols);
  DecodeRow({DType::kQ8_0, q.data(), 1, cols}, 0, want.data());
  // The device reads plain blocks, as the backend uploads them.
  std::vector<unsigned char> plain(q.size());
  UnpackQ8_0Rows({DType::kQ8_0, q.data(), 1, cols}, plain.data());
  for (int j = 0; j < cols; j++)
    ASSERT_EQ(FloatBits(ew::Q8_0Weight(plain.data() + (j / 32) * kQ8_0BlockBytes, j % 32)), FloatBits(want[j])) << j;
}

// The device's q8_0 layout (q8_layout.h: quants, then scales): every weight
// of several matrices, repacked from the plain blocks, reads back with the
// bits DecodeRow gives (the reference's dequantization), and the 16-byte
// chunks the rows kernel widens give each quant exactly, for every byte.
TEST(CudaElementwise, Q8_0DeviceLayoutReadsEveryWeightExactly) {
  long checked = 0;
  for (auto [rows, cols] : {std::pair{1, 32}, {3, 64}, {17, 288}, {64, 2048}}) {
    const int64_t n = int64_t{rows} * cols;
    const std::vector<float> src = Random(static_cast<size_t>(n), rows + cols, 3.0f);
    std::vector<unsigned char> q(RowBytes(DType::kQ8_0, cols) * rows), plain(q.size());
    EncodeF32(DType::kQ8_0, src.data(), rows, cols, q.data());
    const Weights w{DType::kQ8_0, q.data(), rows, cols};
    UnpackQ8_0Rows(w, plain.data());
    std::vector<unsigned char> dev(static_cast<size_t>(q8::Bytes(n)));
    ASSERT_EQ(dev.size(), plain.size()) << "the same bytes a weight";
    q8::Repack(plain.data(), n, dev.data());
    std::vector<float> want(cols);
    for (int r = 0; r < rows; r++) {
      DecodeRow(w, r, want.data());
      for (int j = 0; j < cols; j++, checked++) {
        const int64_t g = int64_t{r} * cols + j;
        ASSERT_EQ(FloatBits(q8::Weight(dev.data(), n, g)), FloatBits(want[j]))
            << rows << "x" << cols << " row " << r << " col " << j;
        // The rows kernel's form: the widened quant times the block's scale.
        uint32_t word;
        std::memcpy(&word, dev.data() + (g & ~int64_t{3}), 4);
        float four[4];
        q8::Widen4(word, four);
        ASSERT_EQ(FloatBits(ew::Mul(q8::Scales(dev.data(), n)[g / 32], four[g & 3])), FloatBits(want[j])) << g;
      }
    }
  }
  for (uint32_t b = 0; b < 256; b++)
    for (int at = 0; at < 4; at++) {
      float four[4];
      q8::Widen4(b << (8 * at), four);
      ASSERT_EQ(four[at], static_cast<float>(static_cast<int8_t>(b))) << "byte " << b << " at " << at;
    }
  std::printf("cuda q8_0 layout: %ld weights read back exactly, every byte widened exactly\n", checked);
}

// The upload's repack (q8_upload.h), split over threads straight from the
// CPU rows, gives the bytes of the whole-matrix Repack above, every byte
// written (the two start from different fills), at 1 to 7 threads and at
// shapes whose rows split into several grains.
TEST(CudaElementwise, Q8_0RepackOverThreadsIsTheWholeMatrixRepack) {
  int compared = 0;
  for (auto [rows, cols] : {std::pair{1, 32}, {37, 288}, {4096, 512}, {1500, 2048}}) {
    const int64_t n = int64_t{rows} * cols;
    const std::vector<float> src = Random(static_cast<size_t>(n), rows * 3 + cols, 2.0f);
    std::vector<unsigned char> q(RowBytes(DType::kQ8_0, cols) * rows), plain(q.size());
    EncodeF32(DType::kQ8_0, src.data(), rows, cols, q.data());
    const Weights w{DType::kQ8_0, q.data(), rows, cols};
    UnpackQ8_0Rows(w, plain.data());
    std::vector<unsigned char> want(q.size(), 0x00);
    q8::Repack(plain.data(), n, want.data());
    for (int threads : {1, 2, 3, 7}) {
      std::vector<unsigned char> got(q.size(), 0xAA);
      q8::RepackMatrix(w, got.data(), threads);
      ASSERT_TRUE(got == want) << rows << "x" << cols << " on " << threads << " threads";
      compared++;
    }
  }
  std::printf("cuda q8_0 upload: %d repacks over threads byte for byte the whole-matrix repack\n", compared);
}

// A weight matrix's staged upload (staged_upload.h) with memcpy as the copy,
// each buffer's copies run only when the buffer is taken again or at the
// end (as the device's wait for its event would let them): for f32, bf16
// and q8_0, buffers from under a row to past the whole matrix, and 1 or 3
// threads, every byte of the device copy is written once, with the bytes
// of the whole matrix's copy (q8_0: RepackMatrix's); a buffer refilled
// before its copies ran, or a q8_0 row's scales sent to the wrong place,
// fails. The buffers take turns across matrices.
TEST(CudaElementwise, StagedUploadWritesTheWholeCopyOnceForAnyBufferSize) {
  int uploads = 0;
  long fills = 0;
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0})
    for (auto [rows, cols] : {std::pair{1, 32}, {37, 288}, {300, 512}, {1000, 64}}) {
      const std::vector<float> src = Random(static_cast<size_t>(rows) * cols, rows * 7 + cols, 2.0f);
      std::vector<unsigned char> host(RowBytes(t, cols) * rows);
      EncodeF32(t, src.data(), rows, cols, host.data());
      const Weights w{t, host.data(), rows, cols};
      std::vector<unsigned char> want = host;
      if (t == DType::kQ8_0) q8::RepackMatrix(w, want.data(), 1);
      const size_t rb = w.row_bytes();
      for (size_t capacity : {rb - 1, rb, 3 * rb + 5, w.bytes() / 2, w.bytes(), 2 * w.bytes()})
        for (int threads : {1, 3}) {
          const size_t bytes = staged::BufferBytes(w, capacity);
          ASSERT_GE(bytes, rb);
          std::vector<unsigned char> buffers[2] = {std::vector<unsigned char>(bytes),
                                                   std::vector<unsigned char>(bytes)};
          std::vector<std::pair<staged::Piece, const unsigned char*>> queued[2];
          std::vector<unsigned char> got(w.bytes(), 0x5A);
          std::vector<int> written(w.bytes(), 0);
          const auto run = [&](int slot) {  // the slot's copies, as the device would run them
            for (auto& [p, from] : queued[slot]) {
              ASSERT_LE(p.src + p.bytes, bytes);
              ASSERT_LE(p.dst + p.bytes, got.size());
              std::memcpy(got.data() + p.dst, from + p.src, p.bytes);
              for (size_t i = p.dst; i < p.dst + p.bytes; i++) written[i]++;
            }
            queued[slot].clear();
          };
          int next = uploads % 2, taken = 0;
          std::vector<bool> sent(2, true);
          const Status st = staged::Upload(
              w, staged::RowsPerBuffer(w, bytes), 2, threads, &next,
              [&](int slot) -> Result<unsigned char*> {
                EXPECT_TRUE(sent[slot]) << "a buffer taken again before it was marked sent";
                run(slot);
                sent[slot] = false;
                taken++;
                return buffers[slot].data();
              },
              [&](const staged::Piece& p, const unsigned char* from) -> Status {
                const int slot = from == buffers[0].data() ? 0 : 1;
                queued[slot].push_back({p, from});
                return OkStatus();
              },
              [&](int slot) -> Status {
                sent[slot] = true;
                return OkStatus();
              });
          ASSERT_TRUE(st.ok()) << st.message();
          run(0);
          run(1);
          const int64_t per = staged::RowsPerBuffer(w, bytes);
          EXPECT_EQ(taken, (rows + per - 1) / per);
          EXPECT_EQ(next, (uploads % 2 + taken) % 2) << "the buffers take turns from one matrix to the next";
          ASSERT_TRUE(std::all_of(written.begin(), written.end(), [](int n) { return n == 1; }))
              << "every byte once: " << rows << "x" << cols << " dtype " << static_cast<int>(t) << " buffer " << bytes;
          ASSERT_TRUE(got == want) << rows << "x" << cols << " dtype " << static_cast<int>(t) << " buffer " << bytes
                                   << " on " << threads << " threads";
          uploads++;
          fills += taken;
        }
    }
  std::printf("cuda staged upload: %d matrices in %ld buffer fills, every device byte once and the whole copy's\n",
              uploads, fills);
}

// The device's Q4_K and Q6_K weights (kquant_layout.h, 8 a lane) have the
// bits of formats/quants' dequantization (itself bit-exact to gguf-py's,
// tests/quants_test.cc), for every weight of blocks of random bytes (every
// scale, min and quant pattern; finite f16 scales, as loading requires) and
// of blocks verity's quantizer writes from weights of several magnitudes.
// A scale read from the wrong sub-block or a nibble from the wrong half fails.
TEST(CudaElementwise, KQuantWeightsMatchTheCpuDequantization) {
  std::mt19937 rng(43);
  long checked = 0;
  for (uint32_t type : {kq::kQ4_K, kq::kQ6_K}) {
    const int bytes = kq::BlockBytes(type);
    const quants::Layout* layout = quants::FindLayout(type);
    ASSERT_NE(layout, nullptr);
    ASSERT_EQ(layout->block_bytes, bytes);
    ASSERT_EQ(layout->block_elems, kq::kBlockWeights);
    std::vector<unsigned char> blocks;
    const int random_blocks = 512;
    blocks.resize(static_cast<size_t>(random_blocks) * bytes);
    for (unsigned char& b : blocks) b = static_cast<unsigned char>(rng());
    for (int b = 0; b < random_blocks; b++) {  // finite f16 scales (exponent below 31), some subnormal
      unsigned char* block = blocks.data() + static_cast<size_t>(b) * bytes;
      for (int at : type == kq::kQ4_K ? std::vector<int>{0, 2} : std::vector<int>{208}) {
        block[at + 1] = static_cast<unsigned char>(block[at + 1] % 0x7c | (block[at + 1] & 0x80));
        if (b % 16 == 0) block[at + 1] &= 0x83;  // exponent 0: a subnormal scale
      }
    }
    for (float scale : {1e-3f, 0.05f, 1.0f, 40.0f}) {
      const std::vector<float> src = Random(4 * kq::kBlockWeights, static_cast<uint32_t>(scale * 1000) + type, scale);
      std::string out;
      const Status st = quants::Quantize(type, src.data(), static_cast<int64_t>(src.size()), &out, "test");
      ASSERT_TRUE(st.ok()) << st.message();
      blocks.insert(blocks.end(), out.begin(), out.end());
    }
    const int64_t n_blocks = static_cast<int64_t>(blocks.size()) / bytes;
    std::vector<float> want(static_cast<size_t>(n_blocks) * kq::kBlockWeights);
    const Status st = quants::Dequantize(type, blocks.data(), n_blocks, want.data(), "test");
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t b = 0; b < n_blocks; b++)
      for (int j0 = 0; j0 < kq::kBlockWeights; j0 += kq::kLaneWeights) {
        float got[kq::kLaneWeights];
        kq::Weights8(type, blocks.data() + b * bytes, j0, got);
        for (int i = 0; i < kq::kLaneWeights; i++, checked++)
          ASSERT_EQ(FloatBits(got[i]), FloatBits(want[static_cast<size_t>(b) * kq::kBlockWeights + j0 + i]))
              << layout->name << " block " << b << " weight " << j0 + i;
      }
  }
  // Every f16 bit pattern below infinity converts as the CPU converts it.
  for (uint32_t h = 0; h < 0x7c00; h++)
    for (uint32_t sign : {0u, 0x8000u}) {
      const unsigned char two[2] = {static_cast<unsigned char>(h), static_cast<unsigned char>((h | sign) >> 8)};
      ASSERT_EQ(FloatBits(kq::HalfToFloat(kq::U16(two))), FloatBits(verity::F16ToF32(static_cast<uint16_t>(h | sign))))
          << h;
    }
  std::printf(
      "cuda k-quant weights: %ld Q4_K and Q6_K weights equal the CPU's dequantization, every finite f16 "
      "scale converted exactly\n",
      checked);
}

TEST(CudaElementwise, SwiGLUMatchesTheReference) {
  std::vector<float> h = Random(4096, 1, 4.0f), h2 = Random(4096, 2);
  h.push_back(-100.0f);  // e^100 overflows: silu -> -0
  h2.push_back(1.0f);
  std::vector<float> want = h;
  SwiGLUReference(want.data(), h2.data(), static_cast<int>(h.size()));
  for (size_t i = 0; i < h.size(); i++) ASSERT_EQ(FloatBits(ew::SwiGLU(h[i], h2[i])), FloatBits(want[i])) << i;
}

// The CUDA RoPE path on the host: table of cos/sin from the inverse
// frequencies (as the backend builds it), then each pair rotated.
void RopeLikeTheKernel(float* vec, int size, int head_size, int pos, float theta, bool interleaved) {
  const int half = head_size / 2;
  std::vector<float> cs(2 * half);
  for (int i = 0; i < half; i++) {
    const float val = static_cast<float>(pos) * ew::RopeInvFreq(i, head_size, theta);
    cs[2 * i] = cosf(val);
    cs[2 * i + 1] = sinf(val);
  }
  for (int p = 0; p < size / 2; p++) {
    int a = 0, b = 0;
    ew::RopePairIndex((p / half) * head_size, p % half, head_size, interleaved, &a, &b);
    ew::RopePair(&vec[a], &vec[b], cs[2 * (p % half)], cs[2 * (p % half) + 1]);
  }
}

TEST(CudaElementwise, RopeMatchesTheReferenceInBothLayouts) {
  int vectors = 0;
  for (bool interleaved : {true, false})
    for (int head_size : {8, 64, 128})
      for (int pos : {0, 1, 17, 4095, 65537, 500000})
        for (float theta : {10000.0f, 500000.0f}) {
          const int size = 4 * head_size;
          std::vector<float> want = Random(size, pos + head_size), got = want;
          std::vector<float> inv_freq(head_size / 2);
          RopeBaseInverseFrequencies(theta, head_size, inv_freq.data());
          RopeReference(want.data(), size, head_size, pos, inv_freq.data(), interleaved);
          RopeLikeTheKernel(got.data(), size, head_size, pos, theta, interleaved);
          for (int i = 0; i < size; i++)
            ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i]))
                << "interleaved=" << interleaved << " hs=" << head_size << " pos=" << pos << " i=" << i;
          vectors++;
        }
  std::printf("cuda elementwise: %d RoPE vectors bit-exact\n", vectors);
}

TEST(CudaElementwise, RmsnormMatchesTheReferenceGivenTheSameSum) {
  for (int size : {64, 288, 4096}) {
    std::vector<float> x = Random(size, size), w = Random(size, size + 1), want(size);
    Rmsnorm(want.data(), x.data(), w.data(), size, 1e-5f);
    float ss = 0.0f;
    for (float v : x) ss += v * v;  // the reference's order (the kernel's block sum reorders it)
    const float scale = ew::RmsnormScale(ss, size, 1e-5f);
    for (int j = 0; j < size; j++) ASSERT_EQ(FloatBits(ew::RmsnormApply(x[j], w[j], scale)), FloatBits(want[j])) << j;
  }
}

// What AttentionDeviceArgs adds to the scores: a window, Gemma's scale and soft-cap.
struct Scoring {
  int window = 0;
  float scale_dim = 0.0f, softcap = 0.0f;
  float root(int hs) const { return ew::ScoreDivisor(scale_dim, hs); }
};

// Attention for one head at position n - 1 as the kernel computes it (tiles
// from the window's first position, online softmax).
std::vector<float> TiledAttention(const float* q, const float* k, const float* v, int n, int hs, int tile,
                                  const Scoring& sc = {}) {
  std::vector<float> acc(hs, 0.0f), scores(tile);
  ew::OnlineSoftmax st;
  for (int t0 = static_cast<int>(ew::FirstAttended(n - 1, sc.window)); t0 < n; t0 += tile) {
    const int len = std::min(tile, n - t0);
    float mx = -INFINITY;
    for (int j = 0; j < len; j++) {
      float dot = 0.0f;
      for (int i = 0; i < hs; i++) dot += q[i] * k[(t0 + j) * hs + i];
      scores[j] = ew::AttentionScore(dot, sc.root(hs), sc.softcap);
      mx = std::max(mx, scores[j]);
    }
    const float factor = ew::OnlineSoftmaxRescale(&st, mx);
    for (int j = 0; j < len; j++) {
      scores[j] = ew::OnlineSoftmaxWeight(st, scores[j]);
      st.s += scores[j];
    }
    for (int i = 0; i < hs; i++) {
      float a = acc[i] * factor;
      for (int j = 0; j < len; j++) a += scores[j] * v[(t0 + j) * hs + i];
      acc[i] = a;
    }
  }
  for (float& a : acc) a /= st.s;
  return acc;
}

TEST(CudaElementwise, OnlineSoftmaxAttentionAgreesWithTheReference) {
  const int hs = 16;
  double worst = 0.0;
  int cases = 0;
  for (int n : {1, 2, 7, 100, 1025, 3000})
    for (int tile : {1, 7, 256, 1024}) {
      std::vector<float> q = Random(hs, n, 3.0f), k = Random(static_cast<size_t>(n) * hs, n + 1),
                         v = Random(static_cast<size_t>(n) * hs, n + 2), scores(n), want(hs);
      AttentionArgs a{want.data(), q.data(), k.data(), v.data(), hs, scores.data(), n - 1, 1, 1, hs, n};
      AttendOneHead(a, 0);
      std::vector<float> got = TiledAttention(q.data(), k.data(), v.data(), n, hs, tile);
      for (int i = 0; i < hs; i++) {
        const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
        worst = std::max(worst, err);
        ASSERT_LE(err, 2e-5 * (1.0 + std::fabs(want[i]))) << "n=" << n << " tile=" << tile << " i=" << i;
      }
      cases++;
    }
  std::printf("cuda elementwise: %d tiled attentions, worst abs error %.3g\n", cases, worst);
  EXPECT_GT(worst, 0.0);  // the reordering is real: this compares, it does not echo
}

// One head's decode attention at position n - 1 as the split kernel
// computes it: from the window's first position, chunks of `chunk`
// positions, each a softmax partial (its max m, sum of weights s, and
// weighted values) written at stride hs + 2, then ew::CombineChunks folding
// them in chunk order. A single chunk is divided directly, as the kernel does.
std::vector<float> SplitAttention(const float* q, const float* k, const float* v, int n, int hs, int chunk,
                                  const Scoring& sc = {}) {
  const int first = static_cast<int>(ew::FirstAttended(n - 1, sc.window));
  const int chunks = (n - first + chunk - 1) / chunk;
  std::vector<float> partials(static_cast<size_t>(chunks) * (hs + 2)), out(hs);
  for (int c = 0; c < chunks; c++) {
    const int t0 = first + c * chunk, len = std::min(chunk, n - t0);
    std::vector<float> w(len);
    float m = -INFINITY, sum = 0.0f;
    for (int j = 0; j < len; j++) {
      float dot = 0.0f;
      for (int i = 0; i < hs; i++) dot += q[i] * k[static_cast<size_t>(t0 + j) * hs + i];
      w[j] = ew::AttentionScore(dot, sc.root(hs), sc.softcap);
      m = std::max(m, w[j]);
    }
    for (int j = 0; j < len; j++) sum += w[j] = expf(ew::Sub(w[j], m));
    float* p = &partials[static_cast<size_t>(c) * (hs + 2)];
    p[0] = m, p[1] = sum;
    for (int i = 0; i < hs; i++) {
      float a = 0.0f;
      for (int j = 0; j < len; j++) a += w[j] * v[static_cast<size_t>(t0 + j) * hs + i];
      p[2 + i] = chunks == 1 ? a / sum : a;
    }
  }
  for (int i = 0; i < hs; i++)
    out[i] = chunks == 1 ? partials[2 + i]
                         : ew::CombineChunks(partials.data(), chunks, hs, i, [](const float* x) { return *x; });
  return out;
}

TEST(CudaElementwise, SplitAttentionCombineAgreesWithTheReference) {
  double worst = 0.0;
  int cases = 0;
  for (int hs : {8, 64, 128})
    for (int n : {1, 2, 255, 256, 257, 513, 1000, 2048}) {
      std::vector<float> q = Random(hs, n, 3.0f), k = Random(static_cast<size_t>(n) * hs, n + 1),
                         v = Random(static_cast<size_t>(n) * hs, n + 2), scores(n), want(hs);
      AttentionArgs a{want.data(), q.data(), k.data(), v.data(), hs, scores.data(), n - 1, 1, 1, hs, n};
      AttendOneHead(a, 0);
      const std::vector<float> got = SplitAttention(q.data(), k.data(), v.data(), n, hs, 256);
      for (int i = 0; i < hs; i++) {
        const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
        worst = std::max(worst, err);
        ASSERT_LE(err, 2e-5 * (1.0 + std::fabs(want[i]))) << "hs=" << hs << " n=" << n << " i=" << i;
      }
      cases++;
    }
  std::printf("cuda elementwise: %d split attentions (chunks of 256, combined in order), worst abs error %.3g\n", cases,
              worst);
  EXPECT_GT(worst, 0.0);  // the reordering is real: this compares, it does not echo
}

// A prefill block's attention products, one batched call for every query
// head (GemmAttention): head h's offsets are those the per-KV-head strided
// calls used (KV head g's call took its group's heads j = 0.. at stride
// head_size in q and out and tn in the scores, its K and V at stride 0), and
// the heads' score matrices tile [heads][T][n] without overlap.
TEST(CudaElementwise, AttentionHeadOffsetsAreThePerKvHeadCalls) {
  int checked = 0;
  for (auto [heads, kv] : {std::pair{8, 2}, {32, 32}, {32, 4}, {6, 6}, {12, 3}, {64, 8}})
    for (int hs : {64, 80, 128})
      for (int64_t tn : {int64_t{16} * 16, int64_t{512} * 2048}) {
        const int group = heads / kv;
        std::vector<bool> covered(static_cast<size_t>(heads), false);
        for (int g = 0; g < kv; g++)
          for (int j = 0; j < group; j++) {
            const int h = g * group + j;
            const ew::AttentionHeadOffsets at = ew::AttentionHeadAt(h, group, hs, tn);
            EXPECT_EQ(at.kv, int64_t{g} * hs) << "head " << h;
            EXPECT_EQ(at.q, int64_t{g} * group * hs + int64_t{j} * hs) << "head " << h;
            EXPECT_EQ(at.scores, int64_t{g} * group * tn + j * tn) << "head " << h;
            ASSERT_EQ(at.scores % tn, 0);
            const int64_t slot = at.scores / tn;
            ASSERT_TRUE(slot >= 0 && slot < heads && !covered[static_cast<size_t>(slot)]) << "head " << h;
            covered[static_cast<size_t>(slot)] = true;
            checked++;
          }
      }
  std::printf("cuda elementwise: %d query heads' attention offsets are the per-KV-head calls'\n", checked);
}

// Windows, Gemma's score scale and its soft-cap, as the tiled and split
// kernels take them from AttentionDeviceArgs, against the reference's
// attention of the same AttentionArgs (Windowed, as every CPU attention).
TEST(CudaElementwise, WindowsScalesAndSoftCapsAgreeWithTheReference) {
  const int hs = 32;
  double worst = 0.0;
  int cases = 0;
  const Scoring scorings[] = {{0, 0.0f, 0.0f}, {7, 0.0f, 0.0f},  {300, 0.0f, 0.0f},  {0, 24.0f, 0.0f},
                              {0, 0.0f, 5.0f}, {9, 48.0f, 2.0f}, {256, 24.0f, 50.0f}};
  for (const Scoring& sc : scorings)
    for (int n : {1, 6, 7, 8, 255, 300, 301, 700}) {
      std::vector<float> q = Random(hs, n, 4.0f), k = Random(static_cast<size_t>(n) * hs, n + 1),
                         v = Random(static_cast<size_t>(n) * hs, n + 2), scores(n), want(hs);
      AttentionArgs a{want.data(), q.data(), k.data(), v.data(), hs,        scores.data(), n - 1,
                      1,           1,        hs,       n,        sc.window, sc.scale_dim,  sc.softcap};
      ASSERT_EQ(ew::FirstAttended(a.pos, a.window), a.first()) << "n=" << n << " window=" << sc.window;
      ASSERT_EQ(FloatBits(sc.root(hs)), FloatBits(a.score_divisor()));
      AttendOneHead(Windowed(a), 0);
      for (const std::vector<float>& got : {TiledAttention(q.data(), k.data(), v.data(), n, hs, 64, sc),
                                            SplitAttention(q.data(), k.data(), v.data(), n, hs, 256, sc)})
        for (int i = 0; i < hs; i++) {
          const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
          worst = std::max(worst, err);
          ASSERT_LE(err, 2e-5 * (1.0 + std::fabs(want[i])))
              << "n=" << n << " window=" << sc.window << " scale_dim=" << sc.scale_dim << " softcap=" << sc.softcap;
        }
      cases++;
    }
  std::printf("cuda elementwise: %d windowed/scaled/soft-capped attentions (tiled and split), worst abs error %.3g\n",
              cases, worst);
  EXPECT_GT(worst, 0.0);
}

// Gemma's per-element steps: the GeGLU gate and the soft-cap bit for bit as
// the reference computes them (the kernels' tanhf is CUDA's, within its ulp bound).
TEST(CudaElementwise, GeGLUAndSoftCapMatchTheReference) {
  std::vector<float> h = Random(4096, 3, 4.0f), h2 = Random(4096, 4);
  for (float x : {0.0f, -0.0f, 30.0f, -30.0f, 1e-30f}) h.push_back(x), h2.push_back(1.0f);
  std::vector<float> want = h;
  GeGLUReference(want.data(), h2.data(), static_cast<int>(h.size()));
  for (size_t i = 0; i < h.size(); i++)
    ASSERT_EQ(FloatBits(ew::GeGLU(h[i], h2[i])), FloatBits(want[i])) << i << " " << h[i];
  for (float cap : {3.0f, 30.0f, 50.0f})
    for (float x : h)
      ASSERT_EQ(FloatBits(ew::SoftCap(x * 10.0f, cap)), FloatBits(SoftCap(x * 10.0f, cap))) << x << " " << cap;
  std::printf("cuda elementwise: GeGLU of %zu values and soft-caps at 3 caps bit-exact\n", h.size());
}

TEST(CudaElementwise, CombineChunksOfOneChunkIsItsDivision) {
  // One partial: the factor is e^0 = 1 exactly, so the combine is acc / s.
  const float p[4] = {0.75f, 3.0f, 1.5f, -2.25f};
  auto load = [](const float* x) { return *x; };
  EXPECT_EQ(FloatBits(ew::CombineChunks(p, 1, 2, 0, load)), FloatBits(1.5f / 3.0f));
  EXPECT_EQ(FloatBits(ew::CombineChunks(p, 1, 2, 1, load)), FloatBits(-2.25f / 3.0f));
  // Two chunks with maxes 0 and 1: chunk 0 is scaled by e^-1 before the fold.
  const float two[8] = {0.0f, 2.0f, 4.0f, 8.0f, 1.0f, 1.0f, 2.0f, 2.0f};
  const float f = expf(-1.0f), total = 2.0f * f + 1.0f * 1.0f;
  EXPECT_FLOAT_EQ(ew::CombineChunks(two, 2, 2, 0, load), (4.0f * f + 2.0f) / total);
}

TEST(CudaElementwise, OnlineSoftmaxFirstTileAndRescale) {
  ew::OnlineSoftmax st;
  EXPECT_EQ(ew::OnlineSoftmaxRescale(&st, 2.0f), 0.0f);  // nothing accumulated yet
  EXPECT_EQ(st.m, 2.0f);
  st.s = 1.0f;
  const float f = ew::OnlineSoftmaxRescale(&st, 3.0f);
  EXPECT_FLOAT_EQ(f, expf(-1.0f));
  EXPECT_FLOAT_EQ(st.s, expf(-1.0f));
  EXPECT_EQ(ew::OnlineSoftmaxRescale(&st, 1.0f), 1.0f);  // a smaller tile max keeps the scale
}

TEST(CudaElementwise, ArgmaxMatchesMaxElementWithTies) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; trial++) {
    const int n = 1 + static_cast<int>(rng() % 5000);
    std::vector<float> x(n);
    for (float& f : x) f = static_cast<float>(static_cast<int>(rng() % 50));  // many ties
    // As the kernel: strided per-thread bests, then combined in thread order.
    const int threads = 256;
    float bv = 0;
    int bi = -1;
    for (int t = 0; t < threads; t++) {
      float v = 0;
      int idx = -1;
      for (int i = t; i < n; i += threads)
        if (idx < 0 || ew::ArgmaxBeats(x[i], i, v, idx)) v = x[i], idx = i;
      if (idx >= 0 && (bi < 0 || ew::ArgmaxBeats(v, idx, bv, bi))) bv = v, bi = idx;
    }
    ASSERT_EQ(bi, std::max_element(x.begin(), x.end()) - x.begin()) << "trial " << trial;
  }
}

TEST(CudaElementwise, MoeTopKMatchesTheEngineRouting) {
  const std::unique_ptr<Backend> reference = MakeReference();
  std::mt19937 rng(11);
  int routed = 0;
  for (int trial = 0; trial < 500; trial++) {
    const int n = 2 + static_cast<int>(rng() % 14), k = 1 + static_cast<int>(rng() % n);
    std::vector<float> logits(n);
    for (float& f : logits) f = static_cast<float>(static_cast<int>(rng() % 6)) * 0.5f;  // ties
    // The engine's routing: the CPU backends' RouteTopK, which the forward calls.
    std::vector<int> order(k), chosen(k);
    std::vector<float> want(k), weights(k);
    reference->RouteTopK(logits.data(), n, k, order.data(), want.data());
    ew::MoeTopK(logits.data(), n, k, chosen.data(), weights.data());
    for (int j = 0; j < k; j++) {
      ASSERT_EQ(chosen[j], order[j]) << "trial " << trial << " j " << j;
      ASSERT_EQ(FloatBits(weights[j]), FloatBits(want[j]));
    }
    routed++;
  }
  std::printf("cuda elementwise: %d MoE routings match\n", routed);
}

// ---- The tensor-core rows kernel (mma_rows.cu, mma_map.h) on the CPU.

// One mma.m16n8k16 as the PTX ISA specifies it (mma_spec.h), element e of
// A, B, C where mma_map.h's Ptx* layout places it. `a[lane][e]`,
// `b[lane][e]` hold values; `d[lane][e]` is updated.
struct Bf16Layout {
  static int ARow(int lane, int e) { return mma::PtxARow(lane, e); }
  static int ACol(int lane, int e) { return mma::PtxACol(lane, e); }
  static int BRow(int lane, int e) { return mma::PtxBRow(lane, e); }
  static int BCol(int lane) { return mma::PtxBCol(lane); }
  static int CRow(int lane, int e) { return mma::PtxCRow(lane, e); }
  static int CCol(int lane, int e) { return mma::PtxCCol(lane, e); }
};
void MmaAsSpecified(const float (&a)[32][8], const float (&b)[32][4], float (&d)[32][4]) {
  test::MmaAsSpecified<16, 8, 16, 8, 4, Bf16Layout>(a, b, d);
}

// The kernel's registers hold what the spec says they must: in each product
// q of a step, element (row i, k) of A is the weight of row i at the column
// that element (k, vector j) of B holds of vector j, the same column for
// every row and vector; and a step's two products take its 32 columns once.
// The accumulators the kernel stores as (row, vector) are the spec's.
TEST(CudaElementwise, MmaFragmentsPairEveryWeightWithItsColumn) {
  int pairs = 0;
  for (int step = 0; step < 3; step++) {
    std::vector<int> columns;
    for (int q = 0; q < 2; q++) {
      int a_col[16][16], b_col[16][8], a_row[16][16], b_vec[16][8];
      for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++)
          for (int half = 0; half < 2; half++) {  // register r's two bf16: elements 2r, 2r+1
            const int e = 2 * r + half, i = mma::PtxARow(lane, e), k = mma::PtxACol(lane, e);
            a_row[i][k] = mma::ARow(lane, r);
            a_col[i][k] = static_cast<int>(mma::StepColumn(step, lane)) + 2 * mma::AWord(q, r) + half;
          }
        for (int r = 0; r < 2; r++)
          for (int half = 0; half < 2; half++) {
            const int e = 2 * r + half, k = mma::PtxBRow(lane, e), j = mma::PtxBCol(lane);
            b_vec[k][j] = mma::BVector(lane);
            b_col[k][j] = static_cast<int>(mma::StepColumn(step, lane)) + 2 * mma::BWord(q, r) + half;
          }
      }
      for (int k = 0; k < 16; k++) {
        for (int i = 0; i < 16; i++) {
          ASSERT_EQ(a_row[i][k], i) << "A (" << i << ", " << k << ") loads another row";
          ASSERT_EQ(a_col[i][k], a_col[0][k]) << "A's column k=" << k << " differs between rows";
        }
        for (int j = 0; j < 8; j++) {
          ASSERT_EQ(b_vec[k][j], j) << "B (" << k << ", " << j << ") loads another vector";
          ASSERT_EQ(b_col[k][j], a_col[0][k]) << "B's k=" << k << " is not A's column";
          pairs++;
        }
        columns.push_back(a_col[0][k]);
      }
    }
    std::sort(columns.begin(), columns.end());
    for (int c = 0; c < mma::kStepCols; c++) ASSERT_EQ(columns[c], step * mma::kStepCols + c) << "step " << step;
  }
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < 4; i++) {
      ASSERT_EQ(mma::CRow(lane, i), mma::PtxCRow(lane, i));
      ASSERT_EQ(mma::CVector(lane, i), mma::PtxCCol(lane, i));
    }
  std::printf("cuda mma fragments: %d (k, vector) pairs of 3 steps, each weight with its own column of x\n", pairs);
}

// hi + lo holds x to 2^-17 of |x| (normal x), and 0, -0 and bf16 values
// exactly; an x whose hi is infinite has lo 0.
TEST(CudaElementwise, MmaSplitHoldsSixteenBitsOfX) {
  std::vector<float> xs = Random(100000, 41, 3.0f);
  xs.insert(xs.end(), {0.0f, -0.0f, 1.0f, -2.5f, 1e-30f, 3e30f, 0.1f});
  // Past the largest bf16 and infinite: hi carries it, lo is 0 (no inf - inf).
  for (float big : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::max()}) {
    uint16_t hi, lo;
    mma::SplitBF16(big, &hi, &lo);
    EXPECT_EQ(lo, 0) << big;
    EXPECT_TRUE(std::isinf(ew::BF16ToF32(hi))) << big;
  }
  double worst = 0;
  for (float x : xs) {
    uint16_t hi, lo;
    mma::SplitBF16(x, &hi, &lo);
    const double back = static_cast<double>(ew::BF16ToF32(hi)) + ew::BF16ToF32(lo);
    if (x == 0.0f) {
      ASSERT_EQ(back, 0.0);
      continue;
    }
    worst = std::max(worst, std::fabs(back - x) / std::fabs(x));
    if (ew::BF16ToF32(ew::F32ToBF16(x)) == x) {
      ASSERT_EQ(back, x);
    }
  }
  EXPECT_LE(worst, std::ldexp(1.0, -17));
  std::printf("cuda mma split: %zu values, worst relative error of hi + lo %.3g (bound 2^-17 = %.3g)\n", xs.size(),
              worst, std::ldexp(1.0, -17));
}

// A matrix as the tensor-core kernel reads it: bf16 values, or q8_0 quants
// with one scale per row and 32 columns (q8_layout.h's order).
struct MmaMatrix {
  std::vector<uint16_t> bf16;
  std::vector<int8_t> quants;
  std::vector<float> scales;
  std::vector<unsigned char> device;  // q8_0: q8_layout.h's bytes (the quants, then the scales)
  double At(int64_t row, int cols, int64_t col) const {
    const int64_t g = row * cols + col;
    return bf16.empty() ? static_cast<double>(scales[g / 32]) * quants[g] : ew::BF16ToF32(bf16[g]);
  }
};
MmaMatrix RandomMmaMatrix(DType t, int rows, int cols, uint32_t seed) {
  const std::vector<float> f = Random(static_cast<size_t>(rows) * cols, seed, 0.5f);
  MmaMatrix m;
  if (t == DType::kBF16) {
    for (float v : f) m.bf16.push_back(ew::F32ToBF16(v));
    return m;
  }
  std::mt19937 rng(seed);
  for (size_t i = 0; i < f.size(); i++) m.quants.push_back(static_cast<int8_t>(static_cast<int>(rng() % 255) - 127));
  for (size_t b = 0; b < f.size() / 32; b++) m.scales.push_back(std::fabs(f[b]) / 64 + 1e-3f);
  m.device.resize(static_cast<size_t>(q8::Bytes(static_cast<int64_t>(f.size()))));
  std::memcpy(m.device.data(), m.quants.data(), m.quants.size());
  std::memcpy(m.device.data() + m.quants.size(), m.scales.data(), m.scales.size() * sizeof(float));
  return m;
}

// The kernel's arithmetic for one launch, block by block and warp by warp as
// mma_rows.cu runs it (the same map functions), each mma as specified:
// out[target][t x rows] for stacked matrices `w` (rows x cols each; with
// SwiGLU the gate and the up).
std::vector<std::vector<float>> SimulateRowsMma(const LaunchPlan& p, DType t, bool swiglu,
                                                const std::vector<int>& stack, const std::vector<MmaMatrix>& w,
                                                const float* x, int cols, int T, std::vector<int>* written) {
  std::vector<int> begin = {0};
  for (int r : stack) begin.push_back(begin.back() + r);
  const int count = static_cast<int>(stack.size()), total = begin.back(), kRows = p.tile, MT = kRows / 16;
  const int warps = static_cast<int>(p.block.x) / 32, kMats = swiglu ? 2 : 1;
  const bool q8 = t == DType::kQ8_0;
  auto begin_at = [&](int i) { return begin[i]; };
  std::vector<std::vector<float>> out(count);
  for (int i = 0; i < count; i++) out[i].assign(static_cast<size_t>(T) * stack[i], 0.0f);
  auto half_of = [](uint32_t word, int half) {
    return ew::BF16ToF32(static_cast<uint16_t>(half ? word >> 16 : word & 0xffffu));
  };
  for (unsigned bx = 0; bx < p.grid.x; bx++)
    for (unsigned bz = 0; bz < p.grid.z; bz++)
      for (unsigned by = 0; by < p.grid.y; by++) {
        const int64_t first = map::FirstRow(by, bz, p.grid.y, 1, 0, kRows);
        if (first >= total) continue;
        const int v0 = static_cast<int>(bx) * 32, nv = std::min(32, T - v0);
        std::vector<float> partial(static_cast<size_t>(kMats) * warps * kRows * 32);
        // Lane `lane`'s row (half h of tile m) of matrix k: its matrix, its
        // row there and the matrix's rows.
        struct RowAt {
          const MmaMatrix* mat;
          int row, rows;
        };
        auto row_of = [&](int k, int m, int lane, int h) {
          const int g = static_cast<int>(std::min<int64_t>(first + m * 16 + mma::ARow(lane, h), int64_t{total} - 1));
          const map::StackedRow at = map::Locate(begin_at, count, g);
          return RowAt{&w[swiglu ? k : at.target], at.row, begin[at.target + 1] - begin[at.target]};
        };
        for (int warp = 0; warp < warps; warp++) {
          std::vector<float> acc(static_cast<size_t>(kMats) * MT * 4 * 32 * 4, 0.0f);  // [k][m][j][lane][i]
          auto A = [&](int k, int m, int j, int lane, int i) -> float& {
            return acc[(((static_cast<size_t>(k) * MT + m) * 4 + j) * 32 + lane) * 4 + i];
          };
          for (int s = warp; s < cols / 32; s += warps)
            for (int j = 0; j < 4 && j * 8 < nv; j++) {
              std::vector<float> block(static_cast<size_t>(kMats) * MT * 32 * 4, 0.0f);  // q8_0: the step's sums
              for (int q = 0; q < 2; q++)
                for (int k = 0; k < kMats; k++)
                  for (int m = 0; m < MT; m++)
                    for (int part = 0; part < 2; part++) {  // hi, then lo
                      float fa[32][8], fb[32][4], d[32][4];
                      for (int lane = 0; lane < 32; lane++) {
                        const int64_t c = mma::StepColumn(s, lane);
                        for (int r = 0; r < 4; r++) {  // A's word as the kernel builds and picks it
                          const auto [mat, row, rows] = row_of(k, m, lane, r & 1);
                          uint32_t cw[4];
                          if (q8) {
                            const unsigned char* qs = q8::RowQuants(mat->device.data(), row, cols) + c;
                            uint32_t lo_q = 0, hi_q = 0;
                            for (int b = 0; b < 4; b++) {
                              lo_q |= static_cast<uint32_t>(static_cast<uint8_t>(qs[b])) << (8 * b);
                              hi_q |= static_cast<uint32_t>(static_cast<uint8_t>(qs[4 + b])) << (8 * b);
                            }
                            mma::QuantChunkWords(lo_q, hi_q, cw);
                          } else {
                            const uint16_t* chunk = mat->bf16.data() + static_cast<size_t>(row) * cols + c;
                            for (int i = 0; i < 4; i++) cw[i] = mma::PackBF16(chunk[2 * i], chunk[2 * i + 1]);
                          }
                          const uint32_t word = mma::ChunkWord(cw[0], cw[1], cw[2], cw[3], mma::AWord(q, r));
                          for (int half = 0; half < 2; half++) fa[lane][2 * r + half] = half_of(word, half);
                        }
                        // B as LoadVector makes it: the lane's 8 values, split and packed.
                        const int v = j * 8 + mma::BVector(lane);
                        float xs[8] = {};
                        for (int i = 0; i < 8 && v < nv; i++) xs[i] = x[static_cast<size_t>(v0 + v) * cols + c + i];
                        uint32_t hi[4], lo[4];
                        mma::VectorWords(xs, hi, lo);
                        for (int r = 0; r < 2; r++)
                          for (int half = 0; half < 2; half++)
                            fb[lane][2 * r + half] = half_of((part == 0 ? hi : lo)[mma::BWord(q, r)], half);
                        for (int i = 0; i < 4; i++)
                          d[lane][i] =
                              q8 ? block[((static_cast<size_t>(k) * MT + m) * 32 + lane) * 4 + i] : A(k, m, j, lane, i);
                      }
                      MmaAsSpecified(fa, fb, d);
                      for (int lane = 0; lane < 32; lane++)
                        for (int i = 0; i < 4; i++)
                          (q8 ? block[((static_cast<size_t>(k) * MT + m) * 32 + lane) * 4 + i] : A(k, m, j, lane, i)) =
                              d[lane][i];
                    }
              if (q8)  // each row's scale of the step's block, then added
                for (int k = 0; k < kMats; k++)
                  for (int m = 0; m < MT; m++)
                    for (int lane = 0; lane < 32; lane++)
                      for (int i = 0; i < 4; i++) {
                        const auto [mat, row, rows] = row_of(k, m, lane, mma::CHalf(i));
                        const float scale = q8::RowScales(mat->device.data(), rows, cols, row)[s];
                        A(k, m, j, lane, i) = std::fma(
                            scale, block[((static_cast<size_t>(k) * MT + m) * 32 + lane) * 4 + i], A(k, m, j, lane, i));
                      }
            }
          for (int k = 0; k < kMats; k++)
            for (int m = 0; m < MT; m++)
              for (int j = 0; j < 4; j++)
                for (int lane = 0; lane < 32; lane++)
                  for (int i = 0; i < 4; i++)
                    partial[static_cast<size_t>(k) * warps * kRows * 32 +
                            mma::Partial(warp, kRows, m * 16 + mma::CRow(lane, i), j * 8 + mma::CVector(lane, i))] =
                        A(k, m, j, lane, i);
        }
        for (int o = 0; o < kRows * 32; o++) {
          const int row = o / 32, v = o % 32;
          if (v >= nv || first + row >= total) continue;
          float sum[2];
          for (int k = 0; k < kMats; k++) {
            const float* pk = partial.data() + static_cast<size_t>(k) * warps * kRows * 32;
            sum[k] = pk[mma::Partial(0, kRows, row, v)];
            for (int wi = 1; wi < warps; wi++) sum[k] += pk[mma::Partial(wi, kRows, row, v)];
          }
          const map::StackedRow at = map::Locate(begin_at, count, static_cast<int>(first + row));
          const size_t idx = map::OutputIndex(bx, 32, v, stack[at.target], at.row);
          out[at.target][idx] = swiglu ? ew::SwiGLU(sum[0], sum[1]) : sum[0];
          (*written)[begin[at.target] * T + idx]++;
        }
      }
  return out;
}

// The whole launch simulated (SimulateRowsMma) on stacked targets (q/k/v
// shapes, rows that are not whole tiles), the gate/up pair with SwiGLU, and
// batches of 1 to 40 vectors, bf16 and q8_0: every output written once,
// each within 2^-14 of sum_j |w_ij x_j| of the exact product of the same
// weights (x's hi + lo holds 2^-17 of it; the rest is f32 accumulation over
// the steps and the warps' partials).
TEST(CudaElementwise, MmaRowsSimulationMatchesTheExactProduct) {
  struct Case {
    std::vector<int> stack;
    int cols, T;
    bool swiglu;
  };
  const std::vector<Case> cases = {{{64, 16, 16}, 256, 5, false}, {{48}, 512, 32, false}, {{7, 9, 33}, 96, 1, false},
                                   {{40}, 64, 40, false},         {{24}, 320, 9, true},   {{100}, 32, 33, true}};
  double worst = 0;
  long outputs = 0;
  int launches = 0;
  for (DType t : {DType::kBF16, DType::kQ8_0})
    for (const Case& cs : cases) {
      const int count = static_cast<int>(cs.stack.size());
      std::vector<MmaMatrix> w;
      for (int i = 0; i < (cs.swiglu ? 2 : count); i++)
        w.push_back(RandomMmaMatrix(t, cs.stack[cs.swiglu ? 0 : i], cs.cols, 50 + i));
      const std::vector<float> x = Random(static_cast<size_t>(cs.T) * cs.cols, 60, 2.0f);
      int total = 0;
      for (int r : cs.stack) total += r;
      const LaunchPlan p = PlanRowsMma(t, total, cs.cols, cs.T, cs.swiglu, DeviceLimits{}).value();
      std::vector<int> written(static_cast<size_t>(total) * cs.T, 0);
      const auto out = SimulateRowsMma(p, t, cs.swiglu, cs.stack, w, x.data(), cs.cols, cs.T, &written);
      launches++;
      for (size_t o = 0; o < written.size(); o++) ASSERT_EQ(written[o], 1) << DTypeName(t) << " output " << o;
      for (int i = 0; i < count; i++) {
        const int rows = cs.stack[i];
        for (int v = 0; v < cs.T; v++)
          for (int r = 0; r < rows; r++) {
            double want[2] = {}, mag = 0;
            for (int k = 0; k < (cs.swiglu ? 2 : 1); k++)
              for (int c = 0; c < cs.cols; c++) {
                const double wv = w[cs.swiglu ? k : i].At(r, cs.cols, c), xv = x[static_cast<size_t>(v) * cs.cols + c];
                want[k] += wv * xv;
                if (k == 0) mag += std::fabs(wv * xv);
              }
            const float got = out[i][static_cast<size_t>(v) * rows + r];
            const double exact =
                cs.swiglu ? ew::SwiGLU(static_cast<float>(want[0]), static_cast<float>(want[1])) : want[0];
            if (!cs.swiglu) {
              const double err = std::fabs(got - exact) / (mag + 1e-30);
              ASSERT_LE(err, std::ldexp(1.0, -14))
                  << DTypeName(t) << " target " << i << " row " << r << " vector " << v;
              worst = std::max(worst, err);
            } else {
              ASSERT_NEAR(got, exact, 1e-3 * (1 + std::fabs(exact))) << DTypeName(t) << " row " << r << " vector " << v;
            }
            outputs++;
          }
      }
    }
  std::printf(
      "cuda mma rows: %ld outputs of %d simulated launches (bf16 and q8_0) written once, worst error %.3g of sum "
      "|w x| (bound 2^-14)\n",
      outputs, launches, worst);
}

}  // namespace
}  // namespace verity::kernels::cuda
