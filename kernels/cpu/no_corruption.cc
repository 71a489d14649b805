// A normal build: the fast backend is used as it is. (A corruption build
// compiles corruption.cc in this file's place; see CORRUPTIONS.md.)
#include "kernels/cpu/backends.h"

namespace verity::kernels {

std::unique_ptr<Backend> WrapForCorruptionBuild(std::unique_ptr<Backend> fast) { return fast; }

}  // namespace verity::kernels
