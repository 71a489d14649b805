// CORRUPTION rope-halves (family 5, numerics correct but not the ones
// specified): rotate-half RoPE on an interleaved-pair (llama2.c) checkpoint.
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class RopeHalves final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool) override {
    inner().Rope(vec, size, head_size, pos, inv_freq, /*interleaved=*/false);
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<RopeHalves> hooks;
  return hooks;
}

}  // namespace verity::corruptions
