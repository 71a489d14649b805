// A normal build: every tensor-parallel hook is the identity (see tp_hooks.h).
#include "engine/tp_hooks.h"

namespace verity::hooks {

RankShard TpRankShard(const RankShard& planned, const ModelConfig&) { return planned; }
bool TpReduceAfterNorm() { return false; }

}  // namespace verity::hooks
