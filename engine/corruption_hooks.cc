// Compiled only into corruption builds; see corruption_hooks.h and CORRUPTIONS.md.
#include <algorithm>

#include "engine/corruption_hooks.h"

#ifndef VERITY_CORRUPTION_NAME
#error "corruption_hooks.cc belongs to corruption builds only (VERITY_CORRUPTION_NAME is unset)"
#endif

namespace verity::hooks {

KvCacheLayout KvLayout(const KvCacheLayout& standard, const ModelConfig& c, const std::string& backend) {
  if (std::string(VERITY_CORRUPTION_NAME) != "kv-stride-masked" || backend != "fast") return standard;
  // Stride masked by depth: the fast path swaps the two strides into a
  // position-major layout sized for 4 layers. Each (layer, position) still has
  // its own slot while n_layers <= 4; deeper models overwrite.
  KvCacheLayout bad;
  bad.layer_stride = c.kv_dim();
  bad.pos_stride = 4L * c.kv_dim();
  bad.floats = std::max<size_t>(standard.floats, static_cast<size_t>(4) * c.seq_len * c.kv_dim() +
                                                     static_cast<size_t>(c.n_layers) * c.kv_dim());
  return bad;
}

}  // namespace verity::hooks
