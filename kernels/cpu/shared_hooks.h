// Hooks in code that every backend shares, where a corruption build
// (CORRUPTIONS.md, -DVERITY_CORRUPTION) swaps in a deliberate bug that
// fast-vs-reference parity cannot see. A normal build links shared_hooks.cc,
// where each hook leaves the arithmetic exactly as specified; the corrupted
// versions live only in shared_hooks_corrupt.cc (CMake picks one of the two).
#pragma once

namespace verity::kernels::hooks {

// Extra mass in a softmax denominator whose row maximum is `max_val`
// (the exps are taken after subtracting it). Returns 0 in a normal build.
float SoftmaxExtraMass(float max_val);

}  // namespace verity::kernels::hooks
