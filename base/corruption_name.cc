// A normal build carries no corruption. This definition is alone in its file
// on purpose: a corrupted binary (corruptions/corruptions.cmake) links its own
// CorruptionName() as an object ahead of this archive, and the linker then
// never extracts this member.
#include "base/build_info.h"

namespace verity {

const char* CorruptionName() { return ""; }

}  // namespace verity
