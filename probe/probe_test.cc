// The probes on every instruction set this CPU runs: StreamRead sums exactly
// what a scalar loop sums at every length and alignment, and FmaChains
// computes the chains a scalar loop computes, with as many lanes as the
// target's vectors hold.
#include "probe/probe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/simd_targets.h"  // the same target set as probe.cc
#include "hwy/highway.h"
#include "hwy/targets.h"

namespace verity::probe {
namespace {

// Every compiled target this CPU runs, by Highway's bit.
std::vector<int64_t> RunnableTargets() {
  hwy::SetSupportedTargetsForTest(0);
  std::vector<int64_t> out;
  for (int64_t bits = hwy::SupportedTargets() & (HWY_TARGETS); bits != 0; bits &= bits - 1) out.push_back(bits & -bits);
  return out;
}

// Dispatch pinned to one target for the test's lifetime.
class ProbeTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    hwy::GetChosenTarget().DeInit();
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().DeInit();
  }
};

TEST_P(ProbeTest, RunsTheTargetItWasGiven) { EXPECT_STREQ(ProbeTarget(), hwy::TargetName(GetParam())); }

TEST_P(ProbeTest, StreamReadSumsEveryByteAtAnyLengthAndAlignment) {
  std::vector<unsigned char> buf(4096 + 64);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<unsigned char>(i * 37 + 1);
  int checked = 0;
  for (size_t offset : {size_t{0}, size_t{1}, size_t{8}, size_t{13}}) {
    for (size_t bytes :
         {size_t{0}, size_t{7}, size_t{8}, size_t{100}, size_t{511}, size_t{512}, size_t{1029}, size_t{4096}}) {
      const unsigned char* p = buf.data() + offset;
      uint64_t expect = 0;
      const size_t words = bytes / 8;
      for (size_t w = 0; w < words; w++) {
        uint64_t v;
        std::memcpy(&v, p + w * 8, 8);
        expect += v;
      }
      for (size_t k = words * 8; k < bytes; k++) expect += p[k];
      EXPECT_EQ(StreamRead(p, bytes), expect) << "offset " << offset << ", " << bytes << " bytes";
      checked++;
    }
  }
  EXPECT_EQ(checked, 32);
}

TEST_P(ProbeTest, FmaChainsComputeTheScalarChainsOnEveryLane) {
  const std::string name = hwy::TargetName(GetParam());
  const int lanes = FmaLanes();
  // The vector width each x86 target has (Highway's SCALAR is one lane).
  const int expect_lanes = name.rfind("AVX3", 0) == 0                             ? 16
                           : name == "AVX2"                                       ? 8
                           : name == "SSE4" || name == "SSE2" || name == "EMU128" ? 4
                           : name == "SCALAR"                                     ? 1
                                                                                  : lanes;  // a target named here never
  EXPECT_EQ(lanes, expect_lanes);
  // AVX2 and later fuse the multiply and the add (one rounding); the others round twice.
  const bool fused = name.rfind("AVX", 0) == 0;
  for (int64_t iters : {int64_t{0}, int64_t{1}, int64_t{1000}}) {
    double expect = 0;
    for (int k = 0; k < kFmaChains; k++) {
      float a = 0.1f * static_cast<float>(k + 1);
      for (int64_t i = 0; i < iters; i++) a = fused ? std::fma(a, 0.999999f, 1e-6f) : a * 0.999999f + 1e-6f;
      expect += static_cast<double>(a) * lanes;
    }
    EXPECT_NEAR(FmaChains(iters), expect, 1e-5 * expect) << iters << " steps on " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRunnableTarget, ProbeTest, ::testing::ValuesIn(RunnableTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace verity::probe
