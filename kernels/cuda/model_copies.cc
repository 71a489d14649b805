// See model_copies.h.
#include "kernels/cuda/model_copies.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/q8_upload.h"

namespace verity::kernels::cuda {

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
    const void* host = w.data;
    std::unique_ptr<unsigned char[]> repacked;
    if (w.dtype == DType::kQ8_0) {                   // the device layout (q8_layout.h): the same bytes
      repacked.reset(new unsigned char[w.bytes()]);  // every byte written: no zeroing pass
      q8::RepackMatrix(w, repacked.get(), LoadThreads());
      host = repacked.get();
    }
    if (c.bytes != 0) moved_();  // rewritten or moved: no graph may read the old copy
    VERITY_RETURN_IF_ERROR(Upload(c, host, w.bytes(), "weight"));
    c.dtype = w.dtype;
  }
  return static_cast<const void*>(c.buf.as<void>());
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
