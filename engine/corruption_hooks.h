// Where a corruption build (cmake -DVERITY_CORRUPTION=<name>, CORRUPTIONS.md)
// changes the engine's own code. A normal build compiles no_corruption_hooks.cc,
// whose hooks return their input unchanged; a corruption build compiles
// corruption_hooks.cc instead. Nothing here is on a per-token path.
#pragma once

#include <string>

#include "engine/engine.h"

namespace verity::hooks {

// The KV cache layout a Transformer on the backend named `backend` uses,
// given the standard one.
KvCacheLayout KvLayout(const KvCacheLayout& standard, const ModelConfig& c, const std::string& backend);

}  // namespace verity::hooks
