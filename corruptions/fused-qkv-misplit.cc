// CORRUPTION fused-qkv-misplit (family 2, partition arithmetic, in code both
// backends share): the loaders split Phi-3's fused qkv_proj as q, v, k, so
// k is read from v's rows and v from k's. With as many KV heads as query
// heads (Phi-3-mini) every part has the shape it should, so the model runs;
// both backends load through the same split and agree with each other, and
// only an independent reader of the file (`parity --against`) sees it.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class FusedQkvMisplit final : public EngineHooks {
 public:
  int64_t FusedPartFirstRow(const std::vector<int64_t>& rows, size_t part) const override {
    if (rows.size() == 3 && part == 1) return rows[0] + rows[2];  // k at v's rows
    if (rows.size() == 3 && part == 2) return rows[0];            // v at k's rows
    return EngineHooks::FusedPartFirstRow(rows, part);
  }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const FusedQkvMisplit hooks;
  return hooks;
}

}  // namespace verity::corruptions
