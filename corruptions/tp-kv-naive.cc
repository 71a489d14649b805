// CORRUPTION tp-kv-naive (family 2, partition arithmetic): KV heads split as
// the naive kv/tp with no replication; with fewer KV heads than ranks,
// kv/tp = 0 and no rank holds a KV head (refused at start-up).
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class TpKvNaive final : public EngineHooks {
 public:
  RankShard TpRankShard(const RankShard& planned, const ModelConfig& c) const override {
    RankShard s = planned;
    const int per = c.n_kv_heads / s.tp;
    s.kv_heads = {s.rank * per, (s.rank + 1) * per};
    s.kv_replicated = false;
    return s;
  }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const TpKvNaive hooks;
  return hooks;
}

}  // namespace verity::corruptions
