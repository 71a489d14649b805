// CORRUPTION tp-band-gap (family 2, partition arithmetic): rank 0's FFN band
// ends one unit early, so one FFN unit of every layer belongs to no rank.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class TpBandGap final : public EngineHooks {
 public:
  RankShard TpRankShard(const RankShard& planned, const ModelConfig& c) const override {
    RankShard s = planned;
    if (s.rank == 0 && s.tp > 1 && c.n_experts == 0) s.ffn.end -= 1;
    return s;
  }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const TpBandGap hooks;
  return hooks;
}

}  // namespace verity::corruptions
