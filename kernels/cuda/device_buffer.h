// Device memory the CUDA backend owns: a grow-only buffer, and forward state
// (a StateBuffer) held in one. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "base/cuda_check.h"
#include "base/status.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda {

// A grow-only device allocation, freed (checked) when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  ~DeviceBuffer() { Release(); }

  // Ensures at least `bytes` are allocated on the current device (the old
  // contents are not kept; cudaFree waits for the work that may still read them).
  Status Reserve(size_t bytes, const std::string& ctx) {
    if (bytes <= bytes_) return OkStatus();
    Release();
    VERITY_CUDA_CALL(cudaGetDevice(&device_), ctx);
    VERITY_CUDA_CALL(cudaMalloc(&p_, bytes), ctx + " (" + std::to_string(bytes) + " bytes)");
    bytes_ = bytes;
    return OkStatus();
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  // Freed on the device it came from: a tensor-parallel rank's state may be
  // freed on a thread where another rank's device is current.
  void Release() {
    if (p_) {
      int current = -1;
      VERITY_CUDA_CALL_LOG(cudaGetDevice(&current), "freeing a device buffer");
      const bool moved = current >= 0 && current != device_;
      if (moved) VERITY_CUDA_CALL_LOG(cudaSetDevice(device_), "freeing a device buffer");
      VERITY_CUDA_CALL_LOG(cudaFree(p_), "freeing a device buffer");
      if (moved) VERITY_CUDA_CALL_LOG(cudaSetDevice(current), "freeing a device buffer");
    }
    p_ = nullptr;
    bytes_ = 0;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

// Forward state kept in device memory: data() is a device pointer, which only
// this backend's calls take.
class DeviceState final : public StateBuffer {
 public:
  DeviceState(DeviceBuffer buf, size_t floats) : buf_(std::move(buf)), floats_(floats) {}
  float* data() override { return buf_.as<float>(); }
  size_t floats() const override { return floats_; }

 private:
  DeviceBuffer buf_;
  size_t floats_;
};

}  // namespace verity::kernels::cuda
