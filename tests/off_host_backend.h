// A CPU backend whose state the engine cannot touch: the seam's test on a
// machine without a GPU (issue 26). It computes with an inner backend (fast,
// reference) but hands out state (Backend::AllocateState) as pointers tagged
// with bit 62, which no x86-64 or AArch64 user address has: an engine that
// reads or writes an activation, a KV cache or the logits in place, instead of
// through a backend call or Download/Upload, dereferences a non-canonical
// address and dies. Every call untags its state arguments before computing
// and checks that each argument is where the seam says it lives (state, or
// host memory for weights, tables, tokens and MoE choices); a mismatch is
// counted and named (misplaced(), first_misplaced()). It says
// state_on_host() == false, so the engine takes the device paths: logits
// downloaded, partial sums staged through a host collective.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"

namespace verity::test {

class OffHostBackend final : public kernels::Backend {
 public:
  explicit OffHostBackend(std::unique_ptr<kernels::Backend> inner) : inner_(std::move(inner)) {}

  static constexpr uintptr_t kTag = uintptr_t{1} << 62;
  static bool Tagged(const void* p) { return (reinterpret_cast<uintptr_t>(p) & kTag) != 0; }

  long misplaced() const { return misplaced_; }
  const std::string& first_misplaced() const { return first_misplaced_; }
  long downloads() const { return downloads_; }
  long rope_blocks() const { return blocks_; }  // RopeBlock calls: the block path was taken

  const char* name() const override { return inner_->name(); }
  bool state_on_host() const override { return false; }
  bool batch_rows_independent() const override { return inner_->batch_rows_independent(); }
  std::optional<PoolCounters> pool_counters() const override { return inner_->pool_counters(); }
  void BeginLayer(int layer) override { inner_->BeginLayer(layer); }
  Status status() const override { return inner_->status(); }

  std::unique_ptr<kernels::StateBuffer> AllocateState(size_t floats) override {
    return std::make_unique<TaggedState>(inner_->AllocateState(floats));
  }
  void Download(float* host, const float* state, size_t n) override {
    downloads_++;
    std::memcpy(Host(host, "Download host"), State(state, "Download state"), n * sizeof(float));
  }
  void Upload(float* state, const float* host, size_t n) override {
    std::memcpy(State(state, "Upload state"), Host(host, "Upload host"), n * sizeof(float));
  }

  void Matmul(float* out, const float* x, const kernels::Weights& w) override {
    inner_->Matmul(State(out, "Matmul out"), State(x, "Matmul x"), HostWeights(w, "Matmul"));
  }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    inner_->MatmulBatch(State(out, "MatmulBatch out"), State(x, "MatmulBatch x"), HostWeights(w, "MatmulBatch"), T);
  }
  void MatmulRows(float* out, const float* x, const kernels::Weights& w, int n) override {
    inner_->MatmulRows(State(out, "MatmulRows out"), State(x, "MatmulRows x"), HostWeights(w, "MatmulRows"), n);
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    std::vector<MatmulTarget> plain = Targets(targets, count, "MatmulShared");
    inner_->MatmulShared(State(x, "MatmulShared x"), T, plain.data(), count);
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    std::vector<MatmulTarget> plain = Targets(targets, count, "MatmulSharedRows");
    inner_->MatmulSharedRows(State(x, "MatmulSharedRows x"), n, plain.data(), count);
  }
  void Attention(const kernels::AttentionArgs& a) override {
    kernels::AttentionArgs p = a;
    p.out = State(a.out, "Attention out");
    p.q = State(a.q, "Attention q");
    p.key_cache = State(a.key_cache, "Attention key cache");
    p.value_cache = State(a.value_cache, "Attention value cache");
    p.scores = Host(a.scores, "Attention scores");
    inner_->Attention(p);
  }
  void RopeBlock(float* vec, int n, int width, int head_size, int pos0, const float* inv_freq, bool interleaved) override {
    blocks_++;
    inner_->RopeBlock(State(vec, "RopeBlock vec"), n, width, head_size, pos0, Host(inv_freq, "RopeBlock inv_freq"),
                      interleaved);
  }
  void WriteCacheBlock(float* cache, size_t at0, long pos_stride, const float* rows, int width, int n) override {
    inner_->WriteCacheBlock(State(cache, "WriteCacheBlock cache"), at0, pos_stride, State(rows, "WriteCacheBlock rows"),
                            width, n);
  }
  void AttentionBlock(const kernels::AttentionArgs& a, int n) override {
    kernels::AttentionArgs p = a;
    p.out = State(a.out, "AttentionBlock out");
    p.q = State(a.q, "AttentionBlock q");
    p.key_cache = State(a.key_cache, "AttentionBlock key cache");
    p.value_cache = State(a.value_cache, "AttentionBlock value cache");
    p.scores = Host(a.scores, "AttentionBlock scores");
    inner_->AttentionBlock(p, n);
  }
  int prefill_block() const override { return inner_->prefill_block(); }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    inner_->Rope(State(vec, "Rope vec"), size, head_size, pos, Host(inv_freq, "Rope inv_freq"), interleaved);
  }
  void SwiGLU(float* hb, const float* hb2, int n) override {
    inner_->SwiGLU(State(hb, "SwiGLU hb"), State(hb2, "SwiGLU hb2"), n);
  }
  void Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n) override {
    inner_->Embed(State(x, "Embed x"), Host(table, "Embed table"), rows, dim, Host(tokens, "Embed tokens"), n);
  }
  void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) override {
    inner_->RmsnormRows(State(out, "RmsnormRows out"), State(x, "RmsnormRows x"), Host(weight, "RmsnormRows weight"),
                        dim, n, eps);
  }
  void AddInPlace(float* x, const float* y, size_t count) override {
    inner_->AddInPlace(State(x, "AddInPlace x"), State(y, "AddInPlace y"), count);
  }
  void WriteCache(float* cache, size_t at, const float* row, int width) override {
    inner_->WriteCache(State(cache, "WriteCache cache"), at, State(row, "WriteCache row"), width);
  }
  void RouteTopK(const float* logits, int n, int k, int* chosen, float* weight) override {
    inner_->RouteTopK(State(logits, "RouteTopK logits"), n, k, Host(chosen, "RouteTopK chosen"),
                      Host(weight, "RouteTopK weight"));
  }
  void Zero(float* y, int n) override { inner_->Zero(State(y, "Zero y"), n); }
  void Axpy(float* y, float a, const float* x, int n) override {
    inner_->Axpy(State(y, "Axpy y"), a, State(x, "Axpy x"), n);
  }
  void DivideInPlace(float* x, float d, size_t count) override {
    inner_->DivideInPlace(State(x, "DivideInPlace x"), d, count);
  }

 private:
  class TaggedState final : public kernels::StateBuffer {
   public:
    explicit TaggedState(std::unique_ptr<kernels::StateBuffer> inner) : inner_(std::move(inner)) {}
    float* data() override { return reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(inner_->data()) | kTag); }
    size_t floats() const override { return inner_->floats(); }

   private:
    std::unique_ptr<kernels::StateBuffer> inner_;
  };

  void Misplaced(const char* what, const char* want) {
    if (misplaced_++ == 0) first_misplaced_ = std::string(what) + " is not " + want;
  }
  // A state argument, untagged; a host pointer there is counted.
  template <class T>
  T* State(T* p, const char* what) {
    if (!Tagged(p)) {
      Misplaced(what, "backend state");
      return p;
    }
    return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) & ~kTag);
  }
  // A host argument; state there is counted (and untagged, so the run goes on).
  template <class T>
  T* Host(T* p, const char* what) {
    if (!Tagged(p)) return p;
    Misplaced(what, "host memory");
    return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) & ~kTag);
  }
  kernels::Weights HostWeights(const kernels::Weights& w, const char* what) {
    kernels::Weights plain = w;
    plain.data = Host(w.data, what);
    return plain;
  }
  std::vector<MatmulTarget> Targets(const MatmulTarget* targets, int count, const char* what) {
    views_.resize(count);  // sized before the pointers below are taken
    std::vector<MatmulTarget> plain(targets, targets + count);
    for (int i = 0; i < count; i++) {
      views_[i] = HostWeights(*targets[i].w, what);
      plain[i] = {State(targets[i].out, what), &views_[i]};
    }
    return plain;
  }

  std::unique_ptr<kernels::Backend> inner_;
  std::vector<kernels::Weights> views_;  // the untagged weight views of a shared call's targets
  long misplaced_ = 0, downloads_ = 0, blocks_ = 0;
  std::string first_misplaced_;
};

}  // namespace verity::test
