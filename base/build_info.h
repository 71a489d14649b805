// Identity of this build, as the bench protocol reports it.
#pragma once

#include <string>

namespace verity {

// The release version, from CMakeLists.txt's project() ("0.12.0").
const char* Version();
// The git commit the binary was built from ("<sha>" or "<sha>-dirty"), or
// "unknown" outside a git checkout. Regenerated on every build, not at configure.
const char* BuildId();
// SHA-256 of the running executable's bytes (/proc/self/exe), read and hashed
// once per process: the first call pays (~7 MB for verity), later ones are a
// copy. A server calls it before it opens its port, so /health never hashes.
std::string ArtifactSha256();
// Name of the corruption compiled in, or "" for a normal build. Defined in a
// file of its own (corruption_name.cc), so that a corrupted binary can link
// its own definition ahead of the archive (corruptions/corruptions.cmake).
const char* CorruptionName();

}  // namespace verity
