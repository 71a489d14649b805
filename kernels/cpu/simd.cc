// What of kernels/cpu/simd.h belongs to no family of kernels: TargetName and
// the bf16 conversions. TargetName is compiled by foreach_target.h for every
// instruction set, as the kernels are (this file is re-included once per
// target), so that HWY_DYNAMIC_DISPATCH names the target they get; the bf16
// conversions are scalar, the same on every target (the bf16 kernels' scalar
// tails use BF16ToF32; weights are converted at load).
//
// The kernels themselves, written once against Google Highway, are one .cc
// per family (simd-inl.h lists them and holds what they share): decode
// f32/bf16 in simd_matvec.cc, every q8_0 kernel in simd_q8.cc, prefill
// f32/bf16 in simd_matmul.cc, attention in simd_attention.cc. The dispatch
// policy (VERITY_SIMD_TARGET's cap, the prefetch hint) is simd_policy.cc.

#include "base/simd_targets.h"  // before any Highway header

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace verity::kernels::simd {
namespace HWY_NAMESPACE {

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace verity::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace verity::kernels::simd {

HWY_EXPORT(TargetNameImpl);

const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

namespace {
// The conversions' one statement each. The public functions below are
// global symbols of a position-independent library, which GCC does not
// inline (another library could interpose them): the array loops called
// them once a value, ~28% of loading a 1B model as q8_0 (perf, 2026-12-07).
// These inline forms let the loops run as plain vector code.
inline uint16_t ToBF16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
inline float FromBF16(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
}  // namespace

uint16_t F32ToBF16(float v) { return ToBF16(v); }
float BF16ToF32(uint16_t v) { return FromBF16(v); }

void ConvertF32ToBF16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = ToBF16(src[i]);
}
void BF16ToF32Array(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = FromBF16(src[i]);
}

}  // namespace verity::kernels::simd
#endif  // HWY_ONCE
