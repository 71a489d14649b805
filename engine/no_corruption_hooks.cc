// A normal build: every hook is the identity (see corruption_hooks.h).
#include "engine/corruption_hooks.h"

namespace verity::hooks {

KvCacheLayout KvLayout(const KvCacheLayout& standard, const ModelConfig&, const std::string&) { return standard; }

}  // namespace verity::hooks
