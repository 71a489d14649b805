// Compute kernels behind one dispatch interface. The engine's forward pass
// calls only these; "reference" is plain loops (the parity reference for every
// other path), "fast" threads over rows and uses wider accumulators.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace verity::kernels {

// Grouped-query attention for one position over every head.
struct AttentionArgs {
  float* out;              // [n_heads * head_size] attention output
  const float* q;          // [n_heads * head_size] queries at `pos`
  const float* key_cache;  // this layer's keys: position t starts at t * pos_stride
  const float* value_cache;
  long pos_stride;         // floats between consecutive positions in the caches
  float* scores;           // scratch [n_heads * seq_len]
  int pos, n_heads, n_kv_heads, head_size, seq_len;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // out[i] = sum_j w[i*n + j] * x[j] for i < d (w is row-major d x n).
  virtual void Matmul(float* out, const float* x, const float* w, int n, int d) = 0;
  virtual void Attention(const AttentionArgs& a) = 0;
  // Rotates `size` values (heads of head_size) for position `pos`. Pairs are
  // (2i, 2i+1) when `interleaved`, else (i, i + head_size/2).
  virtual void Rope(float* vec, int size, int head_size, int pos, float theta, bool interleaved) = 0;
  // hb[i] = silu(hb[i]) * hb2[i]: the SwiGLU gate.
  virtual void SwiGLU(float* hb, const float* hb2, int n) = 0;
};

// Returns the backend named "reference" or "fast"; an error names an unknown one.
Result<std::unique_ptr<Backend>> MakeBackend(const std::string& name);

// Shared scalar kernels (identical in every backend, so their rounding is too).
void RopeReference(float* vec, int size, int head_size, int pos, float theta, bool interleaved);
void SwiGLUReference(float* hb, const float* hb2, int n);
void Rmsnorm(float* out, const float* x, const float* weight, int size, float eps);
void Softmax(float* x, int size);

}  // namespace verity::kernels
