// The flash-style prefill attention (flash_attention.cu) written once as
// __host__ __device__ functions: which lane holds which query row, position
// and head dimension in the registers of `mma.sync.m16n8k8` with TF32
// inputs, and the per-score steps (the score, its mask, the online softmax's
// rescale). The kernel runs them on the device; tests/cuda_flash_test.cc
// walks every lane against the PTX ISA's fragment layout (Ptx* below) and
// simulates whole launches with them on the CPU. Plain C++17 without CUDA
// headers when compiled by the host compiler.
//
// A warp owns 16 query rows of one head. For a tile of kKeyTile positions it
// computes the scores S = Q K^T (A: its rows' q, k = 8 head dimensions a
// product; B: 8 positions' keys) into C fragments, masks and exponentiates
// them in place, then multiplies them by the values: O += P V, with P as the
// A operand. P's registers are S's C registers reused without a shuffle: C
// register i of lane (g, t) holds position 2t + (i & 1) of row g + 8 (i >> 1),
// and A register r must hold k index t + 4 (r >> 1) of row g + 8 (r & 1). So
// P's k index kappa stands for position PairedPosition(kappa) (2 kappa, or
// 2 (kappa - 4) + 1), and B's values are loaded for the same permuted
// positions (VPosition): every product still pairs a weight with its own
// position's value (the test checks it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/elementwise.h"

namespace verity::kernels::cuda::flash {

inline constexpr int kWarps = 4;      // a block's warps
inline constexpr int kWarpRows = 16;  // query rows a warp owns (m16)
inline constexpr int kBlockRows = kWarps * kWarpRows;
inline constexpr int kKeyTile = 32;             // positions a step loads into shared memory
inline constexpr int kKeyTiles = kKeyTile / 8;  // n8 tiles of S (and k8 steps of P V) a step
// Floats between consecutive positions of a tile in shared memory: head_size
// + 4, so the 8 positions x 4 dimensions a B fragment reads fall in 32
// distinct banks (for K and for V's permuted positions).
VERITY_HD constexpr int SharedStride(int head_size) { return head_size + 4; }
// The head sizes the kernel is built for (a multiple of 8, its registers
// bounded: q and the output accumulators take head_size / 2 each a lane).
VERITY_HD constexpr bool HeadSizeFits(int head_size) { return head_size == 64 || head_size == 96 || head_size == 128; }

VERITY_HD int G(int lane) { return lane >> 2; }  // groupID
VERITY_HD int T(int lane) { return lane & 3; }   // threadID_in_group

// A (16 x 8, row major): register r holds row ARow, k index ACol.
VERITY_HD int ARow(int lane, int r) { return G(lane) + 8 * (r & 1); }
VERITY_HD int ACol(int lane, int r) { return T(lane) + 4 * (r >> 1); }
// B (8 x 8, k x n): register r holds k index BRow, n index BCol.
VERITY_HD int BRow(int lane, int r) { return T(lane) + 4 * r; }
VERITY_HD int BCol(int lane) { return G(lane); }
// C/D (16 x 8): register i holds row CRow, column CCol.
VERITY_HD int CRow(int lane, int i) { return G(lane) + 8 * (i >> 1); }
VERITY_HD int CCol(int lane, int i) { return 2 * T(lane) + (i & 1); }

// The position (0..7 of an n8 tile) P's and V's k index kappa stands for.
VERITY_HD int PairedPosition(int kappa) { return kappa < 4 ? 2 * kappa : 2 * (kappa - 4) + 1; }
// P's A register r is S's C register PFromC(r) (a0 = c0, a1 = c2, a2 = c1, a3 = c3).
VERITY_HD int PFromC(int r) { return 2 * (r & 1) + (r >> 1); }
// The position (0..7 of the tile) of V that B register r of lane holds:
// PairedPosition(BRow(lane, r)).
VERITY_HD int VPosition(int lane, int r) { return 2 * T(lane) + r; }

// f32 to TF32 as `cvt.rna.tf32.f32` rounds: to the nearest value with 10
// explicit significand bits, ties away from zero; the 13 low bits zero.
// Infinities and NaNs pass.
VERITY_HD float ToTf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x1000u) & 0xffffe000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// The score of query position `row_pos` at position `pos` from its dot
// product, or -inf where the row does not attend there (past itself, or
// before its window's first position): ew::AttentionScore, as every
// device attention.
VERITY_HD float MaskedScore(float dot, float divisor, float softcap, int64_t pos, int64_t row_pos, int window) {
  if (pos > row_pos || pos < ew::FirstAttended(row_pos, window)) return -INFINITY;
  return ew::AttentionScore(dot, divisor, softcap);
}
// The exponent base of a row whose running max is m: m, or 0 while every
// score seen is masked (so e^(s - base) is 0, not NaN).
VERITY_HD float ExpBase(float m) { return m == -INFINITY ? 0.0f : m; }
// One weight: e^(s - base), 0 for a masked score.
VERITY_HD float Weight(float s, float base) { return expf(ew::Sub(s, base)); }
// What a row's output and sum are multiplied by when its max moves from
// m_old to m_new (1 when it does not; 0 when nothing was seen).
VERITY_HD float Rescale(float m_old, float m_new) { return expf(ew::Sub(m_old, ExpBase(m_new))); }

// ---- The PTX ISA's fragment layout of mma.m16n8k8 with .tf32 inputs
// ("Matrix Fragments for mma.m16n8k8", .tf32), as the test's reference:
// element e of A (0..3), B (0..1), C (0..3) held by `lane`.
VERITY_HD int PtxARow(int lane, int e) { return G(lane) + ((e & 1) ? 8 : 0); }
VERITY_HD int PtxACol(int lane, int e) { return T(lane) + (e >= 2 ? 4 : 0); }
VERITY_HD int PtxBRow(int lane, int e) { return T(lane) + (e == 1 ? 4 : 0); }
VERITY_HD int PtxBCol(int lane) { return G(lane); }
VERITY_HD int PtxCRow(int lane, int e) { return G(lane) + (e >= 2 ? 8 : 0); }
VERITY_HD int PtxCCol(int lane, int e) { return 2 * T(lane) + (e & 1); }

}  // namespace verity::kernels::cuda::flash
