// The rotate-and-cache step of a decoded row in one launch (rope_cache.cu):
// q and key rotated at the row's position, key and value written into the
// KV cache there. Positions (and slots) are read on the device, so a
// recorded decode step replays it at every position. Each value is what
// LaunchRopeAt and LaunchCopyRowAt give it. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/launch_plan.h"

namespace verity::kernels::cuda {

struct RopeCacheArgs {
  float* q;            // rows of q_width floats (device state)
  float* key;          // rows of kv_width floats
  const float* value;  // rows of kv_width floats
  float* key_cache;    // this layer's caches of slot 0
  float* value_cache;
  int64_t pos_stride;   // floats between positions in a cache
  int64_t slot_stride;  // floats between slots' caches
  const float* table;   // cos and sin per pair, head_size floats per position
  const int* pos;       // row t's position pos[t] (device)
  const int* slot;      // row t's slot slot[t] (device); nullptr: slot 0
  int q_width, kv_width, head_size;
  bool interleaved;
};

// Plan: PlanRopeCache(rows, q_width, kv_width, head_size).
Status LaunchRopeCache(const LaunchPlan& plan, const RopeCacheArgs& a, cudaStream_t stream, const std::string& ctx);

}  // namespace verity::kernels::cuda
