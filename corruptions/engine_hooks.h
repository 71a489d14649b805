// Where a corruption build (CORRUPTIONS.md) changes the engine: the loaders,
// the KV cache layout and the tensor-parallel plan and forward. Each hook's
// default is the specified behaviour, and a normal build uses the defaults
// (engine_none.cc); a corruption at this layer is one file,
// corruptions/<name>.cc, that overrides the hook it needs and defines
// ActiveEngineHooks() (see kernel_hooks.h). Nothing here is on a per-token
// path: the engine reads each hook once, when it is set up.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/shard_plan.h"

namespace verity::corruptions {

class EngineHooks {
 public:
  virtual ~EngineHooks() = default;
  // The RoPE base the llama2.c loader uses, given the format's fixed value.
  virtual float Llama2cRopeTheta(float format_theta) const { return format_theta; }
  // The KV cache layout a Transformer on the backend named `backend` uses,
  // given the standard one.
  virtual KvCacheLayout KvLayout(const KvCacheLayout& standard, const ModelConfig& c,
                                 const std::string& backend) const {
    (void)c, (void)backend;
    return standard;
  }
  // The shard a rank gets, given the planned one.
  virtual RankShard TpRankShard(const RankShard& planned, const ModelConfig& c) const {
    (void)c;
    return planned;
  }
  // Whether the attention output's all-reduce moves past the FFN's RMSNorm.
  virtual bool TpReduceAfterNorm() const { return false; }
  // What a Hugging Face Gemma checkpoint's norm weights are offset by (its
  // RMSNorm multiplies by 1 + w).
  virtual float GemmaNormOffset() const { return 1.0f; }
  // The row at which part `part` of a fused tensor starts (Phi-3's qkv_proj:
  // q, k, v; gate_up_proj: gate, up), given every part's rows: the rows of
  // the parts before it.
  virtual int64_t FusedPartFirstRow(const std::vector<int64_t>& rows, size_t part) const {
    int64_t first = 0;
    for (size_t i = 0; i < part; i++) first += rows[i];
    return first;
  }
};

// The engine hooks of this build.
const EngineHooks& ActiveEngineHooks();

}  // namespace verity::corruptions
