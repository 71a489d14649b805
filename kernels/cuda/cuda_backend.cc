// The CUDA backend: the forward runs on the device, on one stream, over
// state the backend owns (issue 26's seam). Nothing crosses PCIe per call
// except the logits (Download) and the small host inputs a call carries
// (a block's token rows, MoE router logits on their way to the host's
// routing); no call waits for the device except Download.
//
// Weights, norm weights, the embedding table and RoPE tables are uploaded
// once, on first use (model_copies.h); the kernels get the device pointers.
//
// State (activations, KV caches, logits) is device memory from AllocateState;
// the engine hands the calls pointers into it and reads it only through
// Download.
//
// Errors: the first failure is recorded (status()); that call's output and
// every later call's are filled with NaN (on the device: all bits set), and
// Download hands NaN to the host, so no stale value is ever used. A launch
// fails at the call; a fault inside a kernel surfaces at the next Download
// (the stream's first synchronization), named as such.
#include "kernels/cuda/cuda_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/env.h"
#include "kernels/cuda/block_rows.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/kernel_profile.h"
#include "kernels/cuda/kquant_layout.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/model_copies.h"
#include "kernels/cuda/q8_int.h"
#include "kernels/cuda/rope_cache.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/step_recorder.h"

namespace verity::kernels::cuda {
namespace {

// A launch plan's identity: which planner, and the shape it was given.
using PlanKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t>;
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = std::hash<int>()(std::get<0>(k)) * 31 + std::hash<int>()(std::get<1>(k));
    h = h * 1000003 + std::hash<int64_t>()(std::get<2>(k));
    h = h * 1000003 + std::hash<int64_t>()(std::get<3>(k));
    h = h * 1000003 + std::hash<int64_t>()(std::get<4>(k));
    return h * 1000003 + std::hash<int64_t>()(std::get<5>(k));
  }
};
// bf16 products of at least this many vectors (a prefill block, never a
// decode step or a batched one) run as a tensor-core GEMM.
constexpr int kGemmMinRows = 16;
// A prefill block's attention runs as GEMMs (GemmAttention) while its scores,
// every head's [T x positions] in f32, fit this; past it, the tiled kernel.
constexpr size_t kGemmAttentionMaxScoreBytes = size_t{1} << 30;

enum PlanKind {
  kPlanMatvec,
  kPlanBatch,
  kPlanRows,
  kPlanRowsMma,
  kPlanRowsNormed,
  kPlanRowsQ8Int,
  kPlanRmsnorm,
  kPlanRope,
  kPlanAttention,
  kPlanSwiGLU,
  kPlanEmbed,
  kPlanAdd,
  kPlanAxpy,
  kPlanDivide,
  kPlanToBF16,
  kPlanKvWrite,
  kPlanArgmax,
  kPlanRopeCache,
  kPlanDecodeAttention,
  kPlanQ8ToBF16,
  kPlanCausalSoftmax,
  kPlanFlashAttention,
  kPlanBlockRows,
  kPlanBlockToBF16,
  kPlanGeGLU,
  kPlanScale,
  kPlanSoftCap,
  kPlanAttentionPointers
};
// What a recorded step's signature names each call by.
enum StepOp {
  kOpMatmul = 1,
  kOpRows,
  kOpAttention,
  kOpRopeAt,
  kOpCopyRowAt,
  kOpSwiGLU,
  kOpEmbedAt,
  kOpRmsnorm,
  kOpZero,
  kOpElementwise,
  kOpFusedRows,
  kOpNormedRows,
  kOpRopeCache,
  kOpBiasRows,
  kOpGeGLU
};
int64_t Id(const void* p) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)); }
// A float argument in a signature, by its bits.
int64_t Bits(float f) {
  int32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// What one call writes (a fused call: up to four buffers), filled with NaN
// when it or an earlier call failed.
struct Outputs {
  Outputs(float* out, size_t floats) { Add(out, floats); }
  Outputs() = default;
  void Add(float* out, size_t floats) {
    p[count] = out;
    n[count] = floats;
    count++;
  }
  float* p[kMaxRowsTargets + 1] = {};  // a rows launch's targets, and a normed launch's normed row
  size_t n[kMaxRowsTargets + 1] = {};
  int count = 0;
};

// What a failed backend hands out for state: host address space reserved,
// not committed (MAP_NORESERVE), so a device allocation refused for its size
// is not then made, and zeroed, in host memory. Only the NaN a failed call
// writes into its outputs touches it.
class UnbackedState final : public StateBuffer {
 public:
  explicit UnbackedState(size_t floats) : bytes_(std::max<size_t>(floats, 1) * sizeof(float)), floats_(floats) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    p_ = p == MAP_FAILED ? nullptr : static_cast<float*>(p);
  }
  ~UnbackedState() override {
    if (p_) munmap(p_, bytes_);
  }
  UnbackedState(const UnbackedState&) = delete;
  UnbackedState& operator=(const UnbackedState&) = delete;
  float* data() override { return p_; }
  size_t floats() const override { return floats_; }

 private:
  size_t bytes_;
  float* p_ = nullptr;
  size_t floats_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const DeviceLimits& limits, cublasHandle_t handle, cublasHandle_t tensor_cores,
              cudaStream_t stream, int prefill_block)
      : prefill_block_(prefill_block),
        device_(device),
        limits_(limits),
        cublas_(handle),
        cublas_tc_(tensor_cores),
        stream_(stream),
        copies_(stream, [this] { DropGraphs(); }),
        profile_(env::CudaProfile() ? std::make_unique<KernelProfile>(stream) : nullptr) {}
  ~CudaBackend() override {
    Use();
    if (profile_) std::fputs(profile_->Table().c_str(), stderr);
    profile_.reset();
    // Proof that the recorded steps ran, and how many did not.
    if (const std::string steps = steps_.Summary(); !steps.empty())
      std::fprintf(stderr, "verity: cuda: %s\n", steps.c_str());
    // Which opt-in paths ran (VERITY_CUDA_FLASH_PREFILL, VERITY_CUDA_NORM_FUSED).
    if (flash_blocks_ + gemm_blocks_ + tiled_blocks_ > 0)
      std::fprintf(stderr, "verity: cuda: prompt blocks' attention: %ld as flash tiles, %ld as GEMMs, %ld tiled\n",
                   flash_blocks_, gemm_blocks_, tiled_blocks_);
    if (normed_calls_ > 0)
      std::fprintf(stderr, "verity: cuda: %ld norms run in their products' launches (recorded steps' included)\n",
                   normed_calls_);
    if (q8_int_launches_ > 0)
      std::fprintf(stderr,
                   "verity: cuda: %ld q8_0 product launches on int16 x (a recorded step's once, when recorded)\n",
                   q8_int_launches_);
    // How the weights reached the device (staged through pinned buffers, or
    // pageable and why), and what the host paid for it.
    if (const std::string up = copies_.Summary(); !up.empty()) std::fprintf(stderr, "verity: cuda: %s\n", up.c_str());
    steps_.DropGraphs();
    VERITY_CUBLAS_CALL_LOG(cublasDestroy(cublas_), "destroying the cuBLAS handle");
    VERITY_CUBLAS_CALL_LOG(cublasDestroy(cublas_tc_), "destroying the tensor-core cuBLAS handle");
    VERITY_CUDA_CALL_LOG(cudaStreamSynchronize(stream_), "finishing the backend's stream");
    VERITY_CUDA_CALL_LOG(cudaStreamDestroy(stream_), "destroying the backend's stream");
  }

  // Plain f32 arithmetic in cuBLAS: no TF32 tensor-core rounding, whatever
  // NVIDIA_TF32_OVERRIDE says; cuBLAS runs on the backend's stream.
  Status Init() {
    VERITY_CUBLAS_CALL(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH), "--backend cuda: cuBLAS math mode");
    VERITY_CUBLAS_CALL(cublasSetStream(cublas_, stream_), "--backend cuda: cuBLAS stream");
    // The bf16 prefill GEMM's handle may use tensor cores (bf16 products are
    // exact in f32; the accumulation is f32).
    VERITY_CUBLAS_CALL(cublasSetMathMode(cublas_tc_, CUBLAS_DEFAULT_MATH), "--backend cuda: cuBLAS math mode");
    VERITY_CUBLAS_CALL(cublasSetStream(cublas_tc_, stream_), "--backend cuda: cuBLAS stream");
    return OkStatus();
  }

  const char* name() const override { return "cuda"; }
  // llama.cpp's Q4_K and Q6_K (the Q4_K_M pair; block_rows.h); another block type is refused at load.
  bool runs_block_type(uint32_t ggml_type) const override { return kq::Supported(ggml_type); }
  // Every device attention (eager, block, recorded and batched rows) finds
  // its first position from the window on the device (AttentionDeviceArgs),
  // and takes Gemma's score scale and soft-cap; GeGLU, ScaleInPlace and
  // SoftCapInPlace run on the device below.
  bool attends_windows() const override { return true; }
  bool runs_gemma() const override { return true; }
  void BeginLayer(int layer) override { layer_ = layer; }
  Status status() const override { return error_; }
  bool state_on_host() const override { return false; }

  // The KV caches and activations live on the device, zeroed. A failed
  // allocation is this backend's error (status()) and hands out host address
  // space that nothing computes on (UnbackedState), so the forward still ends
  // in a named error.
  std::unique_ptr<StateBuffer> AllocateState(size_t floats) override {
    Use();
    if (!error_.ok()) return std::make_unique<UnbackedState>(floats);  // a failed backend computes on nothing
    const std::string ctx = "state of " + std::to_string(floats) + " floats";
    const size_t bytes = std::max<size_t>(floats, 1) * sizeof(float);
    DeviceBuffer buf;
    Status s = buf.Reserve(bytes, ctx);
    if (s.ok()) s = ZeroBytes(buf.as<void>(), bytes, ctx);
    if (s.ok()) return std::make_unique<DeviceState>(std::move(buf), floats);
    Fail(std::move(s), [] { return std::string("allocating"); });
    return std::make_unique<UnbackedState>(floats);
  }

  // The one wait on the device: every call queued before it has run.
  void Download(float* host, const float* state, size_t n) override {
    Use();
    FlushStep();
    if (error_.ok()) {
      if (profile_) profile_->Begin();
      Status s = DownloadImpl(host, state, n);
      if (profile_) profile_->End("download", static_cast<double>(n) * sizeof(float));
      if (!s.ok()) Fail(std::move(s), [&] { return Ctx("download of " + std::to_string(n) + " floats"); });
    }
    if (!error_.ok()) std::fill(host, host + n, std::numeric_limits<float>::quiet_NaN());
  }
  // The greedy pick on the device: one int comes down (and the wait with it).
  int Argmax(const float* state, int n) override {
    int best = 0;
    ArgmaxRows(state, 1, n, &best);
    return best;
  }
  // The greedy picks on the device: one block a row, `rows` ints come down
  // (and the wait with them).
  void ArgmaxRows(const float* state, int rows, int n, int* out) override {
    Use();
    FlushStep();
    std::fill(out, out + rows, 0);
    if (!error_.ok()) return;
    if (profile_) profile_->Begin();
    Status s = [&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                              Plan({kPlanArgmax, 0, n, rows, 0, 0}, [&] { return PlanArgmaxRows(rows, n, limits_); }));
      VERITY_RETURN_IF_ERROR(pick_.Reserve(static_cast<size_t>(rows) * sizeof(int), "greedy picks"));
      VERITY_RETURN_IF_ERROR(LaunchArgmax(*plan, state, n, pick_.as<int>(), stream_, "argmax"));
      VERITY_CUDA_CALL(cudaMemcpyAsync(out, pick_.as<void>(), static_cast<size_t>(rows) * sizeof(int),
                                       cudaMemcpyDeviceToHost, stream_),
                       "greedy picks");
      VERITY_CUDA_CALL(cudaStreamSynchronize(stream_), "waiting for the queued calls (a kernel faulted)");
      return OkStatus();
    }();
    if (profile_) profile_->End("greedy picks of " + std::to_string(rows) + " rows", 4.0 * rows * n);
    if (!s.ok())
      Fail(std::move(s), [&] {
        return Ctx("greedy picks of " + std::to_string(rows) + " rows of " + std::to_string(n) + " logits");
      });
  }
  void Upload(float* state, const float* host, size_t n) override {
    FlushStep();
    Guarded(
        state, n, [&] { return UploadImpl(state, host, n); },
        [&] { return Ctx("upload of " + std::to_string(n) + " floats"); });
  }

  void Matmul(float* out, const float* x, const Weights& w) override {
    if (w.dtype == DType::kF32) steps_.Uncapturable();  // cuBLAS: not recorded
    Issue(
        {kOpMatmul, Id(out), Id(x), Id(w.data), static_cast<int64_t>(w.dtype), w.rows, w.cols}, out,
        static_cast<size_t>(w.rows), [=, this] { return MatmulImpl(out, x, w, 1, false); },
        [=, this] { return MatmulCtx(w, 1); }, ProductBytes(w, 1));
  }
  void MatmulBatch(float* out, const float* x, const Weights& w, int T) override {
    if (w.dtype == DType::kF32) steps_.Uncapturable();
    Issue(
        {kOpMatmul, Id(out), Id(x), Id(w.data), static_cast<int64_t>(w.dtype), w.rows, w.cols, T}, out,
        static_cast<size_t>(w.rows) * T, [=, this] { return MatmulImpl(out, x, w, T, false); },
        [=, this] { return MatmulCtx(w, T); }, ProductBytes(w, T));
  }
  // Independent vectors (batched decode): the 16-byte kernel reads the weights
  // once per 8 vectors and gives each row the bits of its own Matmul. f32 goes
  // through cuBLAS's gemv one vector at a time (its gemm rounds otherwise).
  void MatmulRows(float* out, const float* x, const Weights& w, int n) override {
    if (w.dtype == DType::kF32) return Backend::MatmulRows(out, x, w, n);
    Issue(
        {kOpRows, Id(out), Id(x), Id(w.data), static_cast<int64_t>(w.dtype), w.rows, w.cols, n}, out,
        static_cast<size_t>(w.rows) * n, [=, this] { return MatmulImpl(out, x, w, n, true); },
        [=, this] { return MatmulCtx(w, n) + " rows"; }, ProductBytes(w, n));
  }
  // ---- Fused steps (Backend's): one launch of the 16-byte kernel for the
  // q/k/v projections, the gate/up pair with its SwiGLU, a projection with its
  // residual add; the bits of the separate calls (rows.h). f32 (cuBLAS) and
  // prefill blocks (GEMMs) take the separate calls.
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    if (T != 1 || !Fusable(targets, count)) return Backend::MatmulShared(x, T, targets, count);
    Fused(x, 1, std::vector<MatmulTarget>(targets, targets + count), RowsEpilogue::kStore, nullptr, false);
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    if (!Fusable(targets, count)) return Backend::MatmulSharedRows(x, n, targets, count);
    Fused(x, n, std::vector<MatmulTarget>(targets, targets + count), RowsEpilogue::kStore, nullptr, true);
  }
  void MatmulSwiGLU(const float* x, int n, bool independent, const MatmulTarget& gate,
                    const MatmulTarget& up) override {
    const MatmulTarget both[] = {gate, up};
    if ((n != 1 && !independent) || !Fusable(both, 2) || gate.w->rows != up.w->rows)
      return Backend::MatmulSwiGLU(x, n, independent, gate, up);
    Fused(x, n, {gate, up}, RowsEpilogue::kSwiGLU, nullptr, independent);
  }
  // A decode step's norm in its products' launch (VERITY_CUDA_NORM_FUSED=1;
  // docs/cuda.md, "The norm in the products' launch"): the same bits as the
  // separate calls, one launch fewer.
  void NormMatmulShared(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget* targets,
                        int count) override {
    if (!NormFusable(norm, n, independent, targets, count))
      return Backend::NormMatmulShared(norm, n, independent, targets, count);
    FusedNormed(norm, std::vector<MatmulTarget>(targets, targets + count), RowsEpilogue::kStore, independent);
  }
  void NormMatmulSwiGLU(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget& gate,
                        const MatmulTarget& up) override {
    const MatmulTarget both[] = {gate, up};
    if (!NormFusable(norm, n, independent, both, 2) || gate.w->rows != up.w->rows)
      return Backend::NormMatmulSwiGLU(norm, n, independent, gate, up);
    FusedNormed(norm, {gate, up}, RowsEpilogue::kSwiGLU, independent);
  }
  void MatmulAddInPlace(float* x, float* scratch, const float* h, const Weights& w, int n, bool independent) override {
    const MatmulTarget t{x, &w};
    if ((n != 1 && !independent) || !Fusable(&t, 1)) return Backend::MatmulAddInPlace(x, scratch, h, w, n, independent);
    Fused(h, n, {t}, RowsEpilogue::kAdd, scratch, independent);
  }
  // A decoded position (recorded): rotate and cache in one launch reading the
  // position on the device, then attention. A prompt block: the block calls.
  void AttendBlock(const AttendArgs& a, int pos0, int n) override {
    if (n != 1 || !Recording()) return Backend::AttendBlock(a, pos0, n);
    RopeCache(a, 1, StepPos(), nullptr, pos0);
    Attention(a.RowAttention(0, pos0, 0));
  }
  // A batched step's rows: their positions and slots go up once (unchanged
  // across the step's layers), one rotate-and-cache launch, one attention
  // launch for every row (each row's the bits of its own decode step).
  void AttendRows(const AttendArgs& a, const int* pos, const int* slot, int n) override {
    if (n < 1) return;
    if (profile_ && layer_ == 0) profile_->CountStep();  // a batched pass: its per-step column divides by these too
    FlushStep();                                         // runs at once: nothing kept may run after it
    const int* dpos = RowIndices(pos, slot, n);
    if (!dpos) return PoisonOnDevice(a.out, static_cast<size_t>(n) * a.q_width());
    const int max_pos = *std::max_element(pos, pos + n);
    RopeCache(a, n, dpos, dpos + n, max_pos);
    if (a.head_size > kDecodeMaxHeadSize) {
      for (int t = 0; t < n; t++) Attention(a.RowAttention(t, pos[t], slot[t] * a.slot_stride));
      return;
    }
    double bytes = 0;
    for (int t = 0; t < n; t++) {
      const AttentionArgs row = a.RowAttention(t, pos[t], 0);
      bytes += AttentionBytes(row.pos + 1 - row.first(), a.n_heads, a.n_kv_heads, a.head_size);
    }
    Guarded(
        a.out, static_cast<size_t>(n) * a.q_width(), [&] { return DecodeAttentionRows(a, n, dpos, max_pos); },
        [&] { return Ctx("attention of " + std::to_string(n) + " rows heads=" + std::to_string(a.n_heads)); }, bytes);
  }
  // Decode attention's launch depends on the model's seq_len, never the
  // position (AttentionImpl), so a recorded step (whose position is read on
  // the device) and an eager one reduce alike: the same bits.
  void Attention(const AttentionArgs& a) override {
    const int* pos_at = Recording() ? StepPos() : nullptr;
    Issue(
        {kOpAttention, Id(a.out), Id(a.q), Id(a.key_cache), Id(a.value_cache), a.pos_stride, a.n_heads, a.n_kv_heads,
         a.head_size, a.seq_len, a.window, Bits(a.scale_dim), Bits(a.softcap)},
        a.out, static_cast<size_t>(a.n_heads) * a.head_size, [=, this] { return AttentionImpl(a, 1, pos_at); },
        [=, this] {
          return Ctx("attention pos=" + std::to_string(a.pos) + " heads=" + std::to_string(a.n_heads) +
                     " head_size=" + std::to_string(a.head_size));
        },
        AttentionBytes(a.pos + 1 - a.first(), a.n_heads, a.n_kv_heads, a.head_size));
  }
  // A prompt block: one launch for all its rows (the table's rows pos0.. are
  // consecutive), one strided copy into the cache, one attention launch.
  void RopeBlock(float* vec, int n, int width, int head_size, int pos0, const float* inv_freq,
                 bool interleaved) override {
    if (n == 1 && Recording()) return RopeAt(vec, width, head_size, inv_freq, interleaved);
    FlushStep();  // runs at once: nothing kept may run after it
    Guarded(
        vec, static_cast<size_t>(n) * width,
        [&] { return RopeImpl(vec, n, width, head_size, pos0, inv_freq, interleaved); },
        [&] { return Ctx("rope block pos0=" + std::to_string(pos0) + " rows=" + std::to_string(n)); });
  }
  void WriteCacheBlock(float* cache, size_t at0, long pos_stride, const float* rows, int width, int n) override {
    if (n == 1 && Recording()) {
      // The row's place is read on the device: base + pos * pos_stride.
      float* base = cache + at0 - static_cast<int64_t>(steps_.pos()) * pos_stride;
      const int* pos = StepPos();
      return Issue(
          {kOpCopyRowAt, Id(base), pos_stride, Id(rows), width}, base, 0,
          [=, this]() -> Status {
            VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanKvWrite, 0, width, 0, 0, 0}, [&] {
                                      return PlanElementwise("kv_write", width, limits_);
                                    }));
            return LaunchCopyRowAt(*plan, base, pos_stride, pos, rows, width, stream_, "kv_write");
          },
          [=, this] { return Ctx("KV cache write of " + std::to_string(width) + " floats"); });
    }
    FlushStep();  // runs at once: nothing kept may run after it
    Guarded(
        cache + at0, static_cast<size_t>(width),
        [&]() -> Status {
          VERITY_CUDA_CALL(
              cudaMemcpy2DAsync(cache + at0, static_cast<size_t>(pos_stride) * sizeof(float), rows,
                                static_cast<size_t>(width) * sizeof(float), static_cast<size_t>(width) * sizeof(float),
                                static_cast<size_t>(n), cudaMemcpyDeviceToDevice, stream_),
              "kv cache block write");
          return OkStatus();
        },
        [&] { return Ctx("KV cache write of " + std::to_string(n) + " rows"); });
  }
  void AttentionBlock(const AttentionArgs& a, int n) override {
    if (n == 1) return Attention(a);  // a decoded position: the decode launch, so a step's row has its bits
    FlushStep();                      // runs at once: nothing kept may run after it
    Guarded(
        a.out, static_cast<size_t>(n) * a.n_heads * a.head_size, [&] { return AttentionImpl(a, n, nullptr); },
        [&] {
          return Ctx("attention block pos0=" + std::to_string(a.pos) + " rows=" + std::to_string(n) +
                     " heads=" + std::to_string(a.n_heads));
        });
  }
  // A GEMM on tensor cores wants rows: 512 positions per prefill pass, or
  // VERITY_CUDA_PREFILL_BLOCK's.
  int prefill_block() const override { return prefill_block_; }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    FlushStep();  // runs at once: nothing kept may run after it
    Guarded(
        vec, static_cast<size_t>(size), [&] { return RopeImpl(vec, 1, size, head_size, pos, inv_freq, interleaved); },
        [&] { return Ctx("rope pos=" + std::to_string(pos) + " size=" + std::to_string(size)); });
  }
  void GeGLU(float* hb, const float* hb2, int n) override {
    Issue(
        {kOpGeGLU, Id(hb), Id(hb2), n}, hb, static_cast<size_t>(n),
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanGeGLU, 0, n, 0, 0, 0},
                                                               [&] { return PlanElementwise("geglu", n, limits_); }));
          return LaunchGeGLU(*plan, hb, hb2, n, stream_, "geglu");
        },
        [=, this] { return Ctx("geglu n=" + std::to_string(n)); });
  }
  void ScaleInPlace(float* x, float s, size_t count) override {
    Elementwise(kPlanScale, "scale", ElementwiseOp::kScale, x, nullptr, s, count);
  }
  void SoftCapInPlace(float* x, float cap, size_t count) override {
    Elementwise(kPlanSoftCap, "softcap", ElementwiseOp::kSoftCap, x, nullptr, cap, count);
  }
  void SwiGLU(float* hb, const float* hb2, int n) override {
    Issue(
        {kOpSwiGLU, Id(hb), Id(hb2), n}, hb, static_cast<size_t>(n),
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                                  Plan({kPlanSwiGLU, 0, n, 0, 0, 0}, [&] { return PlanSwiGLU(n, limits_); }));
          return LaunchSwiGLU(*plan, hb, hb2, n, stream_, "swiglu");
        },
        [=, this] { return Ctx("swiglu n=" + std::to_string(n)); });
  }

  // ---- the steps between the products
  void Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n) override {
    if (n == 1 && Recording()) {
      // The token was uploaded with the position (BeginDecodeStep).
      const int* token = StepToken();
      return Issue(
          {kOpEmbedAt, Id(x), Id(table), rows, dim}, x, static_cast<size_t>(dim),
          [=, this]() -> Status {
            VERITY_ASSIGN_OR_RETURN(const float* dtable,
                                    copies_.Floats(table, static_cast<size_t>(rows) * dim, "embedding table"));
            VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                                    Plan({kPlanEmbed, 0, dim, 1, 0, 0}, [&] { return PlanEmbed(dim, 1, limits_); }));
            return LaunchEmbed(*plan, x, dtable, token, dim, 1, stream_, "embed");
          },
          [=, this] { return Ctx("embedding of 1 row"); });
    }
    FlushStep();  // runs at once: nothing kept may run after it
    Guarded(
        x, static_cast<size_t>(n) * dim, [&] { return EmbedImpl(x, table, rows, dim, tokens, n); },
        [&] { return Ctx("embedding of " + std::to_string(n) + " rows"); });
  }
  void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) override {
    Issue(
        {kOpRmsnorm, Id(out), Id(x), Id(weight), dim, n, Bits(eps)}, out, static_cast<size_t>(n) * dim,
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const float* dw, copies_.Floats(weight, dim, "rmsnorm weight"));
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                                  Plan({kPlanRmsnorm, 0, n, dim, 0, 0}, [&] { return PlanRmsnorm(n, dim, limits_); }));
          return LaunchRmsnorm(*plan, out, x, dw, n, dim, eps, stream_, "rmsnorm");
        },
        [=, this] { return Ctx("rmsnorm rows=" + std::to_string(n) + " dim=" + std::to_string(dim)); });
  }
  void AddInPlace(float* x, const float* y, size_t count) override {
    Elementwise(kPlanAdd, "add", ElementwiseOp::kAdd, x, y, 0.0f, count);
  }
  // One add a row, the bias read from the model's device copy (recorded
  // steps replay them like any elementwise launch).
  void AddBiasRows(float* x, const float* bias, int width, int n) override {
    for (int t = 0; t < n; t++) {
      float* row = x + static_cast<size_t>(t) * width;
      Issue(
          {kOpBiasRows, Id(row), Id(bias), width}, row, static_cast<size_t>(width),
          [=, this]() -> Status {
            VERITY_ASSIGN_OR_RETURN(const float* db, copies_.Floats(bias, width, "bias"));
            VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanAdd, 0, width, 0, 0, 0}, [&] {
                                      return PlanElementwise("add", width, limits_);
                                    }));
            return LaunchElementwise(*plan, ElementwiseOp::kAdd, row, db, 0.0f, width, stream_, "bias");
          },
          [=, this] { return Ctx("bias rows=" + std::to_string(n) + " width=" + std::to_string(width)); });
    }
  }
  void Axpy(float* y, float a, const float* x, int n) override {
    Elementwise(kPlanAxpy, "axpy", ElementwiseOp::kAxpy, y, x, a, static_cast<size_t>(n));
  }
  void DivideInPlace(float* x, float d, size_t count) override {
    Elementwise(kPlanDivide, "divide", ElementwiseOp::kDivide, x, nullptr, d, count);
  }
  void Zero(float* y, int n) override {
    Issue(
        {kOpZero, Id(y), n}, y, static_cast<size_t>(n),
        [=, this] { return ZeroBytes(y, static_cast<size_t>(n) * sizeof(float), "zero"); },
        [=, this] { return Ctx("zero n=" + std::to_string(n)); });
  }
  // A device-to-device copy of the row into the cache, in stream order.
  void WriteCache(float* cache, size_t at, const float* row, int width) override {
    FlushStep();  // runs at once: nothing kept may run after it
    Guarded(
        cache + at, static_cast<size_t>(width),
        [&]() -> Status {
          VERITY_CUDA_CALL(cudaMemcpyAsync(cache + at, row, static_cast<size_t>(width) * sizeof(float),
                                           cudaMemcpyDeviceToDevice, stream_),
                           "kv cache write");
          return OkStatus();
        },
        [&] { return Ctx("KV cache write of " + std::to_string(width) + " floats"); });
  }
  // The experts' weights live on the host side of the seam (the engine picks
  // matrices with them), so the router's n logits come down and are routed
  // there: one wait per MoE layer and position.
  void RouteTopK(const float* logits, int n, int k, int* chosen, float* weight) override {
    router_.resize(n);
    Download(router_.data(), logits, static_cast<size_t>(n));
    Backend::RouteTopK(router_.data(), n, k, chosen, weight);
  }

  // ---- Recorded decode steps (Backend::BeginDecodeStep): the calls are kept
  // with their arguments; at EndDecodeStep the first step of a given call
  // sequence runs as issued (its uploads and plans happen then), the second
  // is captured into a CUDA graph, and every later one launches that graph:
  // one launch a token instead of hundreds. The position and token live in a
  // device buffer uploaded at BeginDecodeStep, which the position-dependent
  // launches (embedding, RoPE, KV write, attention) read. A step with a cuBLAS
  // call (f32 weights) is not captured; one that hands a result to the host
  // (MoE routing, a collective's download or stream) runs what was kept and
  // the rest as issued.
  void BeginDecodeStep(int token, int pos) override {
    Use();
    FlushStep();
    if (!error_.ok()) return;
    const int host[2] = {token, pos};
    Status s = [&]() -> Status {
      VERITY_RETURN_IF_ERROR(step_.Reserve(sizeof host, "decode step position"));
      VERITY_CUDA_CALL(cudaMemcpyAsync(step_.as<void>(), host, sizeof host, cudaMemcpyHostToDevice, stream_),
                       "decode step position");
      return OkStatus();
    }();
    if (!s.ok()) return Fail(std::move(s), [&] { return Ctx("decode step at position " + std::to_string(pos)); });
    if (profile_) profile_->CountStep();
    steps_.Begin(pos);
  }
  void EndDecodeStep() override {
    if (!steps_.recording()) return;
    Use();
    const StepRecorder::Tape tape = steps_.Stop();
    cudaGraphExec_t graph = nullptr;
    // A profiled step runs as issued: each call timed on its own.
    switch (steps_.Decide(error_.ok() && !profile_, &graph)) {
      case StepRecorder::Ending::kRunAsIssued: return Issued(tape);
      case StepRecorder::Ending::kLaunchGraph: return LaunchGraph(graph);
      case StepRecorder::Ending::kCapture: break;
    }
    Status s = steps_.Capture(
        stream_, [&] { return RunUnderCapture(tape); }, &graph);
    if (!s.ok()) {
      std::fprintf(stderr,
                   "verity: note: cuda: a decode step could not be recorded as a graph (%s); it runs as issued\n",
                   s.message().c_str());
      return Issued(tape);
    }
    LaunchGraph(graph);
  }
  void* device_stream() override {
    Use();
    FlushStep();
    return stream_;
  }

  // Makes this backend's device the calling thread's (CUDA's current device
  // is per thread; tensor-parallel ranks on several devices are made on one
  // thread and serve on their own). Every call that reaches CUDA passes here
  // first. Already there (always, with one device), nothing is set: inside a
  // graph capture only cudaGetDevice runs, which capture allows.
  void Use() {
    Status s = [&]() -> Status {
      int current = -1;
      VERITY_CUDA_CALL(cudaGetDevice(&current), "the current device");
      if (current != device_) VERITY_CUDA_CALL(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
      return OkStatus();
    }();
    if (!s.ok()) Fail(std::move(s), [] { return std::string("--backend cuda"); });
  }
  // Runs `f` unless an earlier call failed; on a failure records it, named by
  // `where()` (built only then: the context costs nothing per call), and
  // fills the call's output on the device with NaN.
  // `bytes`: what the call moves at least, for the profile's GB/s (0: not counted).
  template <class F, class W>
  void Guarded(float* out, size_t n, F f, W where, double bytes = 0) {
    Guarded(Outputs(out, n), f, where, bytes);
  }
  template <class F, class W>
  void Guarded(const Outputs& outs, F f, W where, double bytes = 0) {
    Use();
    if (error_.ok()) {
      const uint64_t uploads = copies_.uploads();
      if (profile_) profile_->Begin();
      Status s = f();
      if (profile_) profile_->End(where(), bytes, copies_.uploads() != uploads);
      if (!s.ok()) Fail(std::move(s), where);
    }
    if (!error_.ok())
      for (int i = 0; i < outs.count; i++) PoisonOnDevice(outs.p[i], outs.n[i]);
  }
  template <class W>
  void Fail(Status s, W where) {
    if (error_.ok()) error_ = Status::Error(where() + ": " + s.message());
  }
  // ---- recorded steps
  bool Recording() const { return steps_.recording(); }
  const int* StepToken() const { return step_.as<const int>(); }
  const int* StepPos() const { return step_.as<const int>() + 1; }

  // Runs a call now, or keeps it (and its signature) while a step is recorded.
  // The kept call runs with the layer it was issued in, for its errors.
  template <class F, class W>
  void Issue(std::initializer_list<int64_t> sig, float* out, size_t n, F f, W where, double bytes = 0) {
    Issue(sig.begin(), sig.size(), Outputs(out, n), f, where, bytes);
  }
  template <class F, class W>
  void Issue(const int64_t* sig, size_t sig_size, const Outputs& outs, F f, W where, double bytes = 0) {
    if (!Recording()) return Guarded(outs, f, where, bytes);
    steps_.Keep(sig, sig_size, [this, outs, f, where, bytes, layer = layer_] {
      const int issued_in = layer_;
      layer_ = layer;
      Guarded(outs, f, where, bytes);
      layer_ = issued_in;
    });
  }
  // The bytes a product must move: its weights, its input vectors and outputs.
  static double ProductBytes(const Weights& w, int vectors) {
    return static_cast<double>(w.row_bytes()) * w.rows + 4.0 * vectors * (static_cast<double>(w.rows) + w.cols);
  }
  // A decoded row's attention: every cached key and value up to its position, q and the output.
  static double AttentionBytes(int positions, int heads, int kv_heads, int head_size) {
    return 8.0 * positions * kv_heads * head_size + 8.0 * heads * head_size;
  }
  // RoPE of a recorded step's row: the table's row at the position read on the device.
  void RopeAt(float* vec, int size, int head_size, const float* inv_freq, bool interleaved) {
    Use();
    Result<const float*> grown = copies_.RopeTable(inv_freq, head_size, steps_.pos() + 1);
    if (!grown.ok()) return Fail(grown.status(), [&] { return Ctx("rope table"); });
    const float* table = *grown;
    const int* pos = StepPos();
    Issue(
        {kOpRopeAt, Id(vec), Id(table), size, head_size, interleaved}, vec, static_cast<size_t>(size),
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanRope, 0, 1, size, head_size, 0},
                                                               [&] { return PlanRope(1, size, head_size, limits_); }));
          return LaunchRopeAt(*plan, vec, table, pos, size, head_size, interleaved, stream_, "rope");
        },
        [=, this] { return Ctx("rope size=" + std::to_string(size)); });
  }
  // Whether one RowsKernel launch can take these targets: 1 to 3 matrices of
  // one non-f32 dtype and width (alignment is checked at the launch).
  static bool Fusable(const MatmulTarget* t, int count) {
    if (count < 1 || count > kMaxRowsTargets || t[0].w->dtype == DType::kF32 || t[0].w->dtype == DType::kBlock)
      return false;  // f32: cuBLAS; llama.cpp's blocks: their own kernel (block_rows.h)
    for (int i = 1; i < count; i++)
      if (t[i].w->dtype != t[0].w->dtype || t[i].w->cols != t[0].w->cols) return false;
    return true;
  }
  // `rows`: a batched step's independent rows (MmaRows may take them).
  void Fused(const float* x, int n, std::vector<MatmulTarget> t, RowsEpilogue epi, float* scratch, bool rows) {
    std::vector<int64_t> sig = {kOpFusedRows, static_cast<int64_t>(epi),           Id(x),        n,
                                Id(scratch),  static_cast<int64_t>(t[0].w->dtype), t[0].w->cols, rows};
    for (const MatmulTarget& m : t) sig.insert(sig.end(), {Id(m.out), Id(m.w->data), m.w->rows});
    const Weights& w0 = *t[0].w;
    Outputs outs;
    for (const MatmulTarget& m : t) outs.Add(m.out, static_cast<size_t>(n) * m.w->rows);
    double bytes = 0;
    for (const MatmulTarget& m : t) bytes += ProductBytes(*m.w, n);
    Issue(
        sig.data(), sig.size(), outs, [=, this] { return FusedImpl(x, n, t, epi, scratch, rows); },
        [=, this] { return MatmulCtx(w0, n) + FusedName(epi) + " x" + std::to_string(t.size()); }, bytes);
  }
  static const char* FusedName(RowsEpilogue epi) {
    return epi == RowsEpilogue::kSwiGLU ? " fused swiglu" : epi == RowsEpilogue::kAdd ? " fused add" : " fused";
  }
  // The targets of one rows launch (SwiGLU: the gate's rows, the up matrix
  // read beside them) with their device copies; *vectorized: whether every
  // copy and x take the 16-byte kernel (VectorizedRows).
  Status StackTargets(const std::vector<MatmulTarget>& t, RowsEpilogue epi, const float* x, RowsTargets* tg,
                      bool* vectorized) {
    const Weights& w0 = *t[0].w;
    tg->count = epi == RowsEpilogue::kSwiGLU ? 1 : static_cast<int>(t.size());
    *vectorized = true;
    for (size_t i = 0; i < t.size(); i++) {
      VERITY_ASSIGN_OR_RETURN(tg->w[i], copies_.Weights(*t[i].w));
      *vectorized = *vectorized && VectorizedRows(w0.dtype, tg->w[i], x, w0.cols);
      tg->out[i] = t[i].out;
    }
    for (int i = 0; i < tg->count; i++) tg->begin[i + 1] = tg->begin[i] + t[i].w->rows;
    return OkStatus();
  }
  Status FusedImpl(const float* x, int n, const std::vector<MatmulTarget>& t, RowsEpilogue epi, float* scratch,
                   bool rows) {
    const Weights& w0 = *t[0].w;
    RowsTargets tg;
    bool vectorized = true;
    VERITY_RETURN_IF_ERROR(StackTargets(t, epi, x, &tg, &vectorized));
    if (!vectorized) return FusedSeparately(x, n, t, epi, scratch, rows);
    const int stacked = tg.begin[tg.count];
    if (rows && MmaRows(w0)) {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                              MmaPlan(w0.dtype, stacked, w0.cols, n, epi == RowsEpilogue::kSwiGLU));
      return LaunchRowsMma(*plan, w0.dtype, epi, tg, x, w0.cols, n, stream_, "rows_mma");
    }
    const int mats = epi == RowsEpilogue::kSwiGLU ? 2 : 1;
    if (!rows && n == 1 && Q8Int(w0, 0)) {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Q8IntPlan(stacked, w0.cols, 0, mats));
      q8_int_launches_++;
      return LaunchRowsFused(*plan, w0.dtype, epi, tg, x, w0.cols, 1, stream_, "rows_int16x");
    }
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, RowsPlan(w0.dtype, stacked, w0.cols, n, mats));
    return LaunchRowsFused(*plan, w0.dtype, epi, tg, x, w0.cols, n, stream_, "rows");
  }
  // Whether a decode step's product of w multiplies int16 x (VERITY_CUDA_Q8_INT16=1;
  // q8_0, and x's quants fit a block's shared memory, after the normed row
  // of a normed launch: norm_threads > 0).
  bool Q8Int(const Weights& w, int norm_threads) const {
    if (!q8_int16_ || w.dtype != DType::kQ8_0 || w.cols % q8i::kBlock != 0) return false;
    const int bytes = (norm_threads > 0 ? q8i::AfterNorm(w.cols, norm_threads) : 0) + q8i::SharedBytes(w.cols);
    return static_cast<size_t>(bytes) <= limits_.max_shared_per_block;
  }
  Result<const LaunchPlan*> Q8IntPlan(int rows, int cols, int norm_threads, int mats) {
    return Plan({kPlanRowsQ8Int, 0, rows, cols, norm_threads, mats}, [&] {
      return Dependent(PlanRowsQ8Int(rows, cols, norm_threads, limits_),
                       RowsLaunchPrefetch(DType::kQ8_0, rows, cols, mats, limits_.l2_bytes, env::CudaL2Prefetch()));
    });
  }
  // Whether a norm and its products can be one rows launch: switched on, one
  // vector (not a batched step's tensor-core rows), the rows kernel's
  // dtypes and widths (16-byte chunks; q8_0 whole blocks), a normed row
  // that is the products' input and not the norm's own input, and that
  // fits in a block's shared memory with the norm's 32 warp sums at most.
  bool NormFusable(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget* t, int count) const {
    if (!norm_fused_ || n != 1 || !Fusable(t, count) || norm.out == norm.x || t[0].w->cols != norm.dim) return false;
    if (independent && MmaRows(*t[0].w)) return false;
    if ((static_cast<size_t>(norm.dim) + 32) * sizeof(float) > limits_.max_shared_per_block) return false;
    return norm.dim % (t[0].w->dtype == DType::kQ8_0 ? kQ8_0BlockSize : 8) == 0;
  }
  // `independent`: a batched step of one row, whose products keep the
  // batched rows' (f32 x) bits; else a decode step's (Q8Int may take them).
  void FusedNormed(const RowsNormArgs& norm, std::vector<MatmulTarget> t, RowsEpilogue epi, bool independent) {
    std::vector<int64_t> sig = {kOpNormedRows,   static_cast<int64_t>(epi),           Id(norm.out), Id(norm.x),
                                Id(norm.weight), static_cast<int64_t>(t[0].w->dtype), norm.dim,     Bits(norm.eps),
                                independent};
    for (const MatmulTarget& m : t) sig.insert(sig.end(), {Id(m.out), Id(m.w->data), m.w->rows});
    Outputs outs;
    outs.Add(norm.out, static_cast<size_t>(norm.dim));
    for (const MatmulTarget& m : t) outs.Add(m.out, static_cast<size_t>(m.w->rows));
    double bytes = 12.0 * norm.dim;  // x and the norm's weight read, the normed row written
    for (const MatmulTarget& m : t) bytes += ProductBytes(*m.w, 1);
    const Weights& w0 = *t[0].w;
    normed_calls_++;  // the engine's call, whether it runs now, is kept, or replays in a recorded step
    Issue(
        sig.data(), sig.size(), outs, [=, this] { return FusedNormedImpl(norm, t, epi, independent); },
        [=, this] { return MatmulCtx(w0, 1) + " normed" + FusedName(epi) + " x" + std::to_string(t.size()); }, bytes);
  }
  Status FusedNormedImpl(const RowsNormArgs& norm, const std::vector<MatmulTarget>& t, RowsEpilogue epi,
                         bool independent) {
    const Weights& w0 = *t[0].w;
    RowsTargets tg;
    bool vectorized = true;
    // The products read the normed row from shared memory; norm.out (state,
    // 16-byte aligned as AllocateState hands out) stands for x's alignment.
    VERITY_RETURN_IF_ERROR(StackTargets(t, epi, norm.out, &tg, &vectorized));
    VERITY_ASSIGN_OR_RETURN(const float* dw, copies_.Floats(norm.weight, norm.dim, "rmsnorm weight"));
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* norm_plan, Plan({kPlanRmsnorm, 0, 1, norm.dim, 0, 0},
                                                              [&] { return PlanRmsnorm(1, norm.dim, limits_); }));
    if (!vectorized) {  // an unaligned copy: the calls the launch stands for
      VERITY_RETURN_IF_ERROR(
          LaunchRmsnorm(*norm_plan, norm.out, norm.x, dw, 1, norm.dim, norm.eps, stream_, "rmsnorm"));
      return FusedSeparately(norm.out, 1, t, epi, nullptr, false);
    }
    const RowsNorm nm{norm.out, dw, norm.eps, static_cast<int>(norm_plan->block.x)};
    const int stacked = tg.begin[tg.count], mats = epi == RowsEpilogue::kSwiGLU ? 2 : 1;
    if (!independent && Q8Int(w0, nm.threads)) {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Q8IntPlan(stacked, w0.cols, nm.threads, mats));
      q8_int_launches_++;
      return LaunchRowsNormed(*plan, w0.dtype, epi, tg, nm, norm.x, w0.cols, stream_, "rows_normed_int16x");
    }
    VERITY_ASSIGN_OR_RETURN(
        const LaunchPlan* plan,
        Plan({kPlanRowsNormed, static_cast<int>(w0.dtype), stacked, w0.cols, nm.threads, mats}, [&] {
          return Dependent(
              PlanRowsNormed(w0.dtype, stacked, w0.cols, nm.threads, limits_),
              RowsLaunchPrefetch(w0.dtype, stacked, w0.cols, mats, limits_.l2_bytes, env::CudaL2Prefetch()));
        }));
    return LaunchRowsNormed(*plan, w0.dtype, epi, tg, nm, norm.x, w0.cols, stream_, "rows_normed");
  }
  // Whether a batched step's product of w goes to the tensor cores
  // (VERITY_CUDA_BATCH_MMA=1; bf16 or q8_0, whole 32-column steps; alignment is
  // checked with the rows kernel's VectorizedRows before).
  bool MmaRows(const Weights& w) const {
    return batch_mma_ && (w.dtype == DType::kBF16 || w.dtype == DType::kQ8_0) && w.cols % 32 == 0;
  }
  Result<const LaunchPlan*> MmaPlan(DType dtype, int rows, int cols, int n, bool swiglu) {
    return Plan({kPlanRowsMma, static_cast<int>(dtype), rows, cols, n, swiglu ? 1 : 0},
                [&] { return Dependent(PlanRowsMma(dtype, rows, cols, n, swiglu, limits_)); });
  }
  // An unaligned matrix: the calls the fused one stands for.
  Status FusedSeparately(const float* x, int n, const std::vector<MatmulTarget>& t, RowsEpilogue epi, float* scratch,
                         bool rows) {
    const size_t out0 = static_cast<size_t>(n) * t[0].w->rows;
    float* first = epi == RowsEpilogue::kAdd ? scratch : t[0].out;
    VERITY_RETURN_IF_ERROR(MatmulImpl(first, x, *t[0].w, n, rows));
    for (size_t i = 1; i < t.size(); i++) VERITY_RETURN_IF_ERROR(MatmulImpl(t[i].out, x, *t[i].w, n, rows));
    if (epi == RowsEpilogue::kStore) return OkStatus();
    const PlanKind kind = epi == RowsEpilogue::kAdd ? kPlanAdd : kPlanSwiGLU;
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kind, 0, static_cast<int64_t>(out0), 0, 0, 0}, [&] {
                              return epi == RowsEpilogue::kAdd ? PlanElementwise("add", out0, limits_)
                                                               : PlanSwiGLU(out0, limits_);
                            }));
    if (epi == RowsEpilogue::kAdd)
      return LaunchElementwise(*plan, ElementwiseOp::kAdd, t[0].out, scratch, 0.0f, out0, stream_, "add");
    return LaunchSwiGLU(*plan, t[0].out, t[1].out, out0, stream_, "swiglu");
  }
  // Rows of a.q / a.key / a.value rotated at dpos[t] and cached (slot
  // dslot[t], or the caches given); dpos and dslot are device ints.
  // `max_pos`: the largest position, which the RoPE table must cover.
  void RopeCache(const AttendArgs& a, int n, const int* dpos, const int* dslot, int max_pos) {
    Use();
    Result<const float*> table = copies_.RopeTable(a.inv_freq, a.head_size, max_pos + 1);
    if (!table.ok()) return Fail(table.status(), [&] { return Ctx("rope table"); });
    const RopeCacheArgs r{
        a.q,    a.key, a.value, a.key_cache, a.value_cache, a.pos_stride, static_cast<int64_t>(a.slot_stride),
        *table, dpos,  dslot,   a.q_width(), a.kv_width(),  a.head_size,  a.interleaved};
    const int64_t sig[] = {kOpRopeCache,    Id(r.q),           Id(r.key),     Id(r.value),
                           Id(r.key_cache), Id(r.value_cache), r.pos_stride,  r.slot_stride,
                           Id(r.table),     Id(dpos),          Id(dslot),     r.q_width,
                           r.kv_width,      r.head_size,       r.interleaved, n};
    // On a failure q and key are NaN (the cache rows' place is known only on the device).
    Outputs outs(r.q, static_cast<size_t>(n) * r.q_width);
    outs.Add(r.key, static_cast<size_t>(n) * r.kv_width);
    Issue(
        sig, std::size(sig), outs,
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                                  Plan({kPlanRopeCache, n, r.q_width, r.kv_width, r.head_size, 0},
                                       [&] { return PlanRopeCache(n, r.q_width, r.kv_width, r.head_size, limits_); }));
          return LaunchRopeCache(*plan, r, stream_, "rope_cache");
        },
        [=, this] { return Ctx("rope and cache of " + std::to_string(n) + " rows"); });
  }
  // Positions then slots of a batched step's rows on the device (uploaded
  // when they change); nullptr after a failure, which is recorded.
  const int* RowIndices(const int* pos, const int* slot, int n) {
    Use();
    std::vector<int> host(pos, pos + n);
    host.insert(host.end(), slot, slot + n);
    if (host != rows_uploaded_) {
      rows_uploaded_.clear();
      Status s = [&]() -> Status {
        VERITY_RETURN_IF_ERROR(row_indices_.Reserve(host.size() * sizeof(int), "batched rows' positions"));
        VERITY_CUDA_CALL(cudaMemcpyAsync(row_indices_.as<void>(), host.data(), host.size() * sizeof(int),
                                         cudaMemcpyHostToDevice, stream_),
                         "batched rows' positions");
        return OkStatus();
      }();
      if (!s.ok()) {
        Fail(std::move(s), [&] { return Ctx("positions of " + std::to_string(n) + " rows"); });
        return nullptr;
      }
      rows_uploaded_ = std::move(host);
    }
    return error_.ok() ? row_indices_.as<const int>() : nullptr;
  }
  // A result goes to the host inside a recorded step: what was kept runs now,
  // and the rest of the step as issued.
  void FlushStep() {
    if (Recording()) Issued(steps_.Stop());
  }
  void Issued(const StepRecorder::Tape& tape) {
    steps_.CountIssued();
    for (const auto& call : tape) call();
  }
  // The kept calls under capture. A call that fails only there (CUDA refusing
  // it) is a refused capture, not the backend's error: error_ (OK before) is
  // put back, and the step then runs as issued, where a real failure shows again.
  Status RunUnderCapture(const StepRecorder::Tape& tape) {
    capturing_ = true;
    for (const auto& call : tape) call();
    capturing_ = false;
    Status under_capture = OkStatus();
    std::swap(under_capture, error_);
    return under_capture;
  }
  void LaunchGraph(cudaGraphExec_t exec) {
    steps_.CountGraphed();
    Status s = [&]() -> Status {
      VERITY_CUDA_CALL(cudaGraphLaunch(exec, stream_), "launching a decode step's graph");
      return OkStatus();
    }();
    if (!s.ok()) Fail(std::move(s), [&] { return Ctx("decode step at position " + std::to_string(steps_.pos())); });
  }
  // Graphs hold the buffers they were recorded with: dropped when one moves.
  void DropGraphs() { steps_.DropGraphs(); }

  // All bits set is a NaN in every float. A failed backend hands out host
  // memory (AllocateState), which is filled on the host: a device memset of
  // it is refused. Inside a capture every output is device state (made while
  // the backend was healthy), and no pointer query is made there.
  void PoisonOnDevice(float* out, size_t n) {
    if (out == nullptr) return;  // an UnbackedState too large to reserve
    if (!capturing_ && OnHost(out)) {
      std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
      return;
    }
    const Status ignored = [&]() -> Status {
      VERITY_CUDA_CALL(cudaMemsetAsync(out, 0xff, n * sizeof(float), stream_), "poisoning an output");
      return OkStatus();
    }();
    (void)ignored;  // the first error is already recorded; a device that cannot even memset has no output to read
  }
  // Plain host memory (not allocated or registered with CUDA).
  static bool OnHost(const void* p) {
    cudaPointerAttributes attr{};
    const Status asked = [&]() -> Status {
      VERITY_CUDA_CALL(cudaPointerGetAttributes(&attr, p), "where an output lives");
      return OkStatus();
    }();
    return asked.ok() && attr.type == cudaMemoryTypeUnregistered;
  }
  Status ZeroBytes(void* p, size_t bytes, const std::string& ctx) {
    VERITY_CUDA_CALL(cudaMemsetAsync(p, 0, bytes, stream_), ctx + " zeroing");
    return OkStatus();
  }
  Status DownloadImpl(float* host, const float* state, size_t n) {
    VERITY_CUDA_CALL(cudaMemcpyAsync(host, state, n * sizeof(float), cudaMemcpyDeviceToHost, stream_), "download");
    // A kernel's fault is reported here, by the first wait after it.
    VERITY_CUDA_CALL(cudaStreamSynchronize(stream_), "waiting for the queued calls (a kernel faulted)");
    return OkStatus();
  }
  // Pageable host memory: the copy is staged before cudaMemcpyAsync returns,
  // so `host` may change at once.
  Status UploadImpl(float* state, const float* host, size_t n) {
    VERITY_CUDA_CALL(cudaMemcpyAsync(state, host, n * sizeof(float), cudaMemcpyHostToDevice, stream_), "upload");
    return OkStatus();
  }
  void Elementwise(PlanKind kind, const char* name, ElementwiseOp op, float* x, const float* y, float a, size_t n) {
    if (n == 0) return;
    Issue(
        {kOpElementwise, kind, Id(x), Id(y), Bits(a), static_cast<int64_t>(n)}, x, n,
        [=, this]() -> Status {
          VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kind, 0, static_cast<int64_t>(n), 0, 0, 0},
                                                               [&] { return PlanElementwise(name, n, limits_); }));
          return LaunchElementwise(*plan, op, x, y, a, static_cast<int64_t>(n), stream_, name);
        },
        [=, this] { return Ctx(std::string(name) + " n=" + std::to_string(n)); });
  }

  // A rows plan launched as a dependent launch where the device has it
  // (sm_90+) and VERITY_CUDA_PDL does not turn it off: it asks L2 for the
  // first prefetch_bytes of each of its `rows` weight rows (of `row_bytes`)
  // while the kernel before it finishes (docs/cuda.md, "Dependent launches",
  // "Whole rows into L2"); VERITY_CUDA_L2_PREFETCH=0 keeps the 2 KB a row of
  // before, to measure what the rest gives.
  Result<LaunchPlan> Dependent(Result<LaunchPlan> plan, int64_t prefetch = 0) const {
    if (!plan.ok() || limits_.compute_major < 9 || !env::CudaDependentLaunch()) return plan;
    plan->dependent_launch = true;
    plan->prefetch_bytes = prefetch;
    return plan;
  }
  // The rows kernel's plan for `rows` stacked weight rows (`mats` matrices of
  // them read: 2 for SwiGLU's gate and up), as a dependent launch.
  Result<const LaunchPlan*> RowsPlan(DType dtype, int rows, int cols, int n, int mats) {
    return Plan({kPlanRows, static_cast<int>(dtype), rows, cols, n, mats}, [&] {
      return Dependent(PlanRows(dtype, rows, cols, n, limits_),
                       RowsLaunchPrefetch(dtype, rows, cols, mats, limits_.l2_bytes, env::CudaL2Prefetch()));
    });
  }
  // A validated plan, made once per shape: a decode step makes hundreds of
  // launches, and the planners build strings.
  template <class Make>
  Result<const LaunchPlan*> Plan(const PlanKey& key, Make make) {
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      VERITY_ASSIGN_OR_RETURN(LaunchPlan p, make());
      it = plans_.emplace(key, std::move(p)).first;
    }
    return &it->second;
  }

  // "layer 3 matmul rows=64 cols=288 T=1 dtype=bf16": what failed, for errors.
  std::string Ctx(const std::string& op) const {
    return (layer_ >= 0 ? "layer " + std::to_string(layer_) : std::string("classifier")) + " " + op;
  }
  std::string MatmulCtx(const Weights& w, int T) const {
    return Ctx("matmul rows=" + std::to_string(w.rows) + " cols=" + std::to_string(w.cols) + " T=" + std::to_string(T) +
               " dtype=" + DTypeName(w.dtype));
  }

  Status MatmulImpl(float* out, const float* x, const Weights& w, int T, bool rows) {
    VERITY_ASSIGN_OR_RETURN(const void* dw, copies_.Weights(w));
    if (w.dtype == DType::kBlock) return BlockMatmul(out, x, dw, w, T, rows);
    // The 16-byte kernel for every bf16/q8_0 vector product it can take, so a
    // decode step's Matmul and a batched step's MatmulRows give the same bits.
    if (w.dtype != DType::kF32 && (T == 1 || rows) && VectorizedRows(w.dtype, dw, x, w.cols)) {
      if (rows && MmaRows(w)) {
        VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, MmaPlan(w.dtype, w.rows, w.cols, T, false));
        RowsTargets one;
        one.count = 1, one.begin[1] = w.rows, one.w[0] = dw, one.out[0] = out;
        return LaunchRowsMma(*plan, w.dtype, RowsEpilogue::kStore, one, x, w.cols, T, stream_, "rows_mma");
      }
      if (!rows && Q8Int(w, 0)) {  // T == 1: a decode step's
        VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Q8IntPlan(w.rows, w.cols, 0, 1));
        q8_int_launches_++;
        return LaunchRows(*plan, w.dtype, out, dw, x, w.rows, w.cols, 1, stream_, "rows_int16x");
      }
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, RowsPlan(w.dtype, w.rows, w.cols, T, 1));
      return LaunchRows(*plan, w.dtype, out, dw, x, w.rows, w.cols, T, stream_, "rows");
    }
    if (rows) {  // an odd shape: one vector at a time keeps each row its own product
      for (int t = 0; t < T; t++)
        VERITY_RETURN_IF_ERROR(
            MatmulImpl(out + static_cast<size_t>(t) * w.rows, x + static_cast<size_t>(t) * w.cols, w, 1, false));
      return OkStatus();
    }
    if (w.dtype == DType::kF32) return CublasF32(out, x, dw, w.rows, w.cols, T);
    // A block's products on tensor cores: its attention may take TF32 (AttentionGemm).
    if (T >= kGemmMinRows) block_on_tensor_cores_ = w.dtype != DType::kF32;
    if (w.dtype == DType::kBF16 && T >= kGemmMinRows) return GemmBF16(out, x, dw, w.rows, w.cols, T);
    if (w.dtype == DType::kQ8_0 && T >= kGemmMinRows) return GemmQ8_0(out, x, dw, w.rows, w.cols, T);
    if (T == 1) {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                              Plan({kPlanMatvec, static_cast<int>(w.dtype), w.rows, w.cols, 0, 0},
                                   [&] { return PlanMatvec(w.dtype, w.rows, w.cols, limits_); }));
      return LaunchMatvec(*plan, w.dtype, out, dw, x, w.rows, w.cols, stream_, "matvec");
    }
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                            Plan({kPlanBatch, static_cast<int>(w.dtype), w.rows, w.cols, T, 0},
                                 [&] { return PlanMatmulBatch(w.dtype, w.rows, w.cols, T, limits_); }));
    return LaunchMatmulBatch(*plan, w.dtype, out, dw, x, w.rows, w.cols, T, stream_, "matmul_batch");
  }

  // Row-major W [rows x cols] is column-major W^T with leading dimension cols:
  // y = W x is gemv with op T; Y^T [rows x T] = W X^T is gemm (T, N).
  Status CublasF32(float* out, const float* x, const void* dw, int rows, int cols, int T) {
    const float one = 1.0f, zero = 0.0f;
    const float* W = static_cast<const float*>(dw);
    if (T == 1) {
      VERITY_CUBLAS_CALL(cublasSgemv(cublas_, CUBLAS_OP_T, cols, rows, &one, W, cols, x, 1, &zero, out, 1), "sgemv");
    } else {
      VERITY_CUBLAS_CALL(
          cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, cols, &one, W, cols, x, cols, &zero, out, rows),
          "sgemm");
    }
    return OkStatus();
  }

  // Rows at positions a.pos .. a.pos + rows - 1, each over its own past.
  // A prefill block's bf16 product on tensor cores: the activations rounded
  // to bf16 (the parity cost: CudaDevice.Bf16PrefillGemmStatesItsParityCost),
  // bf16 x bf16 products accumulated in f32, f32 out. Y^T [rows x T] = W X^T.
  Status GemmBF16(float* out, const float* x, const void* dw, int rows, int cols, int T) {
    const int64_t n = int64_t{T} * cols;
    VERITY_RETURN_IF_ERROR(x_bf16_.Reserve(static_cast<size_t>(n) * sizeof(uint16_t), "bf16 activations"));
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                            Plan({kPlanToBF16, 0, n, 0, 0, 0}, [&] { return PlanElementwise("to_bf16", n, limits_); }));
    VERITY_RETURN_IF_ERROR(LaunchToBF16(*plan, x_bf16_.as<uint16_t>(), x, n, stream_, "to_bf16"));
    const float one = 1.0f, zero = 0.0f;
    VERITY_CUBLAS_CALL(cublasGemmEx(cublas_tc_, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, cols, &one, dw, CUDA_R_16BF, cols,
                                    x_bf16_.as<void>(), CUDA_R_16BF, cols, &zero, out, CUDA_R_32F, rows,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "bf16 gemm");
    return OkStatus();
  }

  // A prefill block's q8_0 product on tensor cores: the weights dequantized
  // to bf16 on the device into one scratch (every call: reading 1.125 and
  // writing 2 bytes a weight, then the GEMM's 2), then GemmBF16. Its parity
  // cost (weights and activations rounded to bf16):
  // CudaDevice.Q8_0PrefillGemmStatesItsParityCost.
  Status GemmQ8_0(float* out, const float* x, const void* dw, int rows, int cols, int T) {
    const int64_t n = int64_t{rows} * cols;
    if (w_bf16_.bytes() < static_cast<size_t>(n) * sizeof(uint16_t)) {
      DropGraphs();  // it moves: no graph may hold the old one (none should: a decode step has no GEMM)
      VERITY_RETURN_IF_ERROR(w_bf16_.Reserve(static_cast<size_t>(n) * sizeof(uint16_t), "q8_0 weights in bf16"));
    }
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanQ8ToBF16, 0, n / 8, 0, 0, 0}, [&] {
                              return PlanElementwise("q8_0_to_bf16", n / 8, limits_);
                            }));
    VERITY_RETURN_IF_ERROR(LaunchQ8_0ToBF16(*plan, w_bf16_.as<uint16_t>(), dw, n, stream_, "q8_0_to_bf16"));
    return GemmBF16(out, x, w_bf16_.as<void>(), rows, cols, T);
  }

  // A product with llama.cpp's Q4_K or Q6_K blocks, read where they lie
  // (block_rows.h): the blocks kernel for decode and batched steps (batch
  // invariant), and for a prefill block the weights expanded to bf16 (exact
  // weights, rounded once) and GemmBF16, as GemmQ8_0.
  Status BlockMatmul(float* out, const float* x, const void* dw, const Weights& w, int T, bool rows) {
    const uint32_t type = w.block->ggml_type;
    if (T < kGemmMinRows || rows) {
      VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                              Plan({kPlanBlockRows, static_cast<int>(type), w.rows, w.cols, T, 0},
                                   [&] { return PlanBlockRows(type, w.rows, w.cols, T, limits_); }));
      return LaunchBlockRows(*plan, type, out, dw, x, w.rows, w.cols, T, stream_, "block_rows");
    }
    block_on_tensor_cores_ = true;
    const int64_t n = int64_t{w.rows} * w.cols;
    if (w_bf16_.bytes() < static_cast<size_t>(n) * sizeof(uint16_t)) {
      DropGraphs();  // it moves: no graph may hold the old one
      VERITY_RETURN_IF_ERROR(w_bf16_.Reserve(static_cast<size_t>(n) * sizeof(uint16_t), "block weights in bf16"));
    }
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                            Plan({kPlanBlockToBF16, static_cast<int>(type), n / 8, 0, 0, 0},
                                 [&] { return PlanElementwise("block_to_bf16", n / 8, limits_); }));
    VERITY_RETURN_IF_ERROR(
        LaunchBlockToBF16(*plan, type, w_bf16_.as<uint16_t>(), dw, w.rows, w.cols, stream_, "block_to_bf16"));
    return GemmBF16(out, x, w_bf16_.as<void>(), w.rows, w.cols, T);
  }

  // The window and Gemma's score scale and soft-cap (AttentionArgs) into a launch's arguments.
  static void WithScores(AttentionDeviceArgs* d, int window, float scale_dim, float softcap) {
    d->window = window;
    d->scale_dim = scale_dim;
    d->softcap = softcap;
  }
  // `pos_at`: the position is read there on the device (a recorded step).
  // A decoded row takes the split kernel where its head fits (the tiled one
  // otherwise); its launch depends on seq_len, never the position, so
  // recorded and eager steps launch alike and give the same bits.
  Status AttentionImpl(const AttentionArgs& a, int rows, const int* pos_at) {
    if (rows == 1 && a.head_size <= kDecodeMaxHeadSize) return DecodeAttention(a, pos_at);
    // Flash tiles need TF32 mma.sync (sm_80+); below it the GEMMs take the block rather than fail.
    if (rows >= kGemmMinRows && flash_prefill_ && block_on_tensor_cores_ && pos_at == nullptr &&
        limits_.compute_major >= 8) {
      AttentionDeviceArgs d{a.out, a.q,  a.key_cache, a.value_cache, a.pos_stride, int64_t{a.n_heads} * a.head_size,
                            a.pos, rows, a.n_heads,   a.n_kv_heads,  a.head_size};
      WithScores(&d, a.window, a.scale_dim, a.softcap);
      if (FlashAttentionTakes(d)) {
        flash_blocks_++;
        return FlashAttention(d);
      }
    }
    const size_t score_bytes = static_cast<size_t>(a.n_heads) * rows * (int64_t{a.pos} + rows) * sizeof(float);
    if (rows >= kGemmMinRows && score_bytes <= kGemmAttentionMaxScoreBytes) {
      gemm_blocks_++;
      return GemmAttention(a, rows);
    }
    if (rows > 1) tiled_blocks_++;
    // The plan depends on the context only up to one tile (the last row's); a
    // decoded row always takes the full tile's, so recorded and eager steps
    // reduce alike.
    const int64_t n = int64_t{a.pos} + rows;
    const int64_t capped = rows == 1 ? kAttentionTile : std::min<int64_t>(n, std::max<int64_t>(kAttentionTile, rows));
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                            Plan({kPlanAttention, a.n_heads * 65536 + a.n_kv_heads, a.head_size, rows, capped, 0}, [&] {
                              return PlanAttention(a.n_heads, a.n_kv_heads, a.head_size, rows, capped, limits_);
                            }));
    const int64_t q_floats = int64_t{a.n_heads} * a.head_size;
    AttentionDeviceArgs d{a.out, a.q,  a.key_cache, a.value_cache, a.pos_stride, q_floats,
                          a.pos, rows, a.n_heads,   a.n_kv_heads,  a.head_size,  pos_at};
    WithScores(&d, a.window, a.scale_dim, a.softcap);
    return LaunchAttention(*plan, d, stream_, "attention");
  }

  // A prefill block's attention as flash-style tiles (VERITY_CUDA_FLASH_PREFILL=1,
  // a block whose products ran on tensor cores: the same TF32 rounding the
  // GEMMs below take; docs/cuda.md, "Prefill attention as flash tiles").
  Status FlashAttention(const AttentionDeviceArgs& d) {
    VERITY_ASSIGN_OR_RETURN(
        const LaunchPlan* plan,
        Plan({kPlanFlashAttention, d.n_heads * 65536 + d.n_kv_heads, d.head_size, d.n_queries, 0, 0},
             [&] { return PlanFlashAttention(d.n_heads, d.n_kv_heads, d.head_size, d.n_queries, limits_); }));
    return LaunchFlashAttention(*plan, d, stream_, "attention_flash");
  }
  // A prefill block's attention as products (docs/cuda.md): every query
  // head's scores S_h = Q_h K^T / sqrt(head_size) (or Gemma's scale) in one
  // batched GEMM (pointer arrays: ew::AttentionHeadAt), the causal softmax of every row (soft-capped,
  // and from its window's first position: the GEMM scores every position
  // and the softmax zeroes those outside), then O_h = P_h V. cuBLAS
  // is column-major: a row-major [r x ld] matrix is its transpose, so
  // S_h^T [n x T] = K [n x hs] Q_h^T and O_h^T [hs x T] = V^T P_h^T.
  Status GemmAttention(const AttentionArgs& a, int T) {
    const int64_t n = int64_t{a.pos} + T;  // positions the last row attends to
    const int hs = a.head_size, H = a.n_heads, qw = H * hs, ld = static_cast<int>(a.pos_stride);
    VERITY_RETURN_IF_ERROR(scores_.Reserve(static_cast<size_t>(H) * T * n * sizeof(float), "attention scores"));
    VERITY_RETURN_IF_ERROR(attn_arrays_.Reserve(6 * static_cast<size_t>(H) * sizeof(void*), "attention pointers"));
    float* scores = scores_.as<float>();
    void** arrays = attn_arrays_.as<void*>();
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* ptrs, Plan({kPlanAttentionPointers, H, 0, 0, 0, 0}, [&] {
                              return PlanElementwise("attention_pointers", H, limits_);
                            }));
    VERITY_RETURN_IF_ERROR(LaunchAttentionPointers(*ptrs, {a.q, a.key_cache, a.value_cache, scores, a.out}, H,
                                                   H / a.n_kv_heads, hs, int64_t{T} * n, arrays, stream_,
                                                   "attention_pointers"));
    const int cols = static_cast<int>(n);
    VERITY_RETURN_IF_ERROR(AttentionGemm(CUBLAS_OP_T, cols, T, hs, 1.0f / a.score_divisor(), arrays, ld, arrays + H, qw,
                                         arrays + 2 * H, cols, H, "attention scores gemm"));
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanCausalSoftmax, H, T, n, 0, 0},
                                                         [&] { return PlanCausalSoftmax(H, T, n, limits_); }));
    VERITY_RETURN_IF_ERROR(
        LaunchCausalSoftmax(*plan, scores, n, T, a.pos, a.window, a.softcap, stream_, "causal_softmax"));
    return AttentionGemm(CUBLAS_OP_N, hs, T, cols, 1.0f, arrays + 3 * H, ld, arrays + 4 * H, cols, arrays + 5 * H, qw,
                         H, "attention values gemm");
  }
  // C_i = alpha op(A_i) B_i for the `batch` matrices whose pointers are on the
  // device at A, B and C (f32 in and out). One call for every head: with a
  // strided call per KV head, a 32-row prompt block's attention took 1.16 ms
  // for the 7B's 65 launches and 122 us for the 1B's 9 on the H200 (~13-18
  // us a launch, far more than their device work; docs/cuda.md). f32
  // products on the pedantic handle, unless the block's
  // own products ran on tensor cores (its activations already in bf16:
  // weights not f32): then TF32 tensor cores, whose input rounding (2^-11)
  // is below the bf16 rounding those activations already took.
  Status AttentionGemm(cublasOperation_t op_a, int m, int n, int k, float alpha, void* const* A, int lda,
                       void* const* B, int ldb, void* const* C, int ldc, int batch, const char* what) {
    const float zero = 0.0f;
    if (!block_on_tensor_cores_) {
      VERITY_CUBLAS_CALL(
          cublasSgemmBatched(cublas_, op_a, CUBLAS_OP_N, m, n, k, &alpha, reinterpret_cast<const float* const*>(A), lda,
                             reinterpret_cast<const float* const*>(B), ldb, &zero, reinterpret_cast<float* const*>(C),
                             ldc, batch),
          what);
      return OkStatus();
    }
    VERITY_CUBLAS_CALL(
        cublasGemmBatchedEx(cublas_tc_, op_a, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                            &zero, C, CUDA_R_32F, ldc, batch, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
        what);
    return OkStatus();
  }

  // Decode attention split over the context. The capacity is seq_len (the
  // cache holds that many positions), or more for a caller that says less.
  Status DecodeAttention(const AttentionArgs& a, const int* pos_at) {
    const int64_t capacity = std::max<int64_t>(a.seq_len, int64_t{a.pos} + 1);
    VERITY_ASSIGN_OR_RETURN(
        const LaunchPlan* plan,
        Plan({kPlanDecodeAttention, a.n_heads * 65536 + a.n_kv_heads, a.head_size, capacity, 0, 0},
             [&] { return PlanDecodeAttention(a.n_heads, a.n_kv_heads, a.head_size, capacity, limits_); }));
    VERITY_RETURN_IF_ERROR(EnsureDecodeScratch(DecodeAttentionPartialFloats(*plan, a.head_size), a.n_heads));
    const int64_t q_floats = int64_t{a.n_heads} * a.head_size;
    AttentionDeviceArgs d{a.out, a.q, a.key_cache, a.value_cache, a.pos_stride, q_floats,
                          a.pos, 1,   a.n_heads,   a.n_kv_heads,  a.head_size,  pos_at};
    WithScores(&d, a.window, a.scale_dim, a.softcap);
    const DecodeAttentionScratch scratch{attn_partials_.as<float>(), attn_counters_.as<unsigned int>()};
    return LaunchDecodeAttention(*plan, d, scratch, stream_, "attention_decode_split");
  }
  // The split decode attention of n rows, row t at dpos[t] in slot dpos[n + t].
  Status DecodeAttentionRows(const AttendArgs& a, int n, const int* dpos, int max_pos) {
    const int64_t capacity = std::max<int64_t>(a.seq_len, int64_t{max_pos} + 1);
    VERITY_ASSIGN_OR_RETURN(
        const LaunchPlan* plan,
        Plan({kPlanDecodeAttention, a.n_heads * 65536 + a.n_kv_heads, a.head_size, capacity, n, 1},
             [&] { return PlanDecodeAttentionRows(a.n_heads, a.n_kv_heads, a.head_size, capacity, n, limits_); }));
    VERITY_RETURN_IF_ERROR(EnsureDecodeScratch(DecodeAttentionPartialFloats(*plan, a.head_size), a.n_heads * n));
    AttentionDeviceArgs d{a.out,       a.q,     a.key_cache, a.value_cache, a.pos_stride,
                          a.q_width(), 0,       1,           a.n_heads,     a.n_kv_heads,
                          a.head_size, nullptr, dpos,        dpos + n,      static_cast<int64_t>(a.slot_stride)};
    WithScores(&d, a.window, a.scale_dim, a.softcap);
    const DecodeAttentionScratch scratch{attn_partials_.as<float>(), attn_counters_.as<unsigned int>()};
    return LaunchDecodeAttention(*plan, d, scratch, stream_, "attention_decode_split");
  }
  // The split attention's partials and per-head counters, grown on demand.
  // Growing moves them, so graphs recorded with the old ones are dropped; new
  // counters start at zero (each launch leaves them so).
  Status EnsureDecodeScratch(int64_t partial_floats, int n_heads) {
    const size_t partial_bytes = static_cast<size_t>(partial_floats) * sizeof(float);
    const size_t counter_bytes = static_cast<size_t>(n_heads) * sizeof(unsigned int);
    if (attn_partials_.bytes() >= partial_bytes && attn_counters_.bytes() >= counter_bytes) return OkStatus();
    DropGraphs();
    VERITY_RETURN_IF_ERROR(attn_partials_.Reserve(partial_bytes, "attention partials"));
    if (attn_counters_.bytes() < counter_bytes) {
      VERITY_RETURN_IF_ERROR(attn_counters_.Reserve(counter_bytes, "attention counters"));
      VERITY_RETURN_IF_ERROR(ZeroBytes(attn_counters_.as<void>(), counter_bytes, "attention counters"));
    }
    return OkStatus();
  }

  // Rows t < rows of `vec` (`size` floats each) at positions pos + t.
  Status RopeImpl(float* vec, int rows, int size, int head_size, int pos, const float* inv_freq, bool interleaved) {
    VERITY_ASSIGN_OR_RETURN(const float* table, copies_.RopeTable(inv_freq, head_size, pos + rows));
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan, Plan({kPlanRope, 0, rows, size, head_size, 0},
                                                         [&] { return PlanRope(rows, size, head_size, limits_); }));
    const float* row = table + static_cast<size_t>(pos) * head_size;
    return LaunchRope(*plan, vec, row, rows, size, head_size, interleaved, stream_, "rope");
  }

  // The block's token ids go up (n ints) and its rows are gathered on the
  // device from the table, uploaded whole on first use (ModelCopies).
  Status EmbedImpl(float* x, const float* table, int rows, int dim, const int* tokens, int n) {
    VERITY_ASSIGN_OR_RETURN(const float* dtable,
                            copies_.Floats(table, static_cast<size_t>(rows) * dim, "embedding table"));
    VERITY_RETURN_IF_ERROR(tokens_.Reserve(static_cast<size_t>(n) * sizeof(int), "embedding token ids"));
    VERITY_CUDA_CALL(cudaMemcpyAsync(tokens_.as<void>(), tokens, static_cast<size_t>(n) * sizeof(int),
                                     cudaMemcpyHostToDevice, stream_),
                     "embedding token ids");
    VERITY_ASSIGN_OR_RETURN(const LaunchPlan* plan,
                            Plan({kPlanEmbed, 0, dim, n, 0, 0}, [&] { return PlanEmbed(dim, n, limits_); }));
    return LaunchEmbed(*plan, x, dtable, tokens_.as<const int>(), dim, n, stream_, "embed");
  }

  const int prefill_block_;  // positions per prefill pass (VERITY_CUDA_PREFILL_BLOCK, else 512)
  int device_;
  DeviceLimits limits_;
  cublasHandle_t cublas_, cublas_tc_;  // pedantic f32; tensor cores for the bf16 GEMM
  cudaStream_t stream_;
  int layer_ = -1;
  Status error_;
  ModelCopies copies_;  // weights, norm weights, the embedding table, RoPE tables
  std::unordered_map<PlanKey, LaunchPlan, PlanKeyHash> plans_;
  DeviceBuffer tokens_;                         // a block's token ids
  DeviceBuffer x_bf16_;                         // a prefill block's activations in bf16 (GemmBF16)
  DeviceBuffer w_bf16_;                         // a q8_0 matrix dequantized to bf16 (GemmQ8_0)
  DeviceBuffer attn_partials_, attn_counters_;  // the split decode attention's scratch
  DeviceBuffer pick_;                           // the greedy pick (Argmax)
  DeviceBuffer scores_;                         // a prefill block's attention scores (GemmAttention)
  DeviceBuffer attn_arrays_;                    // its batched products' pointers (GemmAttention)
  bool block_on_tensor_cores_ = false;          // the last prefill block's products were bf16/q8_0 GEMMs
  DeviceBuffer row_indices_;                    // a batched step's positions and slots (AttendRows)
  std::vector<int> rows_uploaded_;              // what row_indices_ holds
  // Recorded decode steps: the step's token and position on the device, the
  // kept calls and their signature, and the graphs by signature.
  DeviceBuffer step_;
  StepRecorder steps_;
  bool capturing_ = false;                  // the kept calls run under a stream capture (RunUnderCapture)
  std::unique_ptr<KernelProfile> profile_;  // VERITY_CUDA_PROFILE=1: device time per kind of call
  long flash_blocks_ = 0, gemm_blocks_ = 0, tiled_blocks_ = 0;  // prompt blocks' attention, by path
  long normed_calls_ = 0;                         // norm-and-products calls taken as one launch (NORM_FUSED)
  const bool norm_fused_ = env::CudaNormFused();  // VERITY_CUDA_NORM_FUSED=1: a decode step's norms in its products
  const bool flash_prefill_ = env::CudaFlashPrefill();  // VERITY_CUDA_FLASH_PREFILL=1: flash-style prefill attention
  const bool batch_mma_ = env::CudaBatchMma();          // VERITY_CUDA_BATCH_MMA=1: batched products on tensor cores
  const bool q8_int16_ = env::CudaQ8Int16();            // VERITY_CUDA_Q8_INT16=1: decode q8_0 products on int16 x
  long q8_int_launches_ = 0;                            // product launches taken on int16 x
  std::vector<float> router_;                           // MoE router logits downloaded for routing
};

// The device's limits and a one-line description with its peak memory bandwidth.
Status DescribeDevice(int dev, DeviceLimits* lim, std::string* line) {
  cudaDeviceProp p{};
  VERITY_CUDA_CALL(cudaGetDeviceProperties(&p, dev), "--backend cuda: device properties");
  int clock_khz = 0, bus_bits = 0;
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev), "--backend cuda: memory clock");
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev),
                   "--backend cuda: bus width");
  if (p.warpSize != 32)
    return Status::Error("--backend cuda: device " + std::string(p.name) + " has warp size " +
                         std::to_string(p.warpSize) + "; the kernels need 32");
  lim->max_threads_per_block = p.maxThreadsPerBlock;
  for (int i = 0; i < 3; i++) {
    lim->max_block_dim[i] = p.maxThreadsDim[i];
    lim->max_grid_dim[i] = p.maxGridSize[i];
  }
  lim->max_shared_per_block = p.sharedMemPerBlock;
  lim->warp_size = p.warpSize;
  lim->compute_major = p.major;
  lim->l2_bytes = p.l2CacheSize;
  // Double data rate: two transfers per clock over the whole bus.
  const double gb_s = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "verity: cuda backend on device %d: %s (sm_%d%d, %d SMs, %.1f GiB), peak memory bandwidth %.1f GB/s",
                dev, p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, gb_s);
  *line = buf;
  return OkStatus();
}

Status CountDevices(int* count) {
  VERITY_CUDA_CALL(cudaGetDeviceCount(count), "--backend cuda: no usable CUDA device");
  if (*count == 0) return Status::Error("--backend cuda: no CUDA device found (cudaGetDeviceCount: 0 devices)");
  return OkStatus();
}

// A trivial launch proves this build carries kernels for the device (sm_80/sm_90).
Status Probe(const DeviceLimits& lim) {
  const std::string ctx = "--backend cuda: probe launch";
  VERITY_ASSIGN_OR_RETURN(LaunchPlan plan, PlanSwiGLU(1, lim));
  DeviceBuffer probe;
  VERITY_RETURN_IF_ERROR(probe.Reserve(2 * sizeof(float), ctx));
  VERITY_CUDA_CALL(cudaMemset(probe.as<void>(), 0, 2 * sizeof(float)), ctx);
  VERITY_RETURN_IF_ERROR(LaunchSwiGLU(plan, probe.as<float>(), probe.as<float>() + 1, 1, 0, ctx));
  VERITY_CUDA_CALL(cudaDeviceSynchronize(), ctx);
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Backend>> MakeCudaBackend(int device) {
  // Checked before any device work, so a bad value costs nothing to undo.
  Result<int> block = PrefillBlockFromText(env::CudaPrefillBlock());
  if (!block.ok()) return Status::Error("--backend cuda: " + block.status().message());
  const int prefill_block = *block;
  int count = 0;
  VERITY_RETURN_IF_ERROR(CountDevices(&count));
  if (device < 0) return Status::Error("--backend cuda: device " + std::to_string(device) + " (must be >= 0)");
  const int dev = device % count;
  VERITY_CUDA_CALL(cudaSetDevice(dev), "--backend cuda: selecting device " + std::to_string(dev));
  DeviceLimits lim;
  std::string line;
  VERITY_RETURN_IF_ERROR(DescribeDevice(dev, &lim, &line));
  VERITY_RETURN_IF_ERROR(Probe(lim));
  cudaStream_t stream = nullptr;
  VERITY_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "--backend cuda: stream");
  cublasHandle_t handle = nullptr, tensor_cores = nullptr;
  const Status made = [&]() -> Status {
    VERITY_CUBLAS_CALL(cublasCreate(&handle), "--backend cuda: cuBLAS");
    VERITY_CUBLAS_CALL(cublasCreate(&tensor_cores), "--backend cuda: cuBLAS");
    return OkStatus();
  }();
  if (!made.ok()) {
    if (handle) VERITY_CUBLAS_CALL_LOG(cublasDestroy(handle), "--backend cuda: cuBLAS");
    VERITY_CUDA_CALL_LOG(cudaStreamDestroy(stream), "--backend cuda: stream");
    return made;
  }
  // Owns the handles and the stream from here on.
  auto backend = std::make_unique<CudaBackend>(dev, lim, handle, tensor_cores, stream, prefill_block);
  VERITY_RETURN_IF_ERROR(backend->Init());
  std::fprintf(stderr, "%s\n", line.c_str());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace verity::kernels::cuda
