// CORRUPTION kv-stride-masked (masked by depth): the fast path's KV cache
// has its layer and position strides swapped into a position-major layout
// sized for 4 layers. Each (layer, position) still has its own slot while
// n_layers <= 4; deeper models overwrite, so only a sweep over depth finds it.
#include <algorithm>

#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class KvStrideMasked final : public EngineHooks {
 public:
  KvCacheLayout KvLayout(const KvCacheLayout& standard, const ModelConfig& c,
                         const std::string& backend) const override {
    if (backend != "fast") return standard;
    KvCacheLayout bad;
    bad.layer_stride = c.kv_dim();
    bad.pos_stride = 4L * c.kv_dim();
    bad.floats = std::max<size_t>(standard.floats, static_cast<size_t>(4) * c.seq_len * c.kv_dim() +
                                                       static_cast<size_t>(c.n_layers) * c.kv_dim());
    return bad;
  }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const KvStrideMasked hooks;
  return hooks;
}

}  // namespace verity::corruptions
