// Several independent sequences over one model, for a server's continuous
// batching: each slot has its own KV cache, a prompt is prefilled into one
// slot, and one Step decodes the next position of several slots.
//
// Batch invariance is the contract: the logits Step writes for a slot are bit
// for bit what that slot would get decoded alone (Transformer::Forward on the
// same backend after the same Prefill), whatever the other slots in the step
// and their order. So a request's tokens at temperature 0 never depend on
// who else is being served.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace verity {

class SlotDecoder {
 public:
  // `slots` KV caches of the model's context each (config.seq_len positions);
  // an error names --parallel when the caches do not fit in memory.
  [[nodiscard]] static Result<std::unique_ptr<SlotDecoder>> Create(const Model& model,
                                                                   std::unique_ptr<kernels::Backend> backend,
                                                                   int slots);
  virtual ~SlotDecoder() = default;

  virtual int slots() const = 0;
  // Positions each slot holds.
  virtual int context() const = 0;
  virtual const Model& model() const = 0;
  virtual const char* backend_name() const = 0;
  // Bytes of KV cache all slots hold together (what the server states at startup).
  virtual size_t kv_cache_bytes() const = 0;

  // Prompt positions pos0 .. pos0+T-1 into `slot` (as Transformer::Prefill);
  // positions before pos0 must be in that slot. Returns the last position's
  // logits, valid until the next call.
  virtual const float* Prefill(int slot, const int* tokens, int T, int pos0) = 0;
  // A prompt for PrefillMany: tokens[0..T) at positions pos0 .. pos0+T-1 of `slot`.
  struct Prompt {
    int slot;
    const int* tokens;
    int T, pos0;
  };
  // Several prompts into distinct slots at once; writes n rows of vocab_size
  // logits (row i: prompt i's last position). Each prompt's cache and logits
  // are bit for bit what Prefill gives it alone: the prompts' blocks share
  // one batched pass over the weights where the backend's batched rows are
  // independent (Backend::batch_rows_independent), else they run one after
  // another. A bad argument poisons all n rows, as in Step.
  virtual void PrefillMany(const Prompt* prompts, int n, float* logits) = 0;
  // One position for each of `n` distinct slots: token[i] at pos[i] into
  // slot[i]; writes n rows of vocab_size logits (row i for slot[i]).
  virtual void Step(const int* slot, const int* token, const int* pos, int n, float* logits) = 0;
  // Step, then each row's greedy pick (the largest logit, ties to the lower
  // index: Sampler at temperature 0) into picks[i], without handing the
  // logits over: a device backend picks on the device and sends n ints. A bad
  // argument makes every pick -1 (status() names it).
  virtual void StepGreedy(const int* slot, const int* token, const int* pos, int n, int* picks) = 0;
  // OK, or the first bad argument (a slot out of range or twice in one step,
  // a token outside the vocabulary, a position outside the context: that
  // call's rows are NaN and nothing is run), or the backend's first error (as
  // Transformer::status()).
  [[nodiscard]] virtual Status status() const = 0;
};

}  // namespace verity
