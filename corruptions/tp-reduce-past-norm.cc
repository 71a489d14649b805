// CORRUPTION tp-reduce-past-norm (family 3, a collective moved past a
// non-linearity): the attention output's all-reduce moves past the residual
// add and the FFN's RMSNorm, so each rank normalizes its partial residual.
// The count of collectives is unchanged, so the count guard passes it.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class TpReducePastNorm final : public EngineHooks {
 public:
  bool TpReduceAfterNorm() const override { return true; }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const TpReducePastNorm hooks;
  return hooks;
}

}  // namespace verity::corruptions
