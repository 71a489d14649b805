// CORRUPTION attn-softcap-skipped (family 5, numerics correct but not the
// ones specified): the fast backend's attention leaves Gemma 2's scores
// uncapped (softcap * tanh(s / softcap) skipped), as a kernel written for
// Llama and handed a Gemma would. Exact while every score is far below the
// cap (50); a trained Gemma 2's are not.
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class AttnSoftcapSkipped final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Attention(const kernels::AttentionArgs& a) override {
    kernels::AttentionArgs uncapped = a;
    uncapped.softcap = 0.0f;
    ForwardingBackend::Attention(uncapped);
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<AttnSoftcapSkipped> hooks;
  return hooks;
}

}  // namespace verity::corruptions
