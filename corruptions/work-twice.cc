// work-twice: a speed bug, not a wrong number (not a CORRUPTIONS.md row;
// the demo scores its fix). Every matmul and attention step of the fast
// backend runs a second time and writes the same bits again (none of them
// reads its own output), so parity passes it and only a speed measurement
// sees it.
#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

class WorkTwice final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Matmul(float* out, const float* x, const kernels::Weights& w) override {
    Twice([&] { inner().Matmul(out, x, w); });
  }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    Twice([&] { inner().MatmulBatch(out, x, w, T); });
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    Twice([&] { inner().MatmulShared(x, T, targets, count); });
  }
  void MatmulRows(float* out, const float* x, const kernels::Weights& w, int n) override {
    Twice([&] { inner().MatmulRows(out, x, w, n); });
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    Twice([&] { inner().MatmulSharedRows(x, n, targets, count); });
  }
  void Attention(const kernels::AttentionArgs& a) override {
    Twice([&] { inner().Attention(a); });
  }

 private:
  template <class F>
  static void Twice(const F& f) {
    f();
    f();
  }
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<WorkTwice> hooks;
  return hooks;
}

}  // namespace verity::corruptions
