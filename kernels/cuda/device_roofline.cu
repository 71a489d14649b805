// The device roofline's two loops; see device_roofline.h.
#include "kernels/cuda/device_roofline.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/check.h"

namespace verity::kernels::cuda {
namespace {

// Device memory freed on scope exit (a failure is printed: destructors cannot return it).
struct DeviceMemory {
  void* p = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (p) VERITY_CUDA_CALL_LOG(cudaFree(p), "roofline: free");
  }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() = default;
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    if (start) VERITY_CUDA_CALL_LOG(cudaEventDestroy(start), "roofline: event");
    if (stop) VERITY_CUDA_CALL_LOG(cudaEventDestroy(stop), "roofline: event");
  }
};

struct Blas {
  cublasHandle_t h = nullptr;
  Blas() = default;
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas() {
    if (h) VERITY_CUBLAS_CALL_LOG(cublasDestroy(h), "roofline: cublas");
  }
};

// Reads every 16-byte word of p once per pass, four loads in flight per
// thread per step. The XOR of everything read decides a store that (with the
// buffer's pattern) never happens, so no load can be dropped.
__global__ void StreamRead(const int4* __restrict__ p, size_t n, unsigned int* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
               d = __ldg(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const int4 a = __ldg(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x13579bdf) atomicAdd(sink, 1u);
}

// Values in [-1, 1], different per element: tensor cores on all-zero inputs
// draw less power and may clock higher than on real weights.
__global__ void FillBf16(__nv_bfloat16* p, size_t n, unsigned int seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned int h = static_cast<unsigned int>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(static_cast<float>(h % 2001u) / 1000.0f - 1.0f);
  }
}

Status Describe(DeviceMeasurement* m) {
  const std::string ctx = "roofline: device 0";
  cudaDeviceProp p{};
  VERITY_CUDA_CALL(cudaGetDeviceProperties(&p, 0), ctx);
  int clock_khz = 0, bus_bits = 0;
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0), ctx);
  VERITY_CUDA_CALL(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0), ctx);
  m->name = p.name;
  char hex[33];
  for (int i = 0; i < 16; i++) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(p.uuid.bytes[i]));
  m->uuid = hex;
  m->sm_major = p.major;
  m->sm_minor = p.minor;
  m->sms = p.multiProcessorCount;
  m->nominal_gb_s = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate over the whole bus
  return OkStatus();
}

// Milliseconds between the events, after the work between them finished.
Status ElapsedMs(const Events& ev, float* ms, const std::string& ctx) {
  VERITY_CUDA_CALL(cudaEventSynchronize(ev.stop), ctx);
  VERITY_CUDA_CALL(cudaEventElapsedTime(ms, ev.start, ev.stop), ctx);
  return OkStatus();
}

Status MeasureRead(const DeviceRooflineOptions& o, DeviceMeasurement* m) {
  const std::string ctx = "roofline: read bandwidth";
  size_t free_bytes = 0, total_bytes = 0;
  VERITY_CUDA_CALL(cudaMemGetInfo(&free_bytes, &total_bytes), ctx);
  const uint64_t bytes = std::min<uint64_t>(o.buffer_bytes, free_bytes / 2) / 16 * 16;
  if (bytes < (uint64_t{256} << 20))
    return Status::Error(ctx + ": only " + std::to_string(free_bytes >> 20) +
                         " MiB free on the device; at least 512 MiB must be free");
  DeviceMemory buf, sink;
  VERITY_CUDA_CALL(cudaMalloc(&buf.p, bytes), ctx + " (" + std::to_string(bytes >> 20) + " MiB)");
  VERITY_CUDA_CALL(cudaMalloc(&sink.p, sizeof(unsigned int)), ctx);
  VERITY_CUDA_CALL(cudaMemset(buf.p, 0x5a, bytes), ctx);
  VERITY_CUDA_CALL(cudaMemset(sink.p, 0, sizeof(unsigned int)), ctx);
  Events ev;
  VERITY_CUDA_CALL(cudaEventCreate(&ev.start), ctx);
  VERITY_CUDA_CALL(cudaEventCreate(&ev.stop), ctx);
  // Enough resident threads to keep every SM's loads in flight: 2048 a SM.
  const int threads = 256, blocks = m->sms * (2048 / threads);
  const size_t words = bytes / 16;
  m->buffer_bytes = bytes;
  for (int r = -1; r < o.repetitions; r++) {  // pass -1 warms up, untimed
    VERITY_CUDA_CALL(cudaEventRecord(ev.start), ctx);
    StreamRead<<<blocks, threads>>>(static_cast<const int4*>(buf.p), words, static_cast<unsigned int*>(sink.p));
    VERITY_CUDA_LAUNCH_CHECK("StreamRead", ctx);
    VERITY_CUDA_CALL(cudaEventRecord(ev.stop), ctx);
    float ms = 0;
    VERITY_RETURN_IF_ERROR(ElapsedMs(ev, &ms, ctx));
    if (r >= 0) m->read_gb_s.push_back(static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  return OkStatus();
}

Status MeasureGemm(const DeviceRooflineOptions& o, DeviceMeasurement* m) {
  const std::string ctx = "roofline: bf16 GEMM";
  const size_t n = static_cast<size_t>(o.gemm_n), elems = n * n;
  DeviceMemory a, b, c;
  VERITY_CUDA_CALL(cudaMalloc(&a.p, elems * sizeof(__nv_bfloat16)), ctx);
  VERITY_CUDA_CALL(cudaMalloc(&b.p, elems * sizeof(__nv_bfloat16)), ctx);
  VERITY_CUDA_CALL(cudaMalloc(&c.p, elems * sizeof(__nv_bfloat16)), ctx);
  const int threads = 256, blocks = m->sms * 8;
  FillBf16<<<blocks, threads>>>(static_cast<__nv_bfloat16*>(a.p), elems, 1u);
  VERITY_CUDA_LAUNCH_CHECK("FillBf16", ctx);
  FillBf16<<<blocks, threads>>>(static_cast<__nv_bfloat16*>(b.p), elems, 2u);
  VERITY_CUDA_LAUNCH_CHECK("FillBf16", ctx);
  Blas blas;
  VERITY_CUBLAS_CALL(cublasCreate(&blas.h), ctx);
  Events ev;
  VERITY_CUDA_CALL(cudaEventCreate(&ev.start), ctx);
  VERITY_CUDA_CALL(cudaEventCreate(&ev.stop), ctx);
  const float alpha = 1.0f, beta = 0.0f;
  const int dim = o.gemm_n;
  m->gemm_n = dim;
  for (int r = -1; r < o.gemm_repetitions; r++) {  // the first one warms up (and picks cuBLAS's kernel), untimed
    VERITY_CUDA_CALL(cudaEventRecord(ev.start), ctx);
    VERITY_CUBLAS_CALL(
        cublasGemmEx(blas.h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a.p, CUDA_R_16BF, dim, b.p, CUDA_R_16BF,
                     dim, &beta, c.p, CUDA_R_16BF, dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        ctx);
    VERITY_CUDA_CALL(cudaEventRecord(ev.stop), ctx);
    float ms = 0;
    VERITY_RETURN_IF_ERROR(ElapsedMs(ev, &ms, ctx));
    if (r >= 0) m->bf16_tflops.push_back(2.0 * n * n * n / (ms * 1e-3) / 1e12);
  }
  return OkStatus();
}

}  // namespace

Result<DeviceMeasurement> MeasureDeviceRoofline(const DeviceRooflineOptions& options) {
  if (options.repetitions < 1 || options.gemm_repetitions < 1 || options.gemm_n < 256 || options.gemm_n % 256 != 0)
    return Status::Error(
        "roofline: --backend cuda needs >= 1 repetition of each loop and a GEMM size that is a "
        "multiple of 256 (got " +
        std::to_string(options.gemm_n) + ")");
  if (options.buffer_bytes < (uint64_t{256} << 20))
    return Status::Error(
        "roofline: a " + std::to_string(options.buffer_bytes >> 20) +
        " MiB read buffer could sit in a GPU's cache; --buffer-mb must be at least 256 with --backend cuda");
  int count = 0;
  VERITY_CUDA_CALL(cudaGetDeviceCount(&count), "roofline: no usable CUDA device");
  if (count == 0) return Status::Error("roofline: no CUDA device found (cudaGetDeviceCount: 0 devices)");
  DeviceMeasurement m;
  VERITY_RETURN_IF_ERROR(Describe(&m));
  VERITY_RETURN_IF_ERROR(MeasureRead(options, &m));
  VERITY_RETURN_IF_ERROR(MeasureGemm(options, &m));
  return m;
}

}  // namespace verity::kernels::cuda
