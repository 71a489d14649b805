// The CUDA backend: each Backend call copies its activations to the device,
// runs checked kernels (or cuBLAS for f32), and copies the result back.
//
// Weights: a device copy of each matrix is made on its first use and kept for
// the backend's life, in a cache keyed by the host view's data pointer (a
// backend serves one Transformer, whose Model outlives it and whose weights do
// not change after loading). A hit must agree in dtype and cover the view's
// bytes, else the matrix is uploaded again. The device view handed to the
// kernels is the host view with `data` replaced by the device pointer.
//
// The KV caches are device memory the backend owns (AllocateState): each
// token's K and V rows go up once (WriteCache) and attention reads the caches
// in place. Activations (x, queries, RoPE vectors) are still copied per call:
// synchronous cudaMemcpy on the default stream, which also surfaces any
// earlier kernel's asynchronous fault at the call that caused it.
//
// Errors: the first failure is recorded (status()), and that call's and every
// later call's output is filled with NaN, so no stale buffer is ever used.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch_plan.h"

namespace verity::kernels::cuda {
namespace {

// A grow-only device allocation, freed (checked) when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  ~DeviceBuffer() { Release(); }

  // Ensures at least `bytes` are allocated (the old contents are not kept).
  Status Reserve(size_t bytes, const std::string& ctx) {
    if (bytes <= bytes_) return OkStatus();
    Release();
    VERITY_CUDA_CALL(cudaMalloc(&p_, bytes), ctx + " (" + std::to_string(bytes) + " bytes)");
    bytes_ = bytes;
    return OkStatus();
  }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void Release() {
    if (p_) VERITY_CUDA_CALL_LOG(cudaFree(p_), "freeing a device buffer");
    p_ = nullptr;
    bytes_ = 0;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Forward state (a KV cache) kept in device memory: data() is a device
// pointer, which only this backend's WriteCache and Attention take.
class DeviceState final : public StateBuffer {
 public:
  DeviceState(DeviceBuffer buf, size_t floats) : buf_(std::move(buf)), floats_(floats) {}
  float* data() override { return buf_.as<float>(); }
  size_t floats() const override { return floats_; }

 private:
  DeviceBuffer buf_;
  size_t floats_;
};

struct DeviceMatrix {
  DeviceBuffer buf;
  DType dtype = DType::kF32;
  size_t bytes = 0;
};

Status CopyToDevice(void* dst, const void* src, size_t bytes, const std::string& ctx) {
  VERITY_CUDA_CALL(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), ctx);
  return OkStatus();
}
Status CopyToHost(void* dst, const void* src, size_t bytes, const std::string& ctx) {
  VERITY_CUDA_CALL(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), ctx);
  return OkStatus();
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceLimits& limits, cublasHandle_t handle) : limits_(limits), cublas_(handle) {}
  ~CudaBackend() override { VERITY_CUBLAS_CALL_LOG(cublasDestroy(cublas_), "destroying the cuBLAS handle"); }

  // Plain f32 arithmetic in cuBLAS: no TF32 tensor-core rounding, whatever NVIDIA_TF32_OVERRIDE says.
  Status Init() {
    VERITY_CUBLAS_CALL(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH), "--backend cuda: cuBLAS math mode");
    return OkStatus();
  }

  const char* name() const override { return "cuda"; }
  void BeginLayer(int layer) override { layer_ = layer; }
  Status status() const override { return error_; }

  void Matmul(float* out, const float* x, const Weights& w) override {
    Guarded(out, static_cast<size_t>(w.rows), [&] { return MatmulImpl(out, x, w, 1); });
  }
  void MatmulBatch(float* out, const float* x, const Weights& w, int T) override {
    Guarded(out, static_cast<size_t>(w.rows) * T, [&] { return MatmulImpl(out, x, w, T); });
  }
  // The KV caches live on the device, zeroed: tokens write one row each
  // (WriteCache) and attention reads them where they are. A failed
  // allocation is this backend's error (status()) and hands out host memory,
  // which nothing computes on, so the forward still ends in a named error.
  std::unique_ptr<StateBuffer> AllocateState(size_t floats) override {
    const std::string ctx = "KV cache of " + std::to_string(floats) + " floats";
    const size_t bytes = std::max<size_t>(floats, 1) * sizeof(float);
    DeviceBuffer buf;
    Status s = buf.Reserve(bytes, ctx);
    if (s.ok()) s = Zero(buf, bytes, ctx);
    if (s.ok()) return std::make_unique<DeviceState>(std::move(buf), floats);
    if (error_.ok()) error_ = std::move(s);
    return Backend::AllocateState(floats);
  }
  // `cache` is a DeviceState's pointer: the row goes up, the cache stays.
  void WriteCache(float* cache, size_t at, const float* row, int width) override {
    if (!error_.ok()) return;
    Status s = CopyToDevice(cache + at, row, static_cast<size_t>(width) * sizeof(float),
                            Ctx("KV cache write of " + std::to_string(width) + " floats"));
    if (!s.ok()) error_ = std::move(s);
  }
  void Attention(const AttentionArgs& a) override {
    Guarded(a.out, static_cast<size_t>(a.n_heads) * a.head_size, [&] { return AttentionImpl(a); });
  }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    Guarded(vec, static_cast<size_t>(size), [&] { return RopeImpl(vec, size, head_size, pos, inv_freq, interleaved); });
  }
  void SwiGLU(float* hb, const float* hb2, int n) override {
    Guarded(hb, static_cast<size_t>(n), [&] { return SwiGLUImpl(hb, hb2, n); });
  }

 private:
  // Runs `f` unless an earlier call failed; on any failure, records the first
  // error and fills the call's output with NaN (never a stale or partial result).
  template <class F>
  void Guarded(float* out, size_t n, F f) {
    if (error_.ok()) {
      Status s = f();
      if (!s.ok()) error_ = std::move(s);
    }
    if (!error_.ok()) std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
  }

  static Status Zero(DeviceBuffer& buf, size_t bytes, const std::string& ctx) {
    VERITY_CUDA_CALL(cudaMemset(buf.as<void>(), 0, bytes), ctx + " zeroing");
    return OkStatus();
  }

  // "layer 3 matmul rows=64 cols=288 T=1 dtype=bf16": what failed, for errors.
  std::string Ctx(const std::string& op) const {
    return (layer_ >= 0 ? "layer " + std::to_string(layer_) : std::string("classifier")) + " " + op;
  }

  // The device copy of `w`, uploaded on first use (see the file comment).
  Result<const void*> DeviceWeights(const Weights& w, const std::string& ctx) {
    DeviceMatrix& m = weights_[w.data];
    if (m.buf.bytes() == 0 || m.dtype != w.dtype || m.bytes < w.bytes()) {
      m.bytes = 0;
      VERITY_RETURN_IF_ERROR(m.buf.Reserve(w.bytes(), ctx + " weight upload"));
      // q8_0 rows interleave their blocks in groups for the CPU's int8 dot
      // (kernels.h); the device kernels read plain blocks by offset.
      const void* host = w.data;
      std::vector<unsigned char> plain;
      if (w.dtype == DType::kQ8_0) {
        plain.resize(w.bytes());
        kernels::UnpackQ8_0Rows(w, plain.data());
        host = plain.data();
      }
      VERITY_RETURN_IF_ERROR(CopyToDevice(m.buf.as<void>(), host, w.bytes(), ctx + " weight upload"));
      m.dtype = w.dtype;
      m.bytes = w.bytes();
    }
    return static_cast<const void*>(m.buf.as<void>());
  }

  Status MatmulImpl(float* out, const float* x, const Weights& w, int T) {
    const std::string ctx = Ctx("matmul rows=" + std::to_string(w.rows) + " cols=" + std::to_string(w.cols) +
                                " T=" + std::to_string(T) + " dtype=" + DTypeName(w.dtype));
    VERITY_ASSIGN_OR_RETURN(const void* dw, DeviceWeights(w, ctx));
    const size_t in_bytes = static_cast<size_t>(T) * w.cols * sizeof(float);
    const size_t out_bytes = static_cast<size_t>(T) * w.rows * sizeof(float);
    VERITY_RETURN_IF_ERROR(x_.Reserve(in_bytes, ctx));
    VERITY_RETURN_IF_ERROR(y_.Reserve(out_bytes, ctx));
    VERITY_RETURN_IF_ERROR(CopyToDevice(x_.as<void>(), x, in_bytes, ctx + " input"));
    if (w.dtype == DType::kF32) {
      VERITY_RETURN_IF_ERROR(CublasF32(dw, w.rows, w.cols, T, ctx));
    } else if (T == 1) {
      VERITY_ASSIGN_OR_RETURN(LaunchPlan plan, PlanMatvec(w.dtype, w.rows, w.cols, limits_));
      VERITY_RETURN_IF_ERROR(LaunchMatvec(plan, w.dtype, y_.as<float>(), dw, x_.as<float>(), w.rows, w.cols, 0, ctx));
    } else {
      VERITY_ASSIGN_OR_RETURN(LaunchPlan plan, PlanMatmulBatch(w.dtype, w.rows, w.cols, T, limits_));
      VERITY_RETURN_IF_ERROR(
          LaunchMatmulBatch(plan, w.dtype, y_.as<float>(), dw, x_.as<float>(), w.rows, w.cols, T, 0, ctx));
    }
    return CopyToHost(out, y_.as<void>(), out_bytes, ctx + " output");
  }

  // Row-major W [rows x cols] is column-major W^T with leading dimension cols:
  // y = W x is gemv with op T; Y^T [rows x T] = W X^T is gemm (T, N).
  Status CublasF32(const void* dw, int rows, int cols, int T, const std::string& ctx) {
    const float one = 1.0f, zero = 0.0f;
    const float* W = static_cast<const float*>(dw);
    if (T == 1) {
      VERITY_CUBLAS_CALL(
          cublasSgemv(cublas_, CUBLAS_OP_T, cols, rows, &one, W, cols, x_.as<float>(), 1, &zero, y_.as<float>(), 1),
          ctx);
    } else {
      VERITY_CUBLAS_CALL(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, cols, &one, W, cols, x_.as<float>(),
                                     cols, &zero, y_.as<float>(), rows),
                         ctx);
    }
    return OkStatus();
  }

  Status AttentionImpl(const AttentionArgs& a) {
    const std::string ctx = Ctx("attention pos=" + std::to_string(a.pos) + " heads=" + std::to_string(a.n_heads) +
                                " head_size=" + std::to_string(a.head_size));
    VERITY_ASSIGN_OR_RETURN(LaunchPlan plan,
                            PlanAttention(a.n_heads, a.n_kv_heads, a.head_size, 1, int64_t{a.pos} + 1, limits_));
    const size_t q_floats = static_cast<size_t>(a.n_heads) * a.head_size;
    VERITY_RETURN_IF_ERROR(x_.Reserve(q_floats * sizeof(float), ctx));
    VERITY_RETURN_IF_ERROR(y_.Reserve(q_floats * sizeof(float), ctx));
    VERITY_RETURN_IF_ERROR(CopyToDevice(x_.as<void>(), a.q, q_floats * sizeof(float), ctx + " queries"));
    // The caches are this backend's DeviceStates (AllocateState): read in place.
    AttentionDeviceArgs d{y_.as<float>(), x_.as<float>(), a.key_cache, a.value_cache, a.pos_stride,
                          static_cast<int64_t>(q_floats), a.pos, 1, a.n_heads, a.n_kv_heads, a.head_size};
    VERITY_RETURN_IF_ERROR(LaunchAttention(plan, d, 0, ctx));
    return CopyToHost(a.out, y_.as<void>(), q_floats * sizeof(float), ctx + " output");
  }

  // The per-pair cosine and sine at `pos`, from the model's inverse-frequency
  // table, computed on the host with the reference's own arithmetic (so the
  // device rotation is bit-exact with RopeReference).
  Status RopeImpl(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) {
    const std::string ctx = Ctx("rope pos=" + std::to_string(pos) + " size=" + std::to_string(size));
    VERITY_ASSIGN_OR_RETURN(LaunchPlan plan, PlanRope(1, size, head_size, limits_));
    const size_t half = static_cast<size_t>(head_size / 2);
    cos_sin_.resize(half * 2);
    for (size_t i = 0; i < half; i++) {
      const float val = static_cast<float>(pos) * inv_freq[i];
      cos_sin_[2 * i] = cosf(val);
      cos_sin_[2 * i + 1] = sinf(val);
    }
    const size_t bytes = static_cast<size_t>(size) * sizeof(float);
    VERITY_RETURN_IF_ERROR(x_.Reserve(bytes, ctx));
    VERITY_RETURN_IF_ERROR(k_.Reserve(cos_sin_.size() * sizeof(float), ctx));
    VERITY_RETURN_IF_ERROR(CopyToDevice(x_.as<void>(), vec, bytes, ctx + " vector"));
    VERITY_RETURN_IF_ERROR(CopyToDevice(k_.as<void>(), cos_sin_.data(), cos_sin_.size() * sizeof(float), ctx + " table"));
    VERITY_RETURN_IF_ERROR(LaunchRope(plan, x_.as<float>(), k_.as<float>(), 1, size, head_size, interleaved, 0, ctx));
    return CopyToHost(vec, x_.as<void>(), bytes, ctx + " output");
  }

  Status SwiGLUImpl(float* hb, const float* hb2, int n) {
    const std::string ctx = Ctx("swiglu n=" + std::to_string(n));
    VERITY_ASSIGN_OR_RETURN(LaunchPlan plan, PlanSwiGLU(n, limits_));
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    VERITY_RETURN_IF_ERROR(x_.Reserve(bytes, ctx));
    VERITY_RETURN_IF_ERROR(y_.Reserve(bytes, ctx));
    VERITY_RETURN_IF_ERROR(CopyToDevice(x_.as<void>(), hb, bytes, ctx + " gate"));
    VERITY_RETURN_IF_ERROR(CopyToDevice(y_.as<void>(), hb2, bytes, ctx + " up"));
    VERITY_RETURN_IF_ERROR(LaunchSwiGLU(plan, x_.as<float>(), y_.as<float>(), n, 0, ctx));
    return CopyToHost(hb, x_.as<void>(), bytes, ctx + " output");
  }

  DeviceLimits limits_;
  cublasHandle_t cublas_;
  int layer_ = -1;
  Status error_;
  std::unordered_map<const void*, DeviceMatrix> weights_;
  std::vector<float> cos_sin_;
  DeviceBuffer x_, y_, k_;  // per-call activation scratch (grow-only)
};

// The device's limits and a one-line description with its peak memory bandwidth.
Status DescribeDevice(int dev, DeviceLimits* lim, std::string* line) {
  cudaDeviceProp p{};
  VERITY_CUDA_CALL(cudaGetDeviceProperties(&p, dev), "--backend cuda: device properties");
  int clock_khz = 0, bus_bits = 0;
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev), "--backend cuda: memory clock");
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev), "--backend cuda: bus width");
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

Result<std::unique_ptr<Backend>> MakeCudaBackend() {
  int count = 0;
  VERITY_RETURN_IF_ERROR(CountDevices(&count));
  VERITY_CUDA_CALL(cudaSetDevice(0), "--backend cuda: selecting device 0");
  DeviceLimits lim;
  std::string line;
  VERITY_RETURN_IF_ERROR(DescribeDevice(0, &lim, &line));
  VERITY_RETURN_IF_ERROR(Probe(lim));
  cublasHandle_t handle = nullptr;
  VERITY_CUBLAS_CALL(cublasCreate(&handle), "--backend cuda: cuBLAS");
  auto backend = std::make_unique<CudaBackend>(lim, handle);  // owns the handle from here on
  VERITY_RETURN_IF_ERROR(backend->Init());
  std::fprintf(stderr, "%s\n", line.c_str());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace verity::kernels::cuda
