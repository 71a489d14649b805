// CORRUPTION gelu-for-silu (family 5, numerics correct but not the ones
// specified): the tanh-GELU gate where the model was trained with SiLU.
#include <cmath>

#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class GeluForSilu final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void SwiGLU(float* hb, const float* hb2, int n) override {
    for (int i = 0; i < n; i++) {
      const float v = hb[i];
      const float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
      hb[i] = g * hb2[i];
    }
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<GeluForSilu> hooks;
  return hooks;
}

}  // namespace verity::corruptions
