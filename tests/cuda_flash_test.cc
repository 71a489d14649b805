// The flash-style prefill attention (kernels/cuda/flash_attention.cu) on the
// CPU: its fragment map (flash_map.h) against the PTX ISA's layout of
// mma.m16n8k8 with TF32 inputs, the reuse of the scores' registers as the
// weights' (each weight meets its own position's value), and whole launches
// simulated block by block, warp by warp and lane by lane through the same
// map and per-score functions, each mma as the ISA specifies it, against
// run.c's attention (AttendOneHead). What the device adds, the device test
// CudaDevice.FlashPrefillAttentionMatchesTheReference checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/float_values.h"
#include "kernels/cpu/backends.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/flash_map.h"
#include "kernels/kernels.h"
#include "tests/mma_spec.h"

namespace verity::kernels::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

// Registers of one warp: [lane][register].
template <int N>
using Regs = float[32][N];

// One m16n8k8 TF32 product as the PTX ISA specifies it (mma_spec.h),
// element e of A, B, C where flash_map.h's Ptx* layout places it.
struct Tf32Layout {
  static int ARow(int lane, int e) { return flash::PtxARow(lane, e); }
  static int ACol(int lane, int e) { return flash::PtxACol(lane, e); }
  static int BRow(int lane, int e) { return flash::PtxBRow(lane, e); }
  static int BCol(int lane) { return flash::PtxBCol(lane); }
  static int CRow(int lane, int e) { return flash::PtxCRow(lane, e); }
  static int CCol(int lane, int e) { return flash::PtxCCol(lane, e); }
};
void MmaTf32AsSpecified(const Regs<4>& a, const Regs<2>& b, Regs<4>& d) {
  test::MmaAsSpecified<16, 8, 8, 4, 2, Tf32Layout>(a, b, d);
}

// The kernel's registers are the ISA's, and the scores' C registers reused
// as the weights' A registers pair each weight with its own position: A's
// register r of lane holds S's (row, position) ARow(lane, r),
// PairedPosition(ACol(lane, r)), and V's B register r holds position
// PairedPosition(BRow(lane, r)) = VPosition(lane, r); PairedPosition is a
// permutation of a tile's 8 positions.
TEST(CudaFlash, ScoreRegistersReusedAsWeightsMeetTheirOwnPositionsValues) {
  int pairs = 0;
  bool hit[8] = {};
  for (int kappa = 0; kappa < 8; kappa++) hit[flash::PairedPosition(kappa)] = true;
  for (bool h : hit) EXPECT_TRUE(h) << "PairedPosition is not a permutation of 0..7";
  for (int lane = 0; lane < 32; lane++) {
    for (int r = 0; r < 4; r++) {
      EXPECT_EQ(flash::ARow(lane, r), flash::PtxARow(lane, r));
      EXPECT_EQ(flash::ACol(lane, r), flash::PtxACol(lane, r));
      EXPECT_EQ(flash::CRow(lane, r), flash::PtxCRow(lane, r));
      EXPECT_EQ(flash::CCol(lane, r), flash::PtxCCol(lane, r));
      const int c = flash::PFromC(r);
      EXPECT_EQ(flash::CRow(lane, c), flash::ARow(lane, r)) << "lane " << lane << " register " << r << ": row";
      EXPECT_EQ(flash::CCol(lane, c), flash::PairedPosition(flash::ACol(lane, r)))
          << "lane " << lane << " register " << r << ": the weight's position";
      pairs++;
    }
    for (int r = 0; r < 2; r++) {
      EXPECT_EQ(flash::BRow(lane, r), flash::PtxBRow(lane, r));
      EXPECT_EQ(flash::VPosition(lane, r), flash::PairedPosition(flash::BRow(lane, r)))
          << "lane " << lane << " register " << r << ": the value's position";
      pairs++;
    }
    EXPECT_EQ(flash::BCol(lane), flash::PtxBCol(lane));
  }
  std::printf("cuda flash: %d registers of the scores, weights and values walked\n", pairs);
}

// cvt.rna.tf32.f32: 10 explicit significand bits, ties away from zero.
TEST(CudaFlash, Tf32RoundsToNearestTiesAway) {
  EXPECT_EQ(flash::ToTf32(1.0f), 1.0f);
  EXPECT_EQ(flash::ToTf32(1.0f + 0x1p-11f), 1.0f + 0x1p-10f) << "a tie rounds away";
  EXPECT_EQ(flash::ToTf32(-(1.0f + 0x1p-11f)), -(1.0f + 0x1p-10f)) << "a negative tie rounds away";
  EXPECT_EQ(flash::ToTf32(1.0f + 0x1p-12f), 1.0f);
  EXPECT_EQ(flash::ToTf32(1.0f + 0x1p-11f + 0x1p-20f), 1.0f + 0x1p-10f);
  EXPECT_TRUE(std::isinf(flash::ToTf32(INFINITY)) && std::isnan(flash::ToTf32(NAN)));
  const std::vector<float> x = Random(100000, 7, 100.0f);
  double worst = 0.0;
  for (float v : x) worst = std::max(worst, std::fabs(static_cast<double>(flash::ToTf32(v)) - v) / std::fabs(v));
  EXPECT_LE(worst, 0x1p-11);
  EXPECT_GT(worst, 0x1p-12);
}

struct Shape {
  int head_size, heads, kv_heads, pos0, T, window;
  float scale_dim, softcap;
};

// The kernel's launch over a block of T rows from pos0, on the CPU. q and
// out rows are heads x head_size floats; the caches kv_heads x head_size a
// position. Counts each output's writes in *writes.
std::vector<float> FlashSimulated(const Shape& sh, const std::vector<float>& q, const std::vector<float>& kc,
                                  const std::vector<float>& vc, std::vector<int>* writes) {
  const int D = sh.head_size, KS = D / 8, qw = sh.heads * D, kvw = sh.kv_heads * D;
  std::vector<float> out(static_cast<size_t>(sh.T) * qw, NAN);
  writes->assign(out.size(), 0);
  const float divisor = ew::ScoreDivisor(sh.scale_dim, D);
  const int blocks = (sh.T + flash::kBlockRows - 1) / flash::kBlockRows;
  const int SS = flash::SharedStride(D);  // the kernel's shared rows, padded
  std::vector<float> ks(static_cast<size_t>(flash::kKeyTile) * SS, NAN), vs(ks.size(), NAN);
  for (int bx = 0; bx < blocks; bx++)
    for (int h = 0; h < sh.heads; h++) {
      const int64_t kv_col = static_cast<int64_t>(h / (sh.heads / sh.kv_heads)) * D, q_col = int64_t{h} * D;
      const int64_t row0 = int64_t{bx} * flash::kBlockRows;
      const int64_t last = std::min<int64_t>(row0 + flash::kBlockRows, sh.T) - 1, end = sh.pos0 + last + 1;
      struct Warp {
        Regs<4> qa[128 / 8], o[128 / 8];  // k steps of S, n tiles of O: up to head_size 128
        float m[32][2], l[32][2];
      };
      std::vector<Warp> warps(flash::kWarps);
      for (int w = 0; w < flash::kWarps; w++) {
        Warp& wp = warps[w];
        const int64_t wrow0 = row0 + w * flash::kWarpRows;
        for (int lane = 0; lane < 32; lane++) {
          for (int s = 0; s < KS; s++)
            for (int r = 0; r < 4; r++) {
              const int64_t row = std::min<int64_t>(wrow0 + flash::ARow(lane, r), sh.T - 1);
              wp.qa[s][lane][r] = flash::ToTf32(q[row * qw + q_col + 8 * s + flash::ACol(lane, r)]);
            }
          for (int i = 0; i < KS; i++)
            for (int c = 0; c < 4; c++) wp.o[i][lane][c] = 0.0f;
          wp.m[lane][0] = wp.m[lane][1] = -INFINITY;
          wp.l[lane][0] = wp.l[lane][1] = 0.0f;
        }
      }
      for (int64_t p0 = ew::FirstAttended(sh.pos0 + row0, sh.window); p0 < end; p0 += flash::kKeyTile) {
        for (int p = 0; p < flash::kKeyTile; p++)
          for (int c = 0; c < D; c++) {
            const bool in = p0 + p < end;
            ks[p * SS + c] = in ? flash::ToTf32(kc[(p0 + p) * kvw + kv_col + c]) : 0.0f;
            vs[p * SS + c] = in ? flash::ToTf32(vc[(p0 + p) * kvw + kv_col + c]) : 0.0f;
          }
        for (int w = 0; w < flash::kWarps; w++) {
          Warp& wp = warps[w];
          const int64_t wrow0 = row0 + w * flash::kWarpRows;
          const int64_t wlast = std::min<int64_t>(wrow0 + flash::kWarpRows - 1, last);
          const int64_t wfirst = ew::FirstAttended(sh.pos0 + wrow0, sh.window), wend = sh.pos0 + wlast + 1;
          if (wrow0 > last || p0 >= wend || p0 + flash::kKeyTile <= wfirst) continue;
          Regs<4> s[flash::kKeyTiles] = {};
          for (int st = 0; st < KS; st++)
            for (int j = 0; j < flash::kKeyTiles; j++) {
              Regs<2> b;
              for (int lane = 0; lane < 32; lane++)
                for (int r = 0; r < 2; r++)
                  b[lane][r] = ks[(8 * j + flash::BCol(lane)) * SS + 8 * st + flash::BRow(lane, r)];
              MmaTf32AsSpecified(wp.qa[st], b, s[j]);
            }
          float tmax[32][2], tsum[32][2], scale[32][2], base[32][2];
          for (int lane = 0; lane < 32; lane++) {
            tmax[lane][0] = tmax[lane][1] = -INFINITY;
            for (int j = 0; j < flash::kKeyTiles; j++)
              for (int i = 0; i < 4; i++) {
                const int64_t row = wrow0 + flash::CRow(lane, i), pos = p0 + 8 * j + flash::CCol(lane, i);
                s[j][lane][i] = flash::MaskedScore(s[j][lane][i], divisor, sh.softcap, pos, sh.pos0 + row, sh.window);
                tmax[lane][i >> 1] = std::fmax(tmax[lane][i >> 1], s[j][lane][i]);
              }
          }
          for (int hh = 0; hh < 2; hh++) {  // QuadMax: lanes l ^ 1, then l ^ 2
            float a1[32], a2[32];
            for (int lane = 0; lane < 32; lane++) a1[lane] = std::fmax(tmax[lane][hh], tmax[lane ^ 1][hh]);
            for (int lane = 0; lane < 32; lane++) a2[lane] = std::fmax(a1[lane], a1[lane ^ 2]);
            for (int lane = 0; lane < 32; lane++) {
              const float mn = std::fmax(wp.m[lane][hh], a2[lane]);
              scale[lane][hh] = flash::Rescale(wp.m[lane][hh], mn);
              base[lane][hh] = flash::ExpBase(mn);
              wp.m[lane][hh] = mn;
            }
          }
          for (int lane = 0; lane < 32; lane++) {
            tsum[lane][0] = tsum[lane][1] = 0.0f;
            for (int j = 0; j < flash::kKeyTiles; j++)
              for (int i = 0; i < 4; i++) {
                s[j][lane][i] = flash::Weight(s[j][lane][i], base[lane][i >> 1]);
                tsum[lane][i >> 1] = ew::Add(tsum[lane][i >> 1], s[j][lane][i]);
              }
          }
          for (int hh = 0; hh < 2; hh++) {  // QuadSum, in the kernel's order
            float a1[32], a2[32];
            for (int lane = 0; lane < 32; lane++) a1[lane] = ew::Add(tsum[lane][hh], tsum[lane ^ 1][hh]);
            for (int lane = 0; lane < 32; lane++) a2[lane] = ew::Add(a1[lane], a1[lane ^ 2]);
            for (int lane = 0; lane < 32; lane++)
              wp.l[lane][hh] = ew::Add(ew::Mul(wp.l[lane][hh], scale[lane][hh]), a2[lane]);
          }
          for (int i = 0; i < KS; i++)
            for (int lane = 0; lane < 32; lane++)
              for (int c = 0; c < 4; c++) wp.o[i][lane][c] = ew::Mul(wp.o[i][lane][c], scale[lane][c >> 1]);
          for (int j = 0; j < flash::kKeyTiles; j++) {
            Regs<4> pa;
            for (int lane = 0; lane < 32; lane++)
              for (int r = 0; r < 4; r++) pa[lane][r] = flash::ToTf32(s[j][lane][flash::PFromC(r)]);
            for (int i = 0; i < KS; i++) {
              Regs<2> b;
              for (int lane = 0; lane < 32; lane++)
                for (int r = 0; r < 2; r++)
                  b[lane][r] = vs[(8 * j + flash::VPosition(lane, r)) * SS + 8 * i + flash::BCol(lane)];
              MmaTf32AsSpecified(pa, b, wp.o[i]);
            }
          }
        }
      }
      for (int w = 0; w < flash::kWarps; w++)
        for (int lane = 0; lane < 32; lane++)
          for (int i = 0; i < KS; i++)
            for (int c = 0; c < 4; c++) {
              const int64_t row = row0 + w * flash::kWarpRows + flash::CRow(lane, c);
              if (row > last) continue;
              const size_t at = row * qw + q_col + 8 * i + flash::CCol(lane, c);
              out[at] = warps[w].o[i][lane][c] / warps[w].l[lane][c >> 1];
              (*writes)[at]++;
            }
    }
  return out;
}

// Whole launches against run.c's attention of the same rows (Windowed, as
// every CPU attention): every output written once, within TF32's rounding of
// q, k, v and the weights (2^-11 each: ~1e-3 of the values' scale).
TEST(CudaFlash, SimulatedLaunchesMatchTheReference) {
  const Shape shapes[] = {
      {64, 2, 2, 0, 16, 0, 0.0f, 0.0f},      {64, 4, 1, 0, 17, 0, 0.0f, 0.0f},     {128, 2, 1, 5, 64, 0, 0.0f, 0.0f},
      {96, 2, 2, 37, 100, 0, 0.0f, 0.0f},    {128, 4, 2, 300, 130, 0, 0.0f, 0.0f}, {64, 2, 1, 0, 100, 37, 0.0f, 0.0f},
      {128, 2, 2, 250, 70, 200, 0.0f, 0.0f}, {64, 4, 2, 90, 40, 0, 24.0f, 50.0f},  {96, 2, 1, 0, 65, 9, 48.0f, 5.0f},
  };
  double worst = 0.0;
  long outputs = 0;
  for (const Shape& sh : shapes) {
    const int D = sh.head_size, qw = sh.heads * D, kvw = sh.kv_heads * D, n = sh.pos0 + sh.T;
    const std::vector<float> q = Random(static_cast<size_t>(sh.T) * qw, D + sh.T, 2.0f),
                             kc = Random(static_cast<size_t>(n) * kvw, n, 0.5f),
                             vc = Random(static_cast<size_t>(n) * kvw, n + 1);
    std::vector<float> want(q.size()), scores(static_cast<size_t>(sh.heads) * n);
    for (int t = 0; t < sh.T; t++) {
      AttentionArgs a{&want[static_cast<size_t>(t) * qw],
                      &q[static_cast<size_t>(t) * qw],
                      kc.data(),
                      vc.data(),
                      kvw,
                      scores.data(),
                      sh.pos0 + t,
                      sh.heads,
                      sh.kv_heads,
                      D,
                      n,
                      sh.window,
                      sh.scale_dim,
                      sh.softcap};
      for (int h = 0; h < sh.heads; h++) AttendOneHead(Windowed(a), h);
    }
    std::vector<int> writes;
    const std::vector<float> got = FlashSimulated(sh, q, kc, vc, &writes);
    const std::string what = "head_size " + std::to_string(D) + ", " + std::to_string(sh.heads) + "/" +
                             std::to_string(sh.kv_heads) + " heads, " + std::to_string(sh.T) + " rows from " +
                             std::to_string(sh.pos0) + ", window " + std::to_string(sh.window) + ", softcap " +
                             std::to_string(sh.softcap);
    for (size_t i = 0; i < got.size(); i++) {
      ASSERT_EQ(writes[i], 1) << what << ": output " << i << " written " << writes[i] << " times";
      const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
      worst = std::max(worst, err);
      ASSERT_LE(err, 3e-3) << what << ": output " << i << " (row " << i / qw << ")";
    }
    outputs += static_cast<long>(got.size());
  }
  std::printf("cuda flash: %ld outputs of %zu simulated launches written once, worst abs error %.3g (bound 3e-3)\n",
              outputs, sizeof(shapes) / sizeof(shapes[0]), worst);
  EXPECT_GT(worst, 1e-6) << "TF32 rounds: a simulation that matches to f32 is not simulating it";
}

}  // namespace
}  // namespace verity::kernels::cuda
