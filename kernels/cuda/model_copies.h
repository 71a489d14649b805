// The device copies of what the model owns on the host: weight matrices,
// norm weights and the embedding table (uploaded once, on first use, keyed by
// the host pointer), and RoPE's cosines and sines per position. A backend
// serves one Transformer, whose Model outlives it and whose weights do not
// change after loading. A copy that has to move (a hit of another dtype or
// fewer bytes, a RoPE table that grows) tells the backend first (`moved`), so
// no recorded graph reads the old one. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/kernels.h"

namespace verity::kernels::cuda {

class ModelCopies {
 public:
  // Uploads go on `stream` (the backend's: kernels queued after them read
  // them). A weight matrix goes through two pinned buffers of up to
  // `staging_bytes` each (staged_upload.h), allocated at its first upload.
  static constexpr size_t kStagingBytes = size_t{64} << 20;
  ModelCopies(cudaStream_t stream, std::function<void()> moved, size_t staging_bytes = kStagingBytes)
      : stream_(stream), moved_(std::move(moved)), staging_bytes_(staging_bytes) {}
  ~ModelCopies();
  ModelCopies(const ModelCopies&) = delete;
  ModelCopies& operator=(const ModelCopies&) = delete;

  // The device copy of `w`'s matrix; q8_0 repacked into the device layout
  // (q8_layout.h), other types as the host holds them.
  Result<const void*> Weights(const kernels::Weights& w);
  // `n` floats the model owns (a norm's weights, the embedding table).
  Result<const float*> Floats(const float* host, size_t n, const char* what);
  // cos and sin of every pair (head_size / 2 of them) at positions [0,
  // positions), from the model's inverse-frequency table: position p's row
  // at p * head_size floats. Computed on the host with the reference's own
  // cosf/sinf (so the device rotation is bit-exact with RopeReference) and
  // grown by doubling, 1024 positions at first.
  Result<const float*> RopeTable(const float* inv_freq, int head_size, int positions);
  // How many uploads were issued so far: a call that moved it paid a copy's
  // upload (the profile sets such calls apart).
  uint64_t uploads() const { return uploads_; }
  // The weights' uploads in one line (bytes, the host's seconds in them, and
  // how they went: staged, or from pageable memory and why); empty before any.
  std::string Summary() const;

 private:
  struct Copy {
    DeviceBuffer buf;
    DType dtype = DType::kF32;
    size_t bytes = 0;   // valid bytes (a matrix, floats)
    int positions = 0;  // positions covered (a RoPE table)
  };
  // A staging buffer and the event after its last queued copies.
  struct Slot {
    unsigned char* host = nullptr;  // pinned
    cudaEvent_t done = nullptr;
    bool pending = false;  // copies queued since `done` was last waited for
  };
  static constexpr int kSlots = 2;
  Status Upload(Copy& c, const void* host, size_t bytes, const char* what);
  // w's device layout into c's buffer through the slots. An error with
  // *queued false is a reason not to stage (no pinned memory); with it true,
  // a failure.
  Status UploadStaged(Copy& c, const kernels::Weights& w, bool* queued);
  Status UploadPageable(Copy& c, const kernels::Weights& w);
  Status ReserveSlots(size_t want, size_t row_bytes);
  Status WaitSlot(Slot& s);
  static void FreeSlots(Slot (&slots)[kSlots]);

  cudaStream_t stream_;
  std::function<void()> moved_;
  size_t staging_bytes_;
  Slot slots_[kSlots];
  size_t slot_bytes_ = 0;
  int next_slot_ = 0;
  std::string refused_;   // why pinned staging memory was refused (then never asked again)
  std::string unstaged_;  // why the last weight went from pageable memory
  uint64_t weight_bytes_ = 0, staged_weights_ = 0, pageable_weights_ = 0;
  double weight_seconds_ = 0;  // the host's, in Weights()' uploads
  uint64_t uploads_ = 0;
  std::unordered_map<const void*, Copy> weights_, floats_, rope_;
};

}  // namespace verity::kernels::cuda
