#include "base/build_info.h"

#include "base/build_id.h"  // generated: VERITY_BUILD_ID
#include "base/sha256.h"

namespace verity {

const char* Version() { return VERITY_VERSION; }

const char* BuildId() { return VERITY_BUILD_ID; }

std::string ArtifactSha256() {
  auto h = Sha256File("/proc/self/exe");
  return h.ok() ? h.value() : std::string("unreadable");
}

const char* CorruptionName() {
#ifdef VERITY_CORRUPTION_NAME
  return VERITY_CORRUPTION_NAME;
#else
  return "";
#endif
}

}  // namespace verity
