// Internal to kernels/: constructors of the CPU backends and shared pieces.
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace verity::kernels {

std::unique_ptr<Backend> MakeReference();
std::unique_ptr<Backend> MakeFast(int threads);
// One head of attention, the reference arithmetic (used by both backends).
void AttendOneHead(const AttentionArgs& a, int h);

}  // namespace verity::kernels
