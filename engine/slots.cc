// SlotDecoder, first version: one Transformer per slot over one shared
// backend, and a Step that runs each slot's position by itself. Batch
// invariance holds by construction (each row is that slot's Forward); the
// weights are read once per slot per step, which the batched step replaces.
#include "engine/slots.h"

#include <cstring>
#include <new>

namespace verity {
namespace {

// Lends one backend (and its thread pool) to several Transformers.
class BorrowedBackend final : public kernels::Backend {
 public:
  explicit BorrowedBackend(kernels::Backend& b) : b_(b) {}
  const char* name() const override { return b_.name(); }
  void Matmul(float* out, const float* x, const kernels::Weights& w) override { b_.Matmul(out, x, w); }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    b_.MatmulBatch(out, x, w, T);
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    b_.MatmulShared(x, T, targets, count);
  }
  void Attention(const kernels::AttentionArgs& a) override { b_.Attention(a); }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    b_.Rope(vec, size, head_size, pos, inv_freq, interleaved);
  }
  void SwiGLU(float* hb, const float* hb2, int n) override { b_.SwiGLU(hb, hb2, n); }
  std::optional<PoolCounters> pool_counters() const override { return b_.pool_counters(); }
  void BeginLayer(int layer) override { b_.BeginLayer(layer); }
  Status status() const override { return b_.status(); }

 private:
  kernels::Backend& b_;
};

class PerSlotDecoder final : public SlotDecoder {
 public:
  PerSlotDecoder(const Model& m, std::unique_ptr<kernels::Backend> b) : model_(m), backend_(std::move(b)) {}

  Status Init(int slots) {
    for (int s = 0; s < slots; s++) {
      auto t = Transformer::Create(model_, std::make_unique<BorrowedBackend>(*backend_));
      if (!t.ok())
        return Status::Error("--parallel " + std::to_string(slots) + ": slot " + std::to_string(s) + ": " +
                             t.status().message());
      slots_.push_back(std::move(t).value());
    }
    return OkStatus();
  }

  int slots() const override { return static_cast<int>(slots_.size()); }
  int context() const override { return model_.config.seq_len; }
  const Model& model() const override { return model_; }
  const char* backend_name() const override { return backend_->name(); }
  size_t kv_cache_bytes() const override { return slots_.size() * FootprintOf(model_).kv_cache_bytes; }

  const float* Prefill(int slot, const int* tokens, int T, int pos0) override {
    return slots_[slot]->Prefill(tokens, T, pos0);
  }
  void Step(const int* slot, const int* token, const int* pos, int n, float* logits) override {
    const size_t vocab = model_.config.vocab_size;
    for (int i = 0; i < n; i++)
      std::memcpy(logits + i * vocab, slots_[slot[i]]->Forward(token[i], pos[i]), vocab * sizeof(float));
  }
  Status status() const override { return backend_->status(); }

 private:
  const Model& model_;
  std::unique_ptr<kernels::Backend> backend_;
  std::vector<std::unique_ptr<Transformer>> slots_;
};

}  // namespace

Result<std::unique_ptr<SlotDecoder>> SlotDecoder::Create(const Model& model, std::unique_ptr<kernels::Backend> backend,
                                                         int slots) {
  if (slots < 1) return Status::Error("--parallel must be at least 1, got " + std::to_string(slots));
  auto d = std::make_unique<PerSlotDecoder>(model, std::move(backend));
  VERITY_RETURN_IF_ERROR(d->Init(slots));
  return std::unique_ptr<SlotDecoder>(std::move(d));
}

}  // namespace verity
