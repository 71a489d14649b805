// CORRUPTION rope-theta-default (family 1, configuration read wrong, in code
// both backends share): the llama2.c loader takes Llama 3's default RoPE
// base, 500000, where the format fixes 10000. Both backends read the same
// config, so they agree with each other; only the independent reference's
// logits (`parity --against`) see it.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class RopeThetaDefault final : public EngineHooks {
 public:
  float Llama2cRopeTheta(float) const override { return 500000.0f; }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const RopeThetaDefault hooks;
  return hooks;
}

}  // namespace verity::corruptions
