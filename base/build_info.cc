#include "base/build_info.h"

#include "base/build_id.h"  // generated: VERITY_BUILD_ID
#include "base/sha256.h"

namespace verity {

const char* Version() { return VERITY_VERSION; }

const char* BuildId() { return VERITY_BUILD_ID; }

std::string ArtifactSha256() {
  // /proc/self/exe is the inode this process was started from; a rebuild
  // writes a new file, so the bytes cannot change under a running process.
  static const std::string hash = [] {
    auto h = Sha256File("/proc/self/exe");
    return h.ok() ? h.value() : std::string("unreadable");
  }();
  return hash;
}

}  // namespace verity
