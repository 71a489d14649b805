// Compiled only into corruption builds; see tp_hooks.h and CORRUPTIONS.md.
#include <string>

#include "engine/tp_hooks.h"

#ifndef VERITY_CORRUPTION_NAME
#error "tp_hooks_corrupt.cc belongs to corruption builds only (VERITY_CORRUPTION_NAME is unset)"
#endif

namespace verity::hooks {

RankShard TpRankShard(const RankShard& planned, const ModelConfig& c) {
  const std::string name = VERITY_CORRUPTION_NAME;
  RankShard s = planned;
  if (name == "tp-band-gap" && s.rank == 0 && s.tp > 1 && c.n_experts == 0) {
    // Family 2: rank 0's FFN band ends one unit early; that unit is nobody's.
    s.ffn.end -= 1;
  }
  if (name == "tp-kv-naive") {
    // Family 2: the naive kv/tp split, with no replication when n_kv_heads < tp
    // (kv/tp = 0: ranks hold no KV heads at all).
    const int per = c.n_kv_heads / s.tp;
    s.kv_heads = {s.rank * per, (s.rank + 1) * per};
    s.kv_replicated = false;
  }
  return s;
}

bool TpReduceAfterNorm() { return std::string(VERITY_CORRUPTION_NAME) == "tp-reduce-past-norm"; }

}  // namespace verity::hooks
