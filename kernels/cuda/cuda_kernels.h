// Host-side launchers of the CUDA kernels (kernels.cu). Each takes the plan
// computed and validated by launch_plan.h, launches on `stream`, and checks the
// launch (cudaGetLastError), returning an error naming the kernel and `ctx`
// (layer and operation). Pointers are device pointers. Internal to kernels/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/launch_plan.h"

namespace verity::kernels::cuda {

// out[rows] = W x; W row-major, rows of RowBytes(dtype, cols) bytes.
Status LaunchMatvec(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows, int cols,
                    cudaStream_t stream, const std::string& ctx);
// out[T x rows] = x[T x cols] W^T.
Status LaunchMatmulBatch(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows,
                         int cols, int T, cudaStream_t stream, const std::string& ctx);
// Whether LaunchRows can take this product: cols % 8 == 0, x 16-byte aligned
// and w 16-byte (f32, bf16) or 4-byte (q8_0) aligned.
bool VectorizedRows(DType dtype, const void* w, const float* x, int cols);
// out[T x rows] = x[T x cols] W^T with 16-byte loads (plan: PlanRows). Row t
// is bit for bit what T = 1 gives for x_t, whatever T.
Status LaunchRows(const LaunchPlan& plan, DType dtype, float* out, const void* w, const float* x, int rows, int cols,
                  int T, cudaStream_t stream, const std::string& ctx);
// Row t of x (dim floats) = row tokens[t] of the table, t < n; tokens on the device.
Status LaunchEmbed(const LaunchPlan& plan, float* x, const float* table, const int* tokens, int dim, int n,
                   cudaStream_t stream, const std::string& ctx);
// A decoded position's steps whose position lives on the device (*pos), for
// a recorded step (a CUDA graph) that replays at every position. RoPE of one
// row of `size` values from the table's row *pos (plan: PlanRope(1, ...)).
Status LaunchRopeAt(const LaunchPlan& plan, float* vec, const float* table, const int* pos, int size, int head_size,
                    bool interleaved, cudaStream_t stream, const std::string& ctx);
// base[*pos * pos_stride + i] = row[i], i < width (plan: PlanElementwise("kv_write", width)).
Status LaunchCopyRowAt(const LaunchPlan& plan, float* base, int64_t pos_stride, const int* pos, const float* row,
                       int width, cudaStream_t stream, const std::string& ctx);
// out[i] = bf16(x[i]), round to nearest even (plan: PlanElementwise("to_bf16", n)).
Status LaunchToBF16(const LaunchPlan& plan, uint16_t* out, const float* x, int64_t n, cudaStream_t stream,
                    const std::string& ctx);
// x[i] += y[i] (kAdd), x[i] += a * y[i] (kAxpy), x[i] /= a (kDivide),
// x[i] *= a (kScale) or x[i] = a * tanh(x[i] / a) (kSoftCap: ew::SoftCap), i < n.
enum class ElementwiseOp { kAdd = 0, kAxpy = 1, kDivide = 2, kScale = 3, kSoftCap = 4 };
Status LaunchElementwise(const LaunchPlan& plan, ElementwiseOp op, float* x, const float* y, float a, int64_t n,
                         cudaStream_t stream, const std::string& ctx);
// out[r] = rmsnorm(x[r]) * weight for each of `rows` rows of `size` values (out may be x).
Status LaunchRmsnorm(const LaunchPlan& plan, float* out, const float* x, const float* weight, int rows, int size,
                     float eps, cudaStream_t stream, const std::string& ctx);
// Rotates `rows` vectors of `size` values; pair i of row r turns by the angle
// whose cosine and sine are cos_sin[2 * (r * head_size/2 + i)] and the next value.
Status LaunchRope(const LaunchPlan& plan, float* vec, const float* cos_sin, int rows, int size, int head_size,
                  bool interleaved, cudaStream_t stream, const std::string& ctx);

// Attention of queries at positions pos0 .. pos0 + n_queries - 1 (row y of q and
// out belongs to pos0 + y, rows `row_stride` floats apart), each over every
// cached position up to its own.
struct AttentionDeviceArgs {
  float* out;
  const float* q;
  const float* key_cache;
  const float* value_cache;
  int64_t pos_stride;  // floats between consecutive positions in the caches
  int64_t row_stride;  // floats between consecutive query (and output) rows
  int64_t pos0;
  int n_queries, n_heads, n_kv_heads, head_size;
  // Where pos0 is read on the device instead (a recorded decode step, whose
  // launches replay at every position); nullptr: pos0 above.
  const int* pos0_at = nullptr;
  // The split decode attention over a batched step's rows (grid.z): row z
  // (q and out rows row_stride apart) at position row_pos[z], over the
  // caches row_slot[z] * slot_stride floats on; device ints. nullptr: one row.
  const int* row_pos = nullptr;
  const int* row_slot = nullptr;
  int64_t slot_stride = 0;
  // As AttentionArgs: a position attends from ew::FirstAttended(pos, window)
  // (0: from position 0); scores are q.k / sqrt(scale_dim) (0: head_size),
  // soft-capped where softcap > 0 (ew::AttentionScore). The first position is
  // found on the device from the position there, so a recorded step's replays
  // window alike.
  int window = 0;
  float scale_dim = 0.0f;
  float softcap = 0.0f;
};
Status LaunchAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, cudaStream_t stream,
                       const std::string& ctx);
// The split decode attention's scratch (PlanDecodeAttention): the partials
// (DecodeAttentionPartialFloats) and one counter per row and head, zero before the
// first launch; every launch leaves the counters zero again.
struct DecodeAttentionScratch {
  float* partials;
  unsigned int* counters;
};
// Decode attention (a.n_queries == 1, head_size <= kDecodeMaxHeadSize) split
// over the context (plan: PlanDecodeAttention with the cache's capacity).
// Deterministic: the same bits for the same inputs whichever block finishes
// last, and with the position given (pos0) or read on the device (pos0_at).
// Launches on one stream may share a scratch (each leaves it ready); launches
// that could overlap may not.
Status LaunchDecodeAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, const DecodeAttentionScratch& s,
                             cudaStream_t stream, const std::string& ctx);
// out[i] = bf16(weight i) for the n weights of a q8_0 matrix stored as plain
// blocks (n % 8 == 0; out 16-byte aligned; plan: PlanElementwise("q8_0_to_bf16", n / 8)).
Status LaunchQ8_0ToBF16(const LaunchPlan& plan, uint16_t* out, const void* w, int64_t n, cudaStream_t stream,
                        const std::string& ctx);
// A prefill block's attention (a.n_queries rows from a.pos0, q and out rows
// a.row_stride floats apart) as flash-style tiles on the tensor cores
// (flash_attention.cu; plan: PlanFlashAttention): TF32 inputs, f32
// accumulation and softmax, no score written to memory. Takes what
// FlashAttentionTakes says (head sizes 64, 96, 128; caches 16-byte aligned at
// every position; pos0 given, not read on the device; one sequence); an
// error naming the head size and stride otherwise.
bool FlashAttentionTakes(const AttentionDeviceArgs& a);
Status LaunchFlashAttention(const LaunchPlan& plan, const AttentionDeviceArgs& a, cudaStream_t stream,
                            const std::string& ctx);
// Row t of head h of scores [heads][T][n] (query position pos0 + t): each
// score soft-capped where softcap > 0, then the softmax over positions
// ew::FirstAttended(pos0 + t, window) .. pos0 + t, run.c's arithmetic (max,
// expf, sum, divide), and zero outside them, so a product with the values
// adds nothing there.
Status LaunchCausalSoftmax(const LaunchPlan& plan, float* scores, int64_t n, int T, int64_t pos0, int window,
                           float softcap, cudaStream_t stream, const std::string& ctx);
// A prefill block's two batched attention products (cuBLAS's pointer-array
// form): the matrices of every query head, at ew::AttentionHeadAt's offsets.
struct AttentionBlockPointers {
  const float *q, *keys, *values;
  float *scores, *out;
};
// Writes 6 arrays of `heads` pointers at `arrays`: the scores product's A
// (keys), B (q) and C (scores), then the values product's A (values), B
// (scores) and C (out). plan: PlanElementwise("attention_pointers", heads).
Status LaunchAttentionPointers(const LaunchPlan& plan, const AttentionBlockPointers& p, int heads, int group,
                               int head_size, int64_t tn, void** arrays, cudaStream_t stream, const std::string& ctx);
// hb[i] = silu(hb[i]) * hb2[i], i < n.
Status LaunchSwiGLU(const LaunchPlan& plan, float* hb, const float* hb2, int64_t n, cudaStream_t stream,
                    const std::string& ctx);
// hb[i] = gelu_tanh(hb[i]) * hb2[i] (ew::GeGLU), i < n (plan: PlanElementwise("geglu", n)).
Status LaunchGeGLU(const LaunchPlan& plan, float* hb, const float* hb2, int64_t n, cudaStream_t stream,
                   const std::string& ctx);
// Per row of `rows` router-logit rows: the top k experts (chosen[row*k ..]) and their weights.
Status LaunchMoeTopK(const LaunchPlan& plan, const float* logits, int rows, int n_experts, int k, int* chosen,
                     float* weights, cudaStream_t stream, const std::string& ctx);
// *out = the index of the largest of x[0..n) (ties: the lower index); with
// PlanArgmaxRows, out[r] that of row r (x + r * n).
Status LaunchArgmax(const LaunchPlan& plan, const float* x, int64_t n, int* out, cudaStream_t stream,
                    const std::string& ctx);

}  // namespace verity::kernels::cuda
