// CORRUPTION attention-stale-past-128 (family 4, work that silently does not
// happen): past 128 positions the fast attention step returns early, leaving
// whatever was in its output buffer, unreported.
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class AttentionStalePast128 final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Attention(const kernels::AttentionArgs& a) override {
    if (a.pos >= 128) return;
    inner().Attention(a);
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<AttentionStalePast128> hooks;
  return hooks;
}

}  // namespace verity::corruptions
