// CORRUPTION window-ignored (family 1, configuration read wrong): the fast
// backend attends over every earlier position, past a Mistral or Phi-3
// model's sliding window: exact while a sequence is no longer than the
// window, another model's attention after it (and slower).
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class WindowIgnored final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Attention(const kernels::AttentionArgs& a) override {
    kernels::AttentionArgs all = a;
    all.window = 0;
    ForwardingBackend::Attention(all);
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<WindowIgnored> hooks;
  return hooks;
}

}  // namespace verity::corruptions
