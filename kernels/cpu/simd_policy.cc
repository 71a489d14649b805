// The CPU kernels' dispatch policy, apart from the kernels (simd*.cc,
// block_dot.cc): which of the compiled instruction sets may run
// (VERITY_SIMD_TARGET's cap, applied before main() so the first kernel of any
// binary honours it) and how weight streams are prefetched on this CPU
// (VERITY_STREAM_PREFETCH, or what was measured per vendor and family).
#include "base/simd_targets.h"  // before any Highway header

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/env.h"
#include "hwy/highway.h"
#include "hwy/targets.h"
#include "kernels/cpu/simd.h"

namespace verity::kernels::simd {

namespace {
// The hint this CPU gets when VERITY_STREAM_PREFETCH does not say (see
// kStreamAheadT0 for what each was measured to do where).
StreamPrefetchHint DefaultHintForThisCpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd") == 0) return StreamPrefetchHint::kOff;  // measured to cost on an Intel Xeon
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return StreamPrefetchHint::kNonTemporal;
  const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
  // Family 19h is Zen 3 (measured) and Zen 4 (not yet measured); 1Ah is Zen 5
  // (measured); the older families keep the hint they always had.
  return family == 0x19 ? StreamPrefetchHint::kT0 : StreamPrefetchHint::kNonTemporal;
#else
  return StreamPrefetchHint::kOff;  // never measured here
#endif
}
}  // namespace

StreamPrefetchHint StreamPrefetch() {
  static const StreamPrefetchHint hint = [] {
    const std::string v = env::StreamPrefetch();
    if (v == "nta") return StreamPrefetchHint::kNonTemporal;
    if (v == "t0") return StreamPrefetchHint::kT0;
    if (v == "off") return StreamPrefetchHint::kOff;
    if (!v.empty())
      std::fprintf(stderr, "verity: note: VERITY_STREAM_PREFETCH=%s is none of nta, t0, off: ignored\n", v.c_str());
    return DefaultHintForThisCpu();
  }();
  return hint;
}

bool StreamPrefetchOn() { return StreamPrefetch() != StreamPrefetchHint::kOff; }

const char* StreamPrefetchName(StreamPrefetchHint h) {
  switch (h) {
    case StreamPrefetchHint::kNonTemporal: return "nta";
    case StreamPrefetchHint::kT0: return "t0";
    case StreamPrefetchHint::kOff: return "off";
  }
  return "off";
}

namespace {

// The CPU's own targets among those compiled (Highway's bits: a lower bit is a
// better target), read once before anything is forced.
int64_t CpuTargets() {
  static const int64_t cpu = [] {
    hwy::SetSupportedTargetsForTest(0);
    return hwy::SupportedTargets() & (HWY_TARGETS);
  }();
  return cpu;
}

// The compiled target named `name` ("AVX2", ...), or 0.
int64_t TargetBit(const std::string& name) {
  for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
    const int64_t t = bits & -bits;
    if (name == hwy::TargetName(t)) return t;
  }
  return 0;
}

std::string CompiledTargetNames() {
  std::string all;
  for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1)
    all += std::string(all.empty() ? "" : ", ") + hwy::TargetName(bits & -bits);
  return all;
}

// What VERITY_SIMD_TARGET allows: a mask of the named target and every lesser
// one. A name this build does not hold allows only the most basic target
// (kernels must never run above what the user asked for, even by mistake),
// and its error is kept for the first place that can say it: `verity` exits 2
// with it before parsing its command line, and MakeBackend("fast") refuses
// (never an exit from here: this runs before main()).
struct Cap {
  int64_t mask = ~int64_t{0};
  std::string error;
};
const Cap& TheCap() {
  static const Cap cap = [] {
    Cap c;
    const std::string name = env::SimdTarget();
    if (name.empty()) return c;
    if (const int64_t bit = TargetBit(name); bit != 0) {
      c.mask = ~(bit - 1);
      return c;
    }
    int64_t basic = HWY_TARGETS;  // its highest bit: the least capable target compiled
    while (basic & (basic - 1)) basic &= basic - 1;
    c.mask = basic;
    c.error = "VERITY_SIMD_TARGET=" + name + ": not a target of this build (one of " + CompiledTargetNames() + ")";
    return c;
  }();
  return cap;
}
int64_t CapMask() { return TheCap().mask; }

// Makes the dispatcher choose among the CPU's targets under the cap (only
// `forced` when one is), at its next call.
void ApplyTargets(int64_t forced) {
  const int64_t allowed = CpuTargets() & CapMask();
  hwy::SetSupportedTargetsForTest(forced != 0 ? forced : allowed);
  hwy::GetChosenTarget().DeInit();
}

// Applied before main(), so the first kernel of any binary already honours it.
const bool kCapApplied = (ApplyTargets(0), true);

}  // namespace

std::vector<std::string> AvailableTargets() {
  std::vector<std::string> names;
  const int64_t allowed = CpuTargets() & CapMask();
  for (int64_t bits = allowed; bits != 0; bits &= bits - 1) names.emplace_back(hwy::TargetName(bits & -bits));
  return names;
}

std::string TargetCap() { return env::SimdTarget(); }

bool ForceTargetForTest(const std::string& name) {
  const int64_t target = name.empty() ? 0 : TargetBit(name) & CpuTargets() & CapMask();
  if (!name.empty() && target == 0) return false;
  ApplyTargets(target);  // 0: the capped set again
  return true;
}

std::string CapError() { return TheCap().error; }

}  // namespace verity::kernels::simd
