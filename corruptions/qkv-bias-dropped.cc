// CORRUPTION qkv-bias-dropped (family 1, configuration read wrong): the fast
// backend never adds Qwen2's q/k/v biases, as a loader that treated a qwen2
// checkpoint as a llama (tolerating the bias tensors) would run it.
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class QkvBiasDropped final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void AddBiasRows(float*, const float*, int, int) override {}
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<QkvBiasDropped> hooks;
  return hooks;
}

}  // namespace verity::corruptions
