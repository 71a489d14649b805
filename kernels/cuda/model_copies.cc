// See model_copies.h.
#include "kernels/cuda/model_copies.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/q8_upload.h"
#include "kernels/cuda/staged_upload.h"

namespace verity::kernels::cuda {

ModelCopies::~ModelCopies() { FreeSlots(slots_); }

// Pageable host memory is staged before cudaMemcpyAsync returns, so `host`
// may go at once; on the backend's stream, so the kernels queued after it read it.
Status ModelCopies::Upload(Copy& c, const void* host, size_t bytes, const char* what) {
  c.bytes = 0;
  VERITY_RETURN_IF_ERROR(c.buf.Reserve(bytes, std::string(what) + " upload"));
  VERITY_CUDA_CALL(cudaMemcpyAsync(c.buf.as<void>(), host, bytes, cudaMemcpyHostToDevice, stream_),
                   std::string(what) + " upload");
  c.bytes = bytes;
  uploads_++;
  return OkStatus();
}

Result<const void*> ModelCopies::Weights(const kernels::Weights& w) {
  Copy& c = weights_[w.data];
  if (c.bytes == 0 || c.dtype != w.dtype || c.bytes < w.bytes()) {
    // Never inside a capture: a copy there (pinned or pageable) would be
    // recorded into the graph and replayed from a buffer that by then holds
    // other bytes, and the device buffer's growth would break the capture.
    // No step reaches it (a signature's first step runs as issued and
    // uploads what it names); one that did is refused, and the step then runs
    // as issued (CudaBackend::RunUnderCapture), where the upload is allowed.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    VERITY_CUDA_CALL(cudaStreamIsCapturing(stream_, &capture), "weight upload");
    if (capture != cudaStreamCaptureStatusNone)
      return Status::Error(
          "weight upload: the backend's stream is being captured (a matrix's first use in a "
          "recorded step)");
    if (c.bytes != 0) moved_();  // rewritten or moved: no graph may read the old copy
    const auto t0 = std::chrono::steady_clock::now();
    c.bytes = 0;
    VERITY_RETURN_IF_ERROR(c.buf.Reserve(w.bytes(), "weight upload (" + std::to_string(w.bytes()) + " bytes)"));
    bool queued = false;
    Status staged = UploadStaged(c, w, &queued);
    if (!staged.ok()) {
      if (queued) {  // a real failure (c stays empty); no copy may still read a staging buffer after it
        VERITY_CUDA_CALL_LOG(cudaStreamSynchronize(stream_), "a failed weight upload");
        return staged;
      }
      unstaged_ = staged.message();
      VERITY_RETURN_IF_ERROR(UploadPageable(c, w));
      pageable_weights_++;
    } else {
      staged_weights_++;
    }
    c.bytes = w.bytes();
    c.dtype = w.dtype;
    uploads_++;
    weight_bytes_ += w.bytes();
    weight_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return static_cast<const void*>(c.buf.as<void>());
}

// Staging needs pinned buffers: refused, it returns an error with *queued
// false, and the caller goes the pageable way; once a copy is queued
// (*queued), an error is a failure the caller returns.
Status ModelCopies::UploadStaged(Copy& c, const kernels::Weights& w, bool* queued) {
  VERITY_RETURN_IF_ERROR(ReserveSlots(staged::BufferBytes(w, staging_bytes_), w.row_bytes()));
  const auto acquire = [this](int slot) -> Result<unsigned char*> {
    VERITY_RETURN_IF_ERROR(WaitSlot(slots_[slot]));
    return slots_[slot].host;
  };
  unsigned char* to = c.buf.as<unsigned char>();
  const auto send = [&](const staged::Piece& p, const unsigned char* buffer) -> Status {
    *queued = true;
    VERITY_CUDA_CALL(cudaMemcpyAsync(to + p.dst, buffer + p.src, p.bytes, cudaMemcpyHostToDevice, stream_),
                     "weight upload (staged)");
    return OkStatus();
  };
  const auto sent = [this](int slot) -> Status {
    VERITY_CUDA_CALL(cudaEventRecord(slots_[slot].done, stream_), "weight upload (staged)");
    slots_[slot].pending = true;
    return OkStatus();
  };
  return staged::Upload(w, staged::RowsPerBuffer(w, slot_bytes_), kSlots, LoadThreads(), &next_slot_, acquire, send,
                        sent);
}

Status ModelCopies::UploadPageable(Copy& c, const kernels::Weights& w) {
  const void* host = w.data;
  std::unique_ptr<unsigned char[]> repacked;
  if (w.dtype == DType::kQ8_0) {                   // the device layout (q8_layout.h): the same bytes
    repacked.reset(new unsigned char[w.bytes()]);  // every byte written: no zeroing pass
    q8::RepackMatrix(w, repacked.get(), LoadThreads());
    host = repacked.get();
  }
  VERITY_CUDA_CALL(cudaMemcpyAsync(c.buf.as<void>(), host, w.bytes(), cudaMemcpyHostToDevice, stream_),
                   "weight upload");
  return OkStatus();
}

// Slots of `want` bytes where they are smaller (grown at least twofold, up
// to the staging size, so a model's growing matrices regrow them a few
// times at most). New slots are made before the old ones go: where pinned
// memory is refused, the old slots stay if they hold a row (smaller
// buffers, more of them), else staging is off for good (the reason kept:
// no retry per matrix).
Status ModelCopies::ReserveSlots(size_t want, size_t row_bytes) {
  if (!refused_.empty()) return Status::Error(refused_);
  if (want <= slot_bytes_) return OkStatus();
  const size_t bytes = std::max(want, std::min(staging_bytes_, 2 * slot_bytes_));
  Slot fresh[kSlots];
  const Status made = [&]() -> Status {
    for (Slot& s : fresh) {
      void* p = nullptr;
      VERITY_CUDA_CALL(cudaHostAlloc(&p, bytes, cudaHostAllocDefault),
                       "pinned staging for weight uploads (" + std::to_string(bytes) + " bytes)");
      s.host = static_cast<unsigned char*>(p);
      VERITY_CUDA_CALL(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "weight upload staging event");
    }
    return OkStatus();
  }();
  if (!made.ok()) {
    FreeSlots(fresh);
    if (slot_bytes_ == 0) {  // none at all: staging is off for good
      refused_ = made.message();
      return made;
    }
    staging_bytes_ = slot_bytes_;                         // no larger ones asked for again
    return slot_bytes_ >= row_bytes ? OkStatus() : made;  // a row that does not fit goes pageable, alone
  }
  FreeSlots(slots_);
  for (int i = 0; i < kSlots; i++) slots_[i] = fresh[i];
  slot_bytes_ = bytes;
  return OkStatus();
}

Status ModelCopies::WaitSlot(Slot& s) {
  if (s.pending) {
    VERITY_CUDA_CALL(cudaEventSynchronize(s.done), "weight upload (waiting for a staging buffer)");
    s.pending = false;
  }
  return OkStatus();
}

// Each buffer is freed after its copies are done (cudaFreeHost of memory a
// queued copy reads would race it); a slot half made is freed as far as it got.
void ModelCopies::FreeSlots(Slot (&slots)[kSlots]) {
  for (Slot& s : slots) {
    if (s.pending) VERITY_CUDA_CALL_LOG(cudaEventSynchronize(s.done), "freeing a staging buffer");
    if (s.done) VERITY_CUDA_CALL_LOG(cudaEventDestroy(s.done), "freeing a staging buffer");
    if (s.host) VERITY_CUDA_CALL_LOG(cudaFreeHost(s.host), "freeing a staging buffer");
    s = Slot{};
  }
}

std::string ModelCopies::Summary() const {
  if (staged_weights_ + pageable_weights_ == 0) return "";
  char line[512];
  std::snprintf(line, sizeof line, "%llu weight matrices, %.2f GB, uploaded in %.2f s of the host (%.1f GB/s): ",
                static_cast<unsigned long long>(staged_weights_ + pageable_weights_), weight_bytes_ / 1e9,
                weight_seconds_, weight_seconds_ > 0 ? weight_bytes_ / 1e9 / weight_seconds_ : 0.0);
  std::string s = line;
  if (staged_weights_ > 0)
    s += std::to_string(staged_weights_) + " staged through " + std::to_string(kSlots) + " pinned buffers of " +
         (slot_bytes_ >= (size_t{1} << 20) ? std::to_string(slot_bytes_ >> 20) + " MiB"
                                           : std::to_string((slot_bytes_ + 1023) >> 10) + " KiB");
  if (pageable_weights_ > 0)
    s += std::string(staged_weights_ > 0 ? ", " : "") + std::to_string(pageable_weights_) +
         " from pageable memory (last: " + unstaged_ + ")";
  return s;
}

Result<const float*> ModelCopies::Floats(const float* host, size_t n, const char* what) {
  Copy& c = floats_[host];
  const size_t bytes = n * sizeof(float);
  if (c.bytes < bytes) {
    if (c.bytes != 0) moved_();
    VERITY_RETURN_IF_ERROR(Upload(c, host, bytes, what));
  }
  return c.buf.as<const float>();
}

Result<const float*> ModelCopies::RopeTable(const float* inv_freq, int head_size, int positions) {
  Copy& c = rope_[inv_freq];
  if (positions > c.positions) {
    if (c.positions != 0) moved_();
    const int half = head_size / 2, grown = std::max({positions, 2 * c.positions, 1024});
    std::vector<float> cos_sin(static_cast<size_t>(grown) * half * 2);
    for (int p = 0; p < grown; p++)
      for (int i = 0; i < half; i++) {
        const float val = static_cast<float>(p) * inv_freq[i];
        cos_sin[(static_cast<size_t>(p) * half + i) * 2] = cosf(val);
        cos_sin[(static_cast<size_t>(p) * half + i) * 2 + 1] = sinf(val);
      }
    c.positions = 0;
    VERITY_RETURN_IF_ERROR(Upload(c, cos_sin.data(), cos_sin.size() * sizeof(float), "rope table"));
    c.positions = grown;
  }
  return c.buf.as<const float>();
}

}  // namespace verity::kernels::cuda
