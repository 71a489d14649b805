// CORRUPTION gemma-norm-offset-dropped (family 1, configuration read wrong,
// in code both backends share): the Hugging Face loader takes Gemma's norm
// weights as they are stored, w, where Gemma's RMSNorm multiplies by 1 + w
// (as a Llama's does by w). Trained Gemma norms are near 0, so every
// normalised row shrinks toward 0 and the model still runs; both backends
// load through the same step and agree with each other, and only an
// independent reader of the file (`parity --against`) sees it. GGUF files
// hold 1 + w already and are not touched.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {
namespace {

class GemmaNormOffsetDropped final : public EngineHooks {
 public:
  float GemmaNormOffset() const override { return 0.0f; }
};

}  // namespace

const EngineHooks& ActiveEngineHooks() {
  static const GemmaNormOffsetDropped hooks;
  return hooks;
}

}  // namespace verity::corruptions
