// Corruption builds only (CORRUPTIONS.md): the shared-code hooks of
// shared_hooks.h with the deliberate bug this build was configured with;
// every other hook keeps the specified arithmetic.
#include <cmath>

#include "kernels/cpu/shared_hooks.h"

namespace verity::kernels::hooks {

float SoftmaxExtraMass(float max_val) {
#ifdef VERITY_CORRUPTION_SOFTMAX_PLUS_ONE
  // CORRUPTION (numerics correct but not the ones specified): "softmax plus
  // one", a phantom logit of 0 in every denominator, as the off-by-one
  // attention proposals do. Rows no longer sum to 1; both backends share it.
  return std::exp(-max_val);
#else
  (void)max_val;
  return 0.0f;
#endif
}

}  // namespace verity::kernels::hooks
