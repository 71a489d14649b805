#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/huge_pages.h"
#include "corruptions/kernel_hooks.h"
#include "kernels/cpu/simd.h"
#include "kernels/kernels.h"

namespace verity::kernels {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kBlock: return "block";
  }
  return "?";
}

Result<DType> DTypeFromName(const std::string& name) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0})
    if (name == DTypeName(t)) return t;
  return Status::Error("dtype '" + name + "' is not one of f32, bf16, q8_0");
}

size_t RowBytes(DType t, int cols) {
  switch (t) {
    case DType::kF32: return static_cast<size_t>(cols) * 4;
    case DType::kBF16: return static_cast<size_t>(cols) * 2;
    case DType::kQ8_0: return static_cast<size_t>(cols / kQ8_0BlockSize) * kQ8_0BlockBytes;
    case DType::kBlock: break;  // per format: Weights::row_bytes()
  }
  return 0;
}

static_assert(sizeof(simd::BlockQ8_0) == kQ8_0BlockBytes && simd::kQ8Block == kQ8_0BlockSize);

void EncodeF32(DType t, const float* src, int rows, int cols, void* dst) {
  const size_t n = static_cast<size_t>(rows) * cols;
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: simd::ConvertF32ToBF16(src, static_cast<uint16_t*>(dst), n); return;
    case DType::kQ8_0:
      for (int i = 0; i < rows; i++)
        simd::QuantizeRowQ8_0(src + static_cast<size_t>(i) * cols, cols,
                              static_cast<uint8_t*>(dst) + i * RowBytes(t, cols));
      return;
    case DType::kBlock: break;  // verity does not quantize to the block types (yet)
  }
}

void EncodeBF16(DType t, const uint16_t* src, int rows, int cols, void* dst) {
  if (t == DType::kBF16) {
    std::memcpy(dst, src, static_cast<size_t>(rows) * cols * 2);
    return;
  }
  // Through f32 (exact), a row at a time.
  std::vector<float> row(static_cast<size_t>(cols));
  unsigned char* out = static_cast<unsigned char*>(dst);
  for (int i = 0; i < rows; i++) {
    simd::BF16ToF32Array(src + static_cast<size_t>(i) * cols, row.data(), static_cast<size_t>(cols));
    EncodeF32(t, row.data(), 1, cols, out + i * RowBytes(t, cols));
  }
}

void DecodeRow(const Weights& w, int i, float* out) {
  const unsigned char* r = w.row(i);
  switch (w.dtype) {
    case DType::kF32: std::memcpy(out, r, static_cast<size_t>(w.cols) * 4); return;
    case DType::kBF16: simd::BF16ToF32Array(reinterpret_cast<const uint16_t*>(r), out, w.cols); return;
    case DType::kQ8_0: simd::DequantizeRowQ8_0(r, w.cols, out); return;  // scale * q[j], exactly
    case DType::kBlock: w.block->dequantize_row(r, w.cols, out); return;
  }
}

void EncodeQ8_0Blocks(const void* blocks, int cols, void* dst) {
  simd::PackRowQ8_0(static_cast<const simd::BlockQ8_0*>(blocks), cols, static_cast<uint8_t*>(dst));
}

void UnpackQ8_0Rows(const Weights& w, void* dst) { UnpackQ8_0Rows(w, 0, w.rows, dst); }

void UnpackQ8_0Rows(const Weights& w, int r0, int r1, void* dst) {
  unsigned char* out = static_cast<unsigned char*>(dst);
  for (int i = r0; i < r1; i++)
    simd::UnpackRowQ8_0(w.row(i), w.cols,
                        reinterpret_cast<simd::BlockQ8_0*>(out + static_cast<size_t>(i - r0) * w.row_bytes()));
}

void SliceQ8_0Row(const Weights& w, int i, int c0, int c1, void* dst) {
  std::vector<simd::BlockQ8_0> blocks(static_cast<size_t>(w.cols / kQ8_0BlockSize));
  simd::UnpackRowQ8_0(w.row(i), w.cols, blocks.data());
  simd::PackRowQ8_0(blocks.data() + c0 / kQ8_0BlockSize, c1 - c0, static_cast<uint8_t*>(dst));
}

const char* SimdTargetName() { return simd::TargetName(); }
bool StreamPrefetchOn() { return simd::StreamPrefetchOn(); }
const char* StreamPrefetchHintName() { return simd::StreamPrefetchName(simd::StreamPrefetch()); }

// Same arithmetic as llama2.c's run.c, so greedy text matches it byte for byte.
void Rmsnorm(float* out, const float* x, const float* weight, int size, float eps) {
  float ss = 0.0f;
  for (int j = 0; j < size; j++) ss += x[j] * x[j];
  ss /= size;
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  for (int j = 0; j < size; j++) out[j] = weight[j] * (ss * x[j]);
}

void Softmax(float* x, int size) {
  float max_val = x[0];
  for (int i = 1; i < size; i++) max_val = x[i] > max_val ? x[i] : max_val;
  float sum = corruptions::ActiveKernelHooks().SoftmaxExtraMass(max_val);  // 0 but in one corruption build
  for (int i = 0; i < size; i++) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < size; i++) x[i] /= sum;
}

void RopeBaseInverseFrequencies(float theta, int head_size, float* inv_freq) {
  // As run.c: head_dim = 2i, freq = 1 / theta^(head_dim / head_size), in float.
  for (int i = 0; i < head_size / 2; i++)
    inv_freq[i] = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
}

void RopeReference(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) {
  const int half = head_size / 2;
  for (int base = 0; base < size; base += head_size) {
    for (int i = 0; i < half; i++) {
      float val = static_cast<float>(pos) * inv_freq[i];
      float fcr = cosf(val), fci = sinf(val);
      const int a = interleaved ? base + 2 * i : base + i;
      const int b = interleaved ? a + 1 : a + half;
      float v0 = vec[a], v1 = vec[b];
      vec[a] = v0 * fcr - v1 * fci;
      vec[b] = v0 * fci + v1 * fcr;
    }
  }
}

void SwiGLUReference(float* hb, const float* hb2, int n) {
  for (int i = 0; i < n; i++) {
    float val = hb[i];
    val *= (1.0f / (1.0f + expf(-val)));
    hb[i] = val * hb2[i];
  }
}

void GeGLUReference(float* hb, const float* hb2, int n) {
  const float beta = 0.7978845608028654f, kappa = 0.044715f;  // sqrt(2/pi), as PyTorch's tanh GELU
  for (int i = 0; i < n; i++) {
    const float v = hb[i];
    const float inner = beta * (v + kappa * (v * v * v));
    hb[i] = 0.5f * v * (1.0f + tanhf(inner)) * hb2[i];
  }
}

// ---- Backend's host defaults: the forward's state and its steps between the products.

namespace {
// Zeroed host memory from AllocateStreamed (2 MB aligned, huge pages over
// whole extents): the KV cache is streamed every token.
class HostState final : public StateBuffer {
 public:
  explicit HostState(size_t floats)
      : bytes_((std::max<size_t>(floats, 1) * sizeof(float) + 63) / 64 * 64),
        p_(static_cast<float*>(AllocateStreamed(bytes_))),
        floats_(floats) {
    std::memset(p_, 0, bytes_);
  }
  ~HostState() override { std::free(p_); }
  HostState(const HostState&) = delete;
  HostState& operator=(const HostState&) = delete;
  float* data() override { return p_; }
  size_t floats() const override { return floats_; }

 private:
  size_t bytes_;
  float* p_;
  size_t floats_;
};
}  // namespace

std::unique_ptr<StateBuffer> Backend::AllocateState(size_t floats) { return std::make_unique<HostState>(floats); }

void Backend::Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n) {
  (void)rows;  // host memory: the rows are read where they are
  for (int t = 0; t < n; t++)
    std::memcpy(x + static_cast<size_t>(t) * dim, table + static_cast<size_t>(tokens[t]) * dim, dim * sizeof(float));
}

void Backend::RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) {
  for (int t = 0; t < n; t++) {
    const size_t at = static_cast<size_t>(t) * dim;
    Rmsnorm(out + at, x + at, weight, dim, eps);
  }
}

void Backend::AddInPlace(float* x, const float* y, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] += y[i];
}

void Backend::AddBiasRows(float* x, const float* bias, int width, int n) {
  for (int t = 0; t < n; t++, x += width)
    for (int i = 0; i < width; i++) x[i] += bias[i];
}

void Backend::GeGLU(float* hb, const float* hb2, int n) { GeGLUReference(hb, hb2, n); }

void Backend::ScaleInPlace(float* x, float s, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] *= s;
}

void Backend::SoftCapInPlace(float* x, float cap, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] = SoftCap(x[i], cap);
}

void Backend::WriteCache(float* cache, size_t at, const float* row, int width) {
  std::memcpy(cache + at, row, width * sizeof(float));
}

void Backend::RouteTopK(const float* logits, int n, int k, int* chosen, float* weight) {
  thread_local std::vector<int> order;  // per call of every MoE layer: no allocation once grown
  order.resize(n);
  for (int e = 0; e < n; e++) order[e] = e;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  const float mx = logits[order[0]];
  float sum = 0.0f;
  for (int j = 0; j < k; j++) sum += expf(logits[order[j]] - mx);
  for (int j = 0; j < k; j++) {
    chosen[j] = order[j];
    weight[j] = expf(logits[order[j]] - mx) / sum;
  }
}

void Backend::Zero(float* y, int n) { std::fill(y, y + n, 0.0f); }

void Backend::Axpy(float* y, float a, const float* x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

void Backend::RopeBlock(float* vec, int n, int width, int head_size, int pos0, const float* inv_freq,
                        bool interleaved) {
  for (int t = 0; t < n; t++)
    Rope(vec + static_cast<size_t>(t) * width, width, head_size, pos0 + t, inv_freq, interleaved);
}

void Backend::WriteCacheBlock(float* cache, size_t at0, long pos_stride, const float* rows, int width, int n) {
  for (int t = 0; t < n; t++)
    WriteCache(cache, at0 + static_cast<size_t>(t) * pos_stride, rows + static_cast<size_t>(t) * width, width);
}

void Backend::AttentionBlock(const AttentionArgs& a, int n) {
  const size_t row = static_cast<size_t>(a.n_heads) * a.head_size;
  for (int t = 0; t < n; t++) {
    AttentionArgs r = a;
    r.out = a.out + t * row;
    r.q = a.q + t * row;
    r.pos = a.pos + t;
    Attention(r);
  }
}

void Backend::MatmulSwiGLU(const float* x, int n, bool independent, const MatmulTarget& gate, const MatmulTarget& up) {
  const MatmulTarget both[] = {gate, up};
  if (independent) {
    MatmulSharedRows(x, n, both, 2);
  } else {
    MatmulShared(x, n, both, 2);
  }
  SwiGLU(gate.out, up.out, n * gate.w->rows);
}

void Backend::NormMatmulShared(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget* targets,
                               int count) {
  RmsnormRows(norm.out, norm.x, norm.weight, norm.dim, n, norm.eps);
  if (independent) {
    MatmulSharedRows(norm.out, n, targets, count);
  } else {
    MatmulShared(norm.out, n, targets, count);
  }
}

void Backend::NormMatmulSwiGLU(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget& gate,
                               const MatmulTarget& up) {
  RmsnormRows(norm.out, norm.x, norm.weight, norm.dim, n, norm.eps);
  MatmulSwiGLU(norm.out, n, independent, gate, up);
}

void Backend::MatmulAddInPlace(float* x, float* scratch, const float* h, const Weights& w, int n, bool independent) {
  if (independent) {
    MatmulRows(scratch, h, w, n);
  } else {
    MatmulBatch(scratch, h, w, n);
  }
  AddInPlace(x, scratch, static_cast<size_t>(n) * w.rows);
}

void Backend::AttendBlock(const AttendArgs& a, int pos0, int n) {
  const size_t at0 = static_cast<size_t>(pos0) * a.pos_stride;
  RopeBlock(a.q, n, a.q_width(), a.head_size, pos0, a.inv_freq, a.interleaved);
  RopeBlock(a.key, n, a.kv_width(), a.head_size, pos0, a.inv_freq, a.interleaved);
  WriteCacheBlock(a.key_cache, at0, a.pos_stride, a.key, a.kv_width(), n);
  WriteCacheBlock(a.value_cache, at0, a.pos_stride, a.value, a.kv_width(), n);
  // Causal: the cache holds every earlier position, this block's included.
  AttentionBlock(a.RowAttention(0, pos0, 0), n);
}

void Backend::AttendRows(const AttendArgs& a, const int* pos, const int* slot, int n) {
  const int qw = a.q_width(), kw = a.kv_width();
  for (int t = 0; t < n; t++) {
    const size_t at = static_cast<size_t>(pos[t]) * a.pos_stride, cache = slot[t] * a.slot_stride;
    Rope(a.q + static_cast<size_t>(t) * qw, qw, a.head_size, pos[t], a.inv_freq, a.interleaved);
    Rope(a.key + static_cast<size_t>(t) * kw, kw, a.head_size, pos[t], a.inv_freq, a.interleaved);
    WriteCache(a.key_cache + cache, at, a.key + static_cast<size_t>(t) * kw, kw);
    WriteCache(a.value_cache + cache, at, a.value + static_cast<size_t>(t) * kw, kw);
  }
  for (int t = 0; t < n; t++) Attention(a.RowAttention(t, pos[t], slot[t] * a.slot_stride));
}

void Backend::DivideInPlace(float* x, float d, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] /= d;
}

int ArgmaxReference(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

int Backend::Argmax(const float* state, int n) { return ArgmaxReference(state, n); }

void Backend::ArgmaxRows(const float* state, int rows, int n, int* out) {
  for (int r = 0; r < rows; r++) out[r] = Argmax(state + static_cast<size_t>(r) * n, n);
}

void Backend::Download(float* host, const float* state, size_t n) {
  if (n) std::memcpy(host, state, n * sizeof(float));
}

void Backend::Upload(float* state, const float* host, size_t n) {
  if (n) std::memcpy(state, host, n * sizeof(float));
}

}  // namespace verity::kernels
