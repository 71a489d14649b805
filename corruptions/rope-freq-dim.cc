// CORRUPTION rope-freq-dim (family 1, configuration read wrong): the fast
// RoPE's frequency exponent uses the vector width (dim) where head_size
// belongs.
#include <cmath>

#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class RopeFreqDim final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  // The reference rotation with frequencies theta^(-2i / size): the model's
  // table inv_freq[i] = theta^(-2i / head_size), raised to head_size / size
  // (exact for an unscaled table).
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    const int half = head_size / 2;
    const float power = static_cast<float>(head_size) / static_cast<float>(size);
    for (int i = 0; i < half; i++) {
      const float val = static_cast<float>(pos) * powf(inv_freq[i], power);
      const float fcr = cosf(val), fci = sinf(val);
      for (int base = 0; base < size; base += head_size) {
        const int x = interleaved ? base + 2 * i : base + i;
        const int y = interleaved ? x + 1 : x + half;
        const float v0 = vec[x], v1 = vec[y];
        vec[x] = v0 * fcr - v1 * fci;
        vec[y] = v0 * fci + v1 * fcr;
      }
    }
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<RopeFreqDim> hooks;
  return hooks;
}

}  // namespace verity::corruptions
