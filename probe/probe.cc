// The probes of probe.h, compiled by foreach_target.h for every instruction
// set of base/simd_targets.h (this file is re-included once per target).
#include "base/simd_targets.h"  // before any Highway header

#include <cstddef>
#include <cstdint>

#include "probe/probe.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "probe/probe.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace verity::probe {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 4 accumulators keep enough loads in flight to saturate memory from one core
// (more measured no faster on Zen 3 and Zen 5).
uint64_t StreamReadImpl(const void* data, size_t bytes) {
  const hn::ScalableTag<uint64_t> d;
  const size_t N = hn::Lanes(d), words = bytes / 8;
  const uint64_t* p = static_cast<const uint64_t*>(data);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= words; i += 4 * N) {
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
  }
  uint64_t s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < words; i++) s += p[i];
  const unsigned char* tail = static_cast<const unsigned char*>(data);
  for (size_t k = words * 8; k < bytes; k++) s += tail[k];
  return s;
}

float FmaChainsImpl(int64_t iters) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-6f);
  decltype(hn::Zero(d)) acc[kFmaChains];
  for (int k = 0; k < kFmaChains; k++) acc[k] = hn::Set(d, 0.1f * static_cast<float>(k + 1));
  for (int64_t i = 0; i < iters; i++) {
    // Unrolled by the compiler: kFmaChains is a constant and each chain independent.
    for (int k = 0; k < kFmaChains; k++) acc[k] = hn::MulAdd(acc[k], m, c);
  }
  auto s = acc[0];
  for (int k = 1; k < kFmaChains; k++) s = hn::Add(s, acc[k]);
  return hn::GetLane(hn::SumOfLanes(d, s));
}

int FmaLanesImpl() { return static_cast<int>(hn::Lanes(hn::ScalableTag<float>())); }

const char* ProbeTargetImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace verity::probe
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::probe {

HWY_EXPORT(StreamReadImpl);
HWY_EXPORT(FmaChainsImpl);
HWY_EXPORT(FmaLanesImpl);
HWY_EXPORT(ProbeTargetImpl);

uint64_t StreamRead(const void* data, size_t bytes) { return HWY_DYNAMIC_DISPATCH(StreamReadImpl)(data, bytes); }
float FmaChains(int64_t iters) { return HWY_DYNAMIC_DISPATCH(FmaChainsImpl)(iters); }
int FmaLanes() { return HWY_DYNAMIC_DISPATCH(FmaLanesImpl)(); }
const char* ProbeTarget() { return HWY_DYNAMIC_DISPATCH(ProbeTargetImpl)(); }

}  // namespace verity::probe
#endif  // HWY_ONCE
