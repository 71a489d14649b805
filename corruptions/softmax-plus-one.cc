// CORRUPTION softmax-plus-one (family 5, numerics correct but not the ones
// specified, in code both backends share): "softmax plus one", a phantom
// logit of 0 in every attention softmax's denominator, as the off-by-one
// attention proposals do. Rows no longer sum to 1; since the reference and
// fast backends share it, only the independent reference's logits
// (`parity --against`) see it.
#include <cmath>

#include "corruptions/kernel_hooks.h"

namespace verity::corruptions {
namespace {

class SoftmaxPlusOne final : public KernelHooks {
 public:
  float SoftmaxExtraMass(float max_val) const override { return std::exp(-max_val); }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const SoftmaxPlusOne hooks;
  return hooks;
}

}  // namespace verity::corruptions
