// Hooks in the checkpoint loaders, shared by every backend, where a
// corruption build (CORRUPTIONS.md, -DVERITY_CORRUPTION) swaps in a deliberate
// bug that fast-vs-reference parity cannot see. A normal build links
// load_hooks.cc, where each hook returns what the file or format says; the
// corrupted versions live only in load_hooks_corrupt.cc (CMake picks one).
#pragma once

namespace verity::hooks {

// The RoPE base the llama2.c loader uses, given the format's fixed value.
// Returns `format_theta` in a normal build.
float Llama2cRopeTheta(float format_theta);

}  // namespace verity::hooks
