// The instruction sets every Highway source is compiled for (the CPU kernels'
// simd*.cc and block_dot.cc, the machine probes in probe/) and the kernels'
// dispatch policy (kernels/cpu/simd_policy.cc) knows: included before any
// Highway header, so HWY_TARGETS means one set in all. Macros only: base
// itself links no Highway.
#ifndef VERITY_BASE_SIMD_TARGETS_H_
#define VERITY_BASE_SIMD_TARGETS_H_

// Also compile for AVX3_DL (AVX-512 with VNNI: Ice Lake, Zen 4 and later),
// whose vpdpbusd the q8_0 and block kernels use; Highway leaves it out by default.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL 1
#endif
// Vectors live in arrays of fixed size, which the scalable targets (SVE, RVV)
// cannot hold; SSSE3 adds nothing the kernels use over SSE2 and SSE4.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#endif  // VERITY_BASE_SIMD_TARGETS_H_
