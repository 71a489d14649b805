// See rope_cache.h. The same pair arithmetic as RopeAtKernel (elementwise.h),
// and the key cache takes the rotated pair from the thread that rotated it.
#include "kernels/cuda/rope_cache.h"

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/work_map.h"

namespace verity::kernels::cuda {
namespace {

// Work item p of row blockIdx.y: a q pair, then a key pair (rotated and
// cached), then a value float (cached).
__global__ void RopeCacheKernel(RopeCacheArgs r) {
  GridDependents();  // lets a dependent launch after it be scheduled early
  const int t = blockIdx.y, pos = r.pos[t], work = map::RopeCacheWorkItems(r.q_width, r.kv_width);
  const float* cs = r.table + static_cast<size_t>(pos) * r.head_size;
  float* q = r.q + static_cast<size_t>(t) * r.q_width;
  float* key = r.key + static_cast<size_t>(t) * r.kv_width;
  const float* value = r.value + static_cast<size_t>(t) * r.kv_width;
  const int64_t at = pos * r.pos_stride + (r.slot ? r.slot[t] * r.slot_stride : 0);
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < work; p += gridDim.x * blockDim.x) {
    int a = 0, b = 0;
    const map::RopeCacheItem item = map::RopeCacheWorkItem(p, r.q_width, r.kv_width);
    if (item.kind == map::RopeCacheWork::kQPair) {
      RotatePair(q, item.index, cs, r.head_size, r.interleaved, &a, &b);
    } else if (item.kind == map::RopeCacheWork::kKeyPair) {
      RotatePair(key, item.index, cs, r.head_size, r.interleaved, &a, &b);
      r.key_cache[at + a] = key[a];
      r.key_cache[at + b] = key[b];
    } else {
      r.value_cache[at + item.index] = value[item.index];
    }
  }
}

}  // namespace

Status LaunchRopeCache(const LaunchPlan& plan, const RopeCacheArgs& a, cudaStream_t stream, const std::string& ctx) {
  RopeCacheKernel<<<Grid(plan), Block(plan), plan.shared_bytes, stream>>>(a);
  VERITY_CUDA_LAUNCH_CHECK(plan.kernel, ctx);
  return OkStatus();
}

}  // namespace verity::kernels::cuda
