// Internal to kernels/: constructors of the CPU backends and shared pieces.
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace verity::kernels {

std::unique_ptr<Backend> MakeReference();
std::unique_ptr<Backend> MakeFast(int threads);
// Returns `fast` itself in a normal build (no_corruption.cc). A corruption
// build compiles corruption.cc instead, which wraps it in the named
// deliberate bug (CORRUPTIONS.md).
std::unique_ptr<Backend> WrapForCorruptionBuild(std::unique_ptr<Backend> fast);
// One head of attention, the reference arithmetic (used by both backends).
void AttendOneHead(const AttentionArgs& a, int h);

}  // namespace verity::kernels
