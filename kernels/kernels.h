// Compute kernels behind one dispatch interface. The engine's forward pass
// calls only these; "reference" is plain loops (the parity reference for every
// other path), "fast" threads over rows and calls the SIMD kernels.
//
// Weight matrices are typed (f32, bf16, q8_0, or a llama.cpp block
// quantization as the file holds it) and seen through a non-owning view,
// Weights; activations are always f32.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"

namespace verity::kernels {

// How a weight matrix is stored.
//   f32:  4 bytes per weight.
//   bf16: the top 16 bits of the f32 (round to nearest even at conversion).
//   q8_0: each row in blocks of 32 weights; a block is one f32 scale and 32
//         int8 (36 bytes, simd::BlockQ8_0); weight j = scale * q[j]. A q8_0
//         matrix's cols must be a multiple of 32. Within a row, blocks sit in
//         groups of 8 with their int8 interleaved (simd::PackRowQ8_0), so read
//         rows through DecodeRow / UnpackQ8_0Rows, never by block offset.
//   block: one of llama.cpp's block quantizations (Q4_0 ... Q6_K), its
//         blocks exactly as the GGUF file holds them; Weights::block says
//         which. Never a model's dtype (no --dtype names it): a GGUF file's
//         block tensors keep it whatever the other matrices become. The
//         reference backend dequantizes a few rows at a time into f32 (bit for
//         bit the f32 path on the dequantized matrix); the fast backend runs
//         integer dot products on the blocks where they lie (cpu/block_dot.h,
//         docs/dtypes.md "Block quantizations on the CPU").
enum class DType { kF32, kBF16, kQ8_0, kBlock };
// "f32", "bf16", "q8_0", "block".
const char* DTypeName(DType t);
// The inverse of DTypeName for the dtypes a model can be converted to (not
// "block"); an error names the value and the accepted ones.
Result<DType> DTypeFromName(const std::string& name);

// A block quantization as the kernels see it: its block geometry and how a
// row dequantizes. The engine supplies it (from formats/quants, which this
// library does not link).
struct BlockFormat {
  const char* name = "";   // "Q4_K", as errors name the type
  uint32_t ggml_type = 0;  // its ggml id (GGUF numbering): the fast kernels' key (cpu/block_dot.h)
  int block_elems = 0;     // weights per block (a row is whole blocks)
  int block_bytes = 0;
  // `cols` weights (whole blocks) of the row at `row` into out; exact (the
  // dequantization is the format's, bit for bit).
  void (*dequantize_row)(const unsigned char* row, int cols, float* out) = nullptr;
  size_t RowBytes(int cols) const { return static_cast<size_t>(cols / block_elems) * block_bytes; }
};

inline constexpr int kQ8_0BlockSize = 32;   // weights per q8_0 block
inline constexpr int kQ8_0BlockBytes = 36;  // sizeof(simd::BlockQ8_0)

// Bytes of one row of `cols` weights stored as `t` (cols % 32 == 0 for q8_0).
// Not for kBlock, whose rows depend on the format: Weights::row_bytes().
size_t RowBytes(DType t, int cols);

// A non-owning view of a row-major [rows x cols] weight matrix. Row i starts
// at byte i * row_bytes() of data. No alignment is required of data.
struct Weights {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int rows = 0, cols = 0;
  const BlockFormat* block = nullptr;  // kBlock: the format (static storage); else null

  size_t row_bytes() const { return dtype == DType::kBlock ? block->RowBytes(cols) : RowBytes(dtype, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  const unsigned char* row(int i) const { return static_cast<const unsigned char*>(data) + i * row_bytes(); }
};

// A view of f32 weights (the common case and the tests').
inline Weights F32Weights(const float* data, int rows, int cols) { return {DType::kF32, data, rows, cols}; }

// Load-time conversions (the weights are converted once, never per token).
// Writes a row-major [rows x cols] f32 matrix as `t` at dst (rows *
// RowBytes(t, cols) bytes; cols % 32 == 0 for q8_0).
void EncodeF32(DType t, const float* src, int rows, int cols, void* dst);
// The same from bf16 values (raw uint16).
void EncodeBF16(DType t, const uint16_t* src, int rows, int cols, void* dst);
// Row `i` of `w` as f32 values (exact: bf16, q8_0 and the block types
// dequantize exactly).
void DecodeRow(const Weights& w, int i, float* out);
// One q8_0 row given as cols / 32 plain blocks (simd::BlockQ8_0: an f32
// scale, 32 int8; e.g. a GGUF Q8_0 row with its scales widened) written in
// the q8_0 row layout at dst. Exact.
void EncodeQ8_0Blocks(const void* blocks, int cols, void* dst);
// A q8_0 matrix as plain blocks, row after row (w.bytes() bytes at dst: each
// row cols / 32 simd::BlockQ8_0 in column order), for code that reads blocks
// by offset (the CUDA kernels). Exact.
void UnpackQ8_0Rows(const Weights& w, void* dst);
// Rows [r0, r1) alone, as plain blocks at dst ((r1 - r0) x w.row_bytes() bytes).
void UnpackQ8_0Rows(const Weights& w, int r0, int r1, void* dst);
// Columns [c0, c1) of row i of a q8_0 matrix into dst (RowBytes(q8_0, c1 - c0)
// bytes), as a row of that width; c0 and c1 multiples of 32. Exact.
void SliceQ8_0Row(const Weights& w, int i, int c0, int c1, void* dst);

// Grouped-query attention for one position over every head.
struct AttentionArgs {
  float* out;              // [n_heads * head_size] attention output (state)
  const float* q;          // [n_heads * head_size] queries at `pos` (state)
  const float* key_cache;  // this layer's keys: position t starts at t * pos_stride
  const float* value_cache;
  long pos_stride;  // floats between consecutive positions in the caches
  float* scores;    // host scratch [n_heads * seq_len] for a backend that scores on the host
  int pos, n_heads, n_kv_heads, head_size, seq_len;
  // A sliding window (Mistral, Phi-3): `pos` attends to itself and the
  // window - 1 positions before it, no earlier. 0: every earlier position.
  int window = 0;
  // Scores are q.k / sqrt(scale_dim) (Gemma's query_pre_attn_scalar); 0:
  // head_size. Then, where softcap > 0 (Gemma 2), each score s becomes
  // softcap * tanh(s / softcap) (SoftCap) before the softmax.
  float scale_dim = 0.0f;
  float softcap = 0.0f;
  int first() const { return window > 0 && pos >= window ? pos - window + 1 : 0; }
  // The scores' divisor: sqrtf(head_size), bit for bit what it always was, or sqrtf(scale_dim).
  float score_divisor() const { return sqrtf(scale_dim > 0.0f ? scale_dim : static_cast<float>(head_size)); }
};

// `a` as a kernel that attends from position 0 wants it: the caches from the
// first attended position on, `pos` counted from there, no window. Every
// Attention implementation starts here.
inline AttentionArgs Windowed(AttentionArgs a) {
  const int f = a.first();
  a.key_cache += static_cast<size_t>(f) * a.pos_stride;
  a.value_cache += static_cast<size_t>(f) * a.pos_stride;
  a.pos -= f;
  a.window = 0;
  return a;
}

// One layer's attention for rows of q, key and value (state, rows q_width =
// n_heads * head_size and kv_width = n_kv_heads * head_size floats apart):
// rotate q and key, write key and value into the cache, attend (the fused
// Backend::AttendBlock and AttendRows).
struct AttendArgs {
  float* out;  // attention output rows (state), q_width floats apart
  float* q;
  float* key;
  const float* value;
  float* key_cache;  // this layer's cache of the row's slot (AttendBlock) or of slot 0 (AttendRows)
  float* value_cache;
  long pos_stride;        // floats between consecutive positions in the caches
  size_t slot_stride;     // floats between consecutive slots' caches (AttendRows)
  float* scores;          // host scratch, as AttentionArgs::scores
  const float* inv_freq;  // RoPE: head_size / 2 inverse frequencies (host)
  bool interleaved;       // RoPE pairs (2i, 2i+1), else (i, i + head_size/2)
  int n_heads, n_kv_heads, head_size, seq_len;
  int window = 0;          // as AttentionArgs::window
  float scale_dim = 0.0f;  // as AttentionArgs::scale_dim
  float softcap = 0.0f;    // as AttentionArgs::softcap
  int q_width() const { return n_heads * head_size; }
  int kv_width() const { return n_kv_heads * head_size; }
  // Row t's Attention call: at `pos`, over the caches `cache_offset` floats on.
  AttentionArgs RowAttention(int t, int pos, size_t cache_offset) const {
    const size_t row = static_cast<size_t>(t) * q_width();
    return AttentionArgs{out + row,
                         q + row,
                         key_cache + cache_offset,
                         value_cache + cache_offset,
                         pos_stride,
                         scores,
                         pos,
                         n_heads,
                         n_kv_heads,
                         head_size,
                         seq_len,
                         window,
                         scale_dim,
                         softcap};
  }
};

// State the forward keeps between calls (a KV cache), allocated by the
// backend that computes on it, so that a device backend can keep it in its
// own memory. data() is what the backend's own calls take for it (Attention's
// caches, WriteCache); only that backend reads or writes through it.
class StateBuffer {
 public:
  virtual ~StateBuffer() = default;
  virtual float* data() = 0;
  virtual size_t floats() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // out[i] = sum_j W[i][j] * x[j] for i < w.rows (x has w.cols values).
  virtual void Matmul(float* out, const float* x, const Weights& w) = 0;
  // The same for T vectors at once (prefill): x is row-major [T x w.cols],
  // out row-major [T x w.rows]; row t of out is W times row t of x.
  virtual void MatmulBatch(float* out, const float* x, const Weights& w, int T) = 0;
  // Several matrices that read one input (the q/k/v projections, the FFN's
  // gate and up): targets[i].out = *targets[i].w times each of the T vectors
  // of x, bit for bit what MatmulBatch gives for each, which is all this
  // default does. A backend may run them as one job, so no output may alias x
  // or another target's output.
  struct MatmulTarget {
    float* out;
    const Weights* w;
  };
  virtual void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) {
    for (int i = 0; i < count; i++) MatmulBatch(targets[i].out, x, *targets[i].w, T);
  }
  // n independent vectors (one position of each of n sequences: a decode
  // step of continuous batching): x row-major [n x w.cols], out row-major
  // [n x w.rows], and row t of out bit for bit Matmul(x_t), whatever n and the
  // other vectors (batch invariance; MatmulBatch promises only rounding). A
  // backend may read the weights once for all n, which this default (n calls
  // of Matmul) does not.
  virtual void MatmulRows(float* out, const float* x, const Weights& w, int n) {
    for (int t = 0; t < n; t++) Matmul(out + static_cast<size_t>(t) * w.rows, x + static_cast<size_t>(t) * w.cols, w);
  }
  // MatmulShared for n independent vectors: targets[i].out = MatmulRows of
  // *targets[i].w over the n vectors of x (the same no-alias rule).
  virtual void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) {
    for (int i = 0; i < count; i++) MatmulRows(targets[i].out, x, *targets[i].w, n);
  }
  // Whether MatmulBatch (and MatmulShared) of T >= 2 vectors gives row t from
  // row t of x alone, bit for bit whatever T and the other rows are. Then the
  // prompt blocks of several sequences can share one batched pass and each
  // row is what its own block gives (SlotDecoder::PrefillMany). The CPU
  // backends do (one accumulator per row and vector); a GEMM library that
  // picks its split by shape does not promise it, which this default says.
  [[nodiscard]] virtual bool batch_rows_independent() const { return false; }
  // Whether the products take DType::kBlock weights of the llama.cpp block
  // type `ggml_type` (BlockFormat::ggml_type). The CPU backends take every
  // type formats/quants reads; CUDA takes Q4_K and Q6_K. Transformer::Create
  // and SlotDecoder::Create refuse a model holding a type its backend does
  // not take, naming the tensor, the type and the backend.
  [[nodiscard]] virtual bool runs_block_type(uint32_t ggml_type) const {
    (void)ggml_type;
    return false;
  }
  // Whether Attention honours AttentionArgs::window on every path (the CPU
  // backends call Windowed(); CUDA finds the first position on the device).
  // False unless a backend says so: one that does not is
  // refused a context longer than a model's window (CheckBackendRunsModel).
  [[nodiscard]] virtual bool attends_windows() const { return false; }
  // Whether this backend computes Gemma's steps: AttentionArgs::scale_dim
  // and ::softcap in Attention on every path, and GeGLU, ScaleInPlace and
  // SoftCapInPlace on its state. False unless a backend says so (the CPU
  // backends do); a Gemma model is refused a backend that does not
  // (CheckBackendRunsModel). A device backend that says true must override
  // those three, whose defaults run on host memory.
  [[nodiscard]] virtual bool runs_gemma() const { return false; }
  virtual void Attention(const AttentionArgs& a) = 0;
  // ---- A prefill block of one sequence: n rows at positions a.pos .. a.pos+n-1
  // (row t at a.pos + t). These defaults make the per-row calls, in the
  // per-row order's results; a device backend does each as one launch.
  // Rotates row t (`width` floats, rows `width` apart) for position pos0 + t.
  virtual void RopeBlock(float* vec, int n, int width, int head_size, int pos0, const float* inv_freq,
                         bool interleaved);
  // Row t of `rows` (`width` floats each, rows `width` apart) into the cache
  // at float offset at0 + t * pos_stride.
  virtual void WriteCacheBlock(float* cache, size_t at0, long pos_stride, const float* rows, int width, int n);
  // Attention of row t (a.out and a.q advance n_heads * head_size floats a
  // row) at position a.pos + t over the cache up to it.
  virtual void AttentionBlock(const AttentionArgs& a, int n);
  // ---- One decoded position of one sequence, bracketed: between
  // BeginDecodeStep and EndDecodeStep the engine makes the same calls with the
  // same pointers every time it decodes that sequence, only `token` and `pos`
  // differing, and reads nothing back. A device backend may therefore defer
  // the calls and run them as one recorded graph at EndDecodeStep (a CUDA
  // graph: launch latency, not bandwidth, is what limits a small model's
  // decode). A call that hands a result to the host inside the bracket
  // (Download, Upload, RouteTopK, device_stream for a collective) first runs
  // everything deferred, and the rest of the step runs as issued. The
  // defaults do nothing.
  virtual void BeginDecodeStep(int token, int pos) { (void)token, (void)pos; }
  virtual void EndDecodeStep() {}
  // ---- Fused steps: what the forward does in a row, as one call, so that a
  // device backend can make one launch of it (a small model's decode step is
  // hundreds of launches, and launch latency, not bandwidth, sets its speed).
  // Each default makes the separate calls above, and a backend's own version
  // gives their results bit for bit. The corruption wrappers
  // (corruptions/forwarding_backend.h) do not forward these, so a deliberate
  // bug in one of the separate calls breaks the fused path too.
  // gate.out = silu(W_gate x) * (W_up x) for each of the n vectors of x (the
  // SwiGLU feed-forward's first half); afterwards up.out holds unspecified
  // values. `independent`: n sequences' rows (MatmulSharedRows), else one
  // sequence's block (MatmulShared). No output may alias x or the other.
  virtual void MatmulSwiGLU(const float* x, int n, bool independent, const MatmulTarget& gate, const MatmulTarget& up);
  // A sublayer's input: out = RMSNorm(x) * weight for each of the n rows of
  // dim floats (RmsnormRows; out must not alias x), then its products read
  // out. NormMatmulShared: the shared products of out (q/k/v: MatmulShared,
  // or MatmulSharedRows where `independent`); NormMatmulSwiGLU: MatmulSwiGLU
  // of out (the FFN's gate and up). A device backend may normalize in the
  // products' launch; out still holds the normed rows afterwards.
  struct RowsNormArgs {
    float* out;
    const float* x;
    const float* weight;
    int dim;
    float eps;
  };
  virtual void NormMatmulShared(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget* targets,
                                int count);
  virtual void NormMatmulSwiGLU(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget& gate,
                                const MatmulTarget& up);
  // x += W h for each of the n rows: a projection completed by its residual
  // add, where no all-reduce sits between them. `scratch` (n * w.rows floats
  // of state) may be overwritten; the default projects into it.
  virtual void MatmulAddInPlace(float* x, float* scratch, const float* h, const Weights& w, int n, bool independent);
  // A block of one sequence (or one decoded position): rows t < n at
  // positions pos0 + t, caches of its slot. RopeBlock of q and key,
  // WriteCacheBlock of key and value, AttentionBlock.
  virtual void AttendBlock(const AttendArgs& a, int pos0, int n);
  // n independent rows (one position of each of n sequences): row t at
  // position pos[t] in slot slot[t]'s cache (a.key_cache + slot[t] *
  // a.slot_stride); pos and slot are host memory. Per row: Rope of q and
  // key, WriteCache of key and value; then each row's Attention.
  virtual void AttendRows(const AttendArgs& a, const int* pos, const int* slot, int n);
  // Positions per prefill block: how many rows Transformer::Prefill and a
  // SlotDecoder's prefill hand each pass (a GPU wants more rows per GEMM than
  // a CPU's cache holds). Every backend of one kind must say the same.
  [[nodiscard]] virtual int prefill_block() const { return 64; }  // Transformer::kPrefillBlock
  // Rotates `size` values (heads of head_size) for position `pos`: pair i of
  // every head turns by the angle pos * inv_freq[i] (inv_freq holds
  // head_size/2 values, the model's table: RopeInverseFrequencies). Pairs are
  // (2i, 2i+1) when `interleaved`, else (i, i + head_size/2).
  virtual void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) = 0;
  // hb[i] = silu(hb[i]) * hb2[i]: the SwiGLU gate.
  virtual void SwiGLU(float* hb, const float* hb2, int n) = 0;
  // hb[i] = gelu_tanh(hb[i]) * hb2[i]: Gemma's GeGLU gate (GeGLUReference).
  // The default runs on host memory.
  virtual void GeGLU(float* hb, const float* hb2, int n);
  // x[i] *= s for i < count (Gemma's embedding scale). Host memory by default.
  virtual void ScaleInPlace(float* x, float s, size_t count);
  // x[i] = cap * tanh(x[i] / cap) for i < count (Gemma 2's final logits).
  // Host memory by default.
  virtual void SoftCapInPlace(float* x, float cap, size_t count);

  // `floats` zeroed floats of forward state. The default is host memory
  // streamed on huge pages where it spans them (base/huge_pages.h), which
  // every CPU backend uses. std::bad_alloc escapes.
  virtual std::unique_ptr<StateBuffer> AllocateState(size_t floats);
  // ---- The forward's steps between the products. The engine issues every
  // one of them here, so that a backend that keeps the activations and the
  // KV cache where it computes (a GPU) can run them there. These defaults run
  // on host memory, the arithmetic the engine used to run itself; the CPU
  // backends keep them.
  // Row t of x (width dim) = row tokens[t] of the f32 table of `rows` rows
  // (host memory the model owns), for t < n.
  virtual void Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n);
  // Each of n rows of width dim: out = weight * (x / rms(x)) (Rmsnorm); out may be x.
  virtual void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps);
  // x[i] += y[i] for i < count: a residual add.
  virtual void AddInPlace(float* x, const float* y, size_t count);
  // Each of n rows of width `width`: x[t][i] += bias[i]. `bias` is a vector
  // the model owns in host memory, as a norm's weight is (Qwen2's q/k/v biases).
  virtual void AddBiasRows(float* x, const float* bias, int width, int n);
  // `width` floats of `row` into a KV cache at float offset `at`.
  virtual void WriteCache(float* cache, size_t at, const float* row, int width);
  // MoE routing: the k largest of n router logits (ties to the lower index)
  // in order into chosen[0..k), and weight[j] = their softmax over the k.
  // `logits` is state; chosen and weight are host memory (the engine picks
  // the experts' weights with them).
  virtual void RouteTopK(const float* logits, int n, int k, int* chosen, float* weight);
  // y[i] = 0 for i < n.
  virtual void Zero(float* y, int n);
  // y[i] += a * x[i] for i < n: an expert's weighted share.
  virtual void Axpy(float* y, float a, const float* x, int n);
  // x[i] /= d for i < count (tensor parallelism's averaging fault, tp_forward.cc).
  virtual void DivideInPlace(float* x, float d, size_t count);

  // ---- Where the state lives. Every float* the engine hands the calls above
  // for an activation, a KV cache or the logits points into a StateBuffer
  // this backend allocated; weights, norm weights, the embedding table,
  // tokens, RoPE tables and MoE choices are host memory, which a device
  // backend copies up (once, for what the model owns). The engine reads and
  // writes state only through Download and Upload.
  // Whether AllocateState hands out host memory that the engine may also use
  // in place (the CPU backends: logits read without a copy). A device backend
  // says false.
  [[nodiscard]] virtual bool state_on_host() const { return true; }
  // n floats of state into host memory, once every call queued before it has
  // written them; and n floats of host memory into state.
  virtual void Download(float* host, const float* state, size_t n);
  virtual void Upload(float* state, const float* host, size_t n);
  // The index of the largest of n state floats, ties to the lower index (the
  // greedy pick, run.c's argmax): only an int reaches the host, so a device
  // backend samples greedily without downloading the logits.
  virtual int Argmax(const float* state, int n);
  // Argmax of each of `rows` rows of n state floats (row r at state + r * n)
  // into out[r] (host): a batched step's greedy picks, one call.
  virtual void ArgmaxRows(const float* state, int rows, int n, int* out);
  // The queue a device backend runs its calls on in order (a cudaStream_t),
  // so that a collective can reduce its state in that order without waiting
  // on the host (parallel::Collective::AllReduceSumOnDevice); nullptr for a
  // backend whose calls finish before they return (the CPU's).
  [[nodiscard]] virtual void* device_stream() { return nullptr; }

  // How a backend that splits work over threads shared it out, counted since
  // it was made (the fast backend's pool, kernels/cpu/thread_pool.h); nullopt
  // for a backend that runs on one thread. A report of a multi-threaded run
  // uses it to show how much of the run actually ran on one thread.
  struct PoolCounters {
    uint64_t split_jobs = 0;         // jobs shared with other threads
    uint64_t caller_jobs = 0;        // jobs run on the calling thread alone (too small, or in a backoff)
    uint64_t backoff_jobs = 0;       // of those, the ones a backoff sent there
    uint64_t stalls = 0;             // split jobs a late worker made slower than one thread
    uint64_t contended_windows = 0;  // windows in which a pool thread waited for a CPU > 5% of the time
  };
  [[nodiscard]] virtual std::optional<PoolCounters> pool_counters() const { return std::nullopt; }

  // Called by the engine before each layer's calls (-1: the final norm and
  // classifier), so a backend can name the layer in its errors. The CPU
  // backends ignore it.
  virtual void BeginLayer(int layer) { (void)layer; }
  // OK, or the first error the backend met (a device call or kernel launch
  // that failed: the CUDA backend). A backend that failed fills that call's
  // and every later call's output with NaN, so no stale value is ever used;
  // the engine checks this after every forward (Transformer::status()). The
  // CPU backends cannot fail and always return OK.
  [[nodiscard]] virtual Status status() const { return OkStatus(); }
};

// Returns the backend named "reference", "fast" or "cuda"; an error names an
// unknown one, and for "cuda" says why none is available (a build without
// CUDA, no driver, no device: docs/cuda.md). `device`: which of the
// machine's devices a device backend computes on, modulo their count (a
// tensor-parallel rank passes its rank, as the NCCL collective places rank r
// on device r % count); the CPU backends ignore it.
Result<std::unique_ptr<Backend>> MakeBackend(const std::string& name, int device = 0);
// The instruction set the fast backend's kernels run on this CPU ("AVX2", ...).
const char* SimdTargetName();
// True iff the fast backend's bf16 and q8_0 matrix-vector products prefetch
// their weights ahead on this CPU (AMD, or VERITY_STREAM_PREFETCH=nta|t0), and
// with which hint: "nta", "t0" or "off" (kernels/cpu/simd.h).
bool StreamPrefetchOn();
const char* StreamPrefetchHintName();

// Shared scalar kernels (identical in every backend, so their rounding is too).
void RopeReference(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved);
// run.c's unscaled table, in float exactly as run.c computes it:
// inv_freq[i] = 1.0f / powf(theta, (2i) / head_size) for i < head_size/2.
void RopeBaseInverseFrequencies(float theta, int head_size, float* inv_freq);
void SwiGLUReference(float* hb, const float* hb2, int n);
// hb[i] = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) * hb2[i], v = hb[i]:
// PyTorch's gelu(approximate="tanh") in float, times the up projection.
void GeGLUReference(float* hb, const float* hb2, int n);
// cap * tanh(s / cap): a soft cap (Gemma 2's scores and logits), in float.
inline float SoftCap(float s, float cap) { return cap * tanhf(s / cap); }
void Rmsnorm(float* out, const float* x, const float* weight, int size, float eps);
void Softmax(float* x, int size);
// The index of the largest of n values, ties to the lower index: run.c's
// argmax, the greedy pick (Sampler at temperature 0, Backend::Argmax).
int ArgmaxReference(const float* x, int n);

}  // namespace verity::kernels
