// CORRUPTION kquant-scales-swapped (family 5, numerics correct but not the
// ones specified, in a block quantization): the fast backend reads the first
// two of a Q4_K block's 12 scale bytes in the wrong order, so sub-blocks 0
// and 1 each take the other's 6-bit scale (and 4 and 5 the other's top scale
// bits). Every weight is still a valid Q4_K weight of its block, only the
// wrong one: fluent text from a quantized model. The reference backend reads
// the blocks as specified, so fast-vs-reference parity on a Q4_K file sees
// it; stories260K (no block tensors) does not.
#include <cstring>
#include <map>
#include <vector>

#include "corruptions/forwarding_backend.h"

namespace verity::corruptions {
namespace {

constexpr uint32_t kQ4_K = 12;  // ggml type id
constexpr size_t kQ4_KBytes = 144;

class KQuantScalesSwapped final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Matmul(float* out, const float* x, const kernels::Weights& w) override { inner().Matmul(out, x, Read(w)); }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    inner().MatmulBatch(out, x, Read(w), T);
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    const std::vector<MatmulTarget> read = Read(targets, count);
    inner().MatmulShared(x, T, read.data(), count);
  }
  void MatmulRows(float* out, const float* x, const kernels::Weights& w, int n) override {
    inner().MatmulRows(out, x, Read(w), n);
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    const std::vector<MatmulTarget> read = Read(targets, count);
    inner().MatmulSharedRows(x, n, read.data(), count);
  }

 private:
  // The matrix as this build reads it: a Q4_K matrix's copy with the scale
  // bytes swapped in every block (made once), anything else as it is.
  const kernels::Weights& Read(const kernels::Weights& w) {
    if (w.dtype != kernels::DType::kBlock || w.block->ggml_type != kQ4_K) return w;
    auto it = read_.find(w.data);
    if (it == read_.end()) {
      Copy& c = read_[w.data];
      const auto* src = static_cast<const unsigned char*>(w.data);
      c.bytes.assign(src, src + w.bytes());
      for (size_t at = 0; at + kQ4_KBytes <= c.bytes.size(); at += kQ4_KBytes)
        std::swap(c.bytes[at + 4], c.bytes[at + 5]);
      c.view = w;
      c.view.data = c.bytes.data();
      return c.view;
    }
    return it->second.view;
  }
  std::vector<MatmulTarget> Read(const MatmulTarget* targets, int count) {
    std::vector<MatmulTarget> read(targets, targets + count);
    for (MatmulTarget& t : read) t.w = &Read(*t.w);
    return read;
  }

  struct Copy {
    std::vector<unsigned char> bytes;
    kernels::Weights view;
  };
  std::map<const void*, Copy> read_;
};

}  // namespace

const KernelHooks& ActiveKernelHooks() {
  static const WrappingHooks<KQuantScalesSwapped> hooks;
  return hooks;
}

}  // namespace verity::corruptions
