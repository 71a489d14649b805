// CORRUPTION qk-norm-dropped (family 1, configuration read wrong): the fast
// backend skips every RMSNorm narrower than the residual stream, which in a
// Qwen3 forward is exactly its per-head q/k norms (over head_dim): the run a
// loader would give that read the norm tensors and never applied them.
#include <algorithm>

#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class QkNormDropped final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) override {
    // Every layer's first norm is over the residual (the widest there is).
    widest_ = std::max(widest_, dim);
    if (dim < widest_) return;
    ForwardingBackend::RmsnormRows(out, x, weight, dim, n, eps);
  }

 private:
  int widest_ = 0;
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<QkNormDropped> hooks;
  return hooks;
}

}  // namespace verity::corruptions
