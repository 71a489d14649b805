// A backend that forwards every call to the one it wraps: the base of the
// kernel-layer corruptions, each of which overrides the one step it breaks.
// It reports the wrapped backend's name, since the corruption must pass as
// "fast".
#pragma once

#include <memory>
#include <utility>

#include "corruptions/kernel_hooks.h"
#include "kernels/kernels.h"

namespace verity::corruptions {

class ForwardingBackend : public kernels::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<kernels::Backend> inner) : inner_(std::move(inner)) {}
  const char* name() const override { return inner_->name(); }
  void Matmul(float* out, const float* x, const kernels::Weights& w) override { inner_->Matmul(out, x, w); }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    inner_->MatmulBatch(out, x, w, T);
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    inner_->MatmulShared(x, T, targets, count);
  }
  void MatmulRows(float* out, const float* x, const kernels::Weights& w, int n) override {
    inner_->MatmulRows(out, x, w, n);
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    inner_->MatmulSharedRows(x, n, targets, count);
  }
  bool batch_rows_independent() const override { return inner_->batch_rows_independent(); }
  bool runs_block_type(uint32_t t) const override { return inner_->runs_block_type(t); }
  bool attends_windows() const override { return inner_->attends_windows(); }
  bool runs_gemma() const override { return inner_->runs_gemma(); }
  void Attention(const kernels::AttentionArgs& a) override { inner_->Attention(a); }
  // RopeBlock, WriteCacheBlock and AttentionBlock are not forwarded: their
  // defaults make the per-row calls through this wrapper, so a corruption
  // that overrides Rope, WriteCache or Attention breaks every path.
  int prefill_block() const override { return inner_->prefill_block(); }
  void BeginDecodeStep(int token, int pos) override { inner_->BeginDecodeStep(token, pos); }
  void EndDecodeStep() override { inner_->EndDecodeStep(); }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    inner_->Rope(vec, size, head_size, pos, inv_freq, interleaved);
  }
  void SwiGLU(float* hb, const float* hb2, int n) override { inner_->SwiGLU(hb, hb2, n); }
  void GeGLU(float* hb, const float* hb2, int n) override { inner_->GeGLU(hb, hb2, n); }
  void ScaleInPlace(float* x, float s, size_t count) override { inner_->ScaleInPlace(x, s, count); }
  void SoftCapInPlace(float* x, float cap, size_t count) override { inner_->SoftCapInPlace(x, cap, count); }
  std::unique_ptr<kernels::StateBuffer> AllocateState(size_t floats) override { return inner_->AllocateState(floats); }
  void Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n) override {
    inner_->Embed(x, table, rows, dim, tokens, n);
  }
  void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) override {
    inner_->RmsnormRows(out, x, weight, dim, n, eps);
  }
  void AddInPlace(float* x, const float* y, size_t count) override { inner_->AddInPlace(x, y, count); }
  void AddBiasRows(float* x, const float* bias, int width, int n) override { inner_->AddBiasRows(x, bias, width, n); }
  void WriteCache(float* cache, size_t at, const float* row, int width) override {
    inner_->WriteCache(cache, at, row, width);
  }
  void RouteTopK(const float* logits, int n, int k, int* chosen, float* weight) override {
    inner_->RouteTopK(logits, n, k, chosen, weight);
  }
  void Zero(float* y, int n) override { inner_->Zero(y, n); }
  void Axpy(float* y, float a, const float* x, int n) override { inner_->Axpy(y, a, x, n); }
  void DivideInPlace(float* x, float d, size_t count) override { inner_->DivideInPlace(x, d, count); }
  bool state_on_host() const override { return inner_->state_on_host(); }
  void Download(float* host, const float* state, size_t n) override { inner_->Download(host, state, n); }
  int Argmax(const float* state, int n) override { return inner_->Argmax(state, n); }
  void Upload(float* state, const float* host, size_t n) override { inner_->Upload(state, host, n); }
  void* device_stream() override { return inner_->device_stream(); }
  std::optional<PoolCounters> pool_counters() const override { return inner_->pool_counters(); }
  void BeginLayer(int layer) override { inner_->BeginLayer(layer); }
  Status status() const override { return inner_->status(); }

 protected:
  kernels::Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<kernels::Backend> inner_;
};

// ActiveKernelHooks() for a corruption that wraps the fast backend in B.
template <class B>
class WrappingHooks final : public KernelHooks {
 public:
  std::unique_ptr<kernels::Backend> WrapFast(std::unique_ptr<kernels::Backend> fast) const override {
    return std::make_unique<B>(std::move(fast));
  }
};

}  // namespace verity::corruptions
