// One warp-wide mma.sync as the PTX ISA specifies it, for the CPU
// simulations of the tensor-core kernels (cuda_elementwise_test: the rows
// kernel's m16n8k16 bf16; cuda_flash_test: the flash attention's m16n8k8
// TF32). `Layout` places element e of a lane's A, B and C registers
// (ARow/ACol, BRow/BCol, CRow/CCol: the ISA's fragment tables, as each map
// header transcribes them); every element of A and B must be held by exactly
// one (lane, register). D = A B + C: each element's sum over k in double,
// rounded to f32 (the tensor core's own order and rounding are not
// specified; the device tests bound them).
#pragma once

#include <gtest/gtest.h>

namespace verity::kernels::cuda::test {

template <int M, int N, int K, int AE, int BE, class Layout>
void MmaAsSpecified(const float (&a)[32][AE], const float (&b)[32][BE], float (&d)[32][4]) {
  static_assert(M * K == 32 * AE && K * N == 32 * BE && M * N == 32 * 4, "a warp's registers hold the tiles");
  double A[M][K] = {}, B[K][N] = {};
  int seen_a[M][K] = {}, seen_b[K][N] = {};
  for (int lane = 0; lane < 32; lane++) {
    for (int e = 0; e < AE; e++) {
      A[Layout::ARow(lane, e)][Layout::ACol(lane, e)] = a[lane][e];
      seen_a[Layout::ARow(lane, e)][Layout::ACol(lane, e)]++;
    }
    for (int e = 0; e < BE; e++) {
      B[Layout::BRow(lane, e)][Layout::BCol(lane)] = b[lane][e];
      seen_b[Layout::BRow(lane, e)][Layout::BCol(lane)]++;
    }
  }
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) ASSERT_EQ(seen_a[i][k], 1) << "A element (" << i << ", " << k << ")";
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) ASSERT_EQ(seen_b[k][j], 1) << "B element (" << k << ", " << j << ")";
  for (int lane = 0; lane < 32; lane++)
    for (int e = 0; e < 4; e++) {
      const int i = Layout::CRow(lane, e), j = Layout::CCol(lane, e);
      double sum = d[lane][e];
      for (int k = 0; k < K; k++) sum += A[i][k] * B[k][j];
      d[lane][e] = static_cast<float>(sum);
    }
}

}  // namespace verity::kernels::cuda::test
