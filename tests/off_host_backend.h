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
// downloaded, partial sums staged through a host collective. With
// `defer_steps` it also plays a graph-recording device: the calls between
// BeginDecodeStep and EndDecodeStep are kept and run only at EndDecodeStep
// (or when a call inside hands a result to the host), so an engine that
// relied on a result inside the bracket would read a stale one.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"

namespace verity::test {

class OffHostBackend final : public kernels::Backend {
 public:
  explicit OffHostBackend(std::unique_ptr<kernels::Backend> inner, bool defer_steps = false)
      : inner_(std::move(inner)), defer_steps_(defer_steps) {}

  static constexpr uintptr_t kTag = uintptr_t{1} << 62;
  static bool Tagged(const void* p) { return (reinterpret_cast<uintptr_t>(p) & kTag) != 0; }

  long misplaced() const { return misplaced_; }
  const std::string& first_misplaced() const { return first_misplaced_; }
  long downloads() const { return downloads_; }
  long argmaxes() const { return argmaxes_; }                // greedy picks made on the backend
  long rope_blocks() const { return blocks_; }               // RopeBlock calls: the block path was taken
  long deferred_steps() const { return deferred_steps_; }    // steps whose calls all ran at EndDecodeStep
  long flushed_steps() const { return flushed_steps_; }      // steps a host-bound call flushed early
  long replayed_steps() const { return replayed_steps_; }    // deferred steps that replayed a kept one
  long attends() const { return attends_; }                  // AttendBlock and AttendRows calls
  long fused_products() const { return fused_products_; }    // MatmulSwiGLU and MatmulAddInPlace calls
  long normed_products() const { return normed_products_; }  // NormMatmulShared and NormMatmulSwiGLU calls

  // The fused calls are counted (a device fuses them: an engine that stopped
  // making them would cost it launches) and made as the defaults make them,
  // so every separate call they stand for is still checked here.
  void MatmulSwiGLU(const float* x, int n, bool independent, const MatmulTarget& gate,
                    const MatmulTarget& up) override {
    fused_products_++;
    Backend::MatmulSwiGLU(x, n, independent, gate, up);
  }
  void NormMatmulShared(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget* targets,
                        int count) override {
    normed_products_++;
    Backend::NormMatmulShared(norm, n, independent, targets, count);
  }
  void NormMatmulSwiGLU(const RowsNormArgs& norm, int n, bool independent, const MatmulTarget& gate,
                        const MatmulTarget& up) override {
    normed_products_++;
    Backend::NormMatmulSwiGLU(norm, n, independent, gate, up);
  }
  void MatmulAddInPlace(float* x, float* scratch, const float* h, const kernels::Weights& w, int n,
                        bool independent) override {
    fused_products_++;
    Backend::MatmulAddInPlace(x, scratch, h, w, n, independent);
  }
  void AttendBlock(const kernels::AttendArgs& a, int pos0, int n) override {
    attends_++;
    Backend::AttendBlock(a, pos0, n);
  }
  void AttendRows(const kernels::AttendArgs& a, const int* pos, const int* slot, int n) override {
    attends_++;
    Backend::AttendRows(a, pos, slot, n);
  }

  // As the CUDA backend's graphs: the first step of a signature runs its own
  // calls, the second's calls are kept, and every later step with that
  // signature replays the second's calls (their arguments frozen but for the
  // position and token, read when they run). An engine that passed anything
  // else that changes from step to step would get stale bits.
  void BeginDecodeStep(int token, int pos) override {
    if (in_step_) Misplaced("BeginDecodeStep", "outside a step");
    in_step_ = true;
    deferring_ = defer_steps_;
    step_token_ = token;
    step_pos_ = pos;
  }
  void EndDecodeStep() override {
    if (!in_step_) Misplaced("EndDecodeStep", "inside a step");
    if (deferring_) {
      deferred_steps_++;
      if (auto it = replays_.find(sig_); it != replays_.end()) {
        replayed_steps_++;
        RunTape(it->second);
        tape_.clear();
        sig_.clear();
      } else if (!seen_.insert(sig_).second) {
        replays_.emplace(sig_, tape_);
        Flush();
      } else {
        Flush();
      }
    }
    in_step_ = deferring_ = false;
  }
  void* device_stream() override {
    FlushForTheHost();
    return nullptr;
  }

  const char* name() const override { return inner_->name(); }
  bool state_on_host() const override { return false; }
  bool batch_rows_independent() const override { return inner_->batch_rows_independent(); }
  bool attends_windows() const override { return inner_->attends_windows(); }
  bool runs_gemma() const override { return inner_->runs_gemma(); }
  std::optional<PoolCounters> pool_counters() const override { return inner_->pool_counters(); }
  void BeginLayer(int layer) override { inner_->BeginLayer(layer); }
  Status status() const override { return inner_->status(); }

  std::unique_ptr<kernels::StateBuffer> AllocateState(size_t floats) override {
    return std::make_unique<TaggedState>(inner_->AllocateState(floats));
  }
  void Download(float* host, const float* state, size_t n) override {
    FlushForTheHost();
    downloads_++;
    std::memcpy(Host(host, "Download host"), State(state, "Download state"), n * sizeof(float));
  }
  int Argmax(const float* state, int n) override {
    FlushForTheHost();
    argmaxes_++;
    return inner_->Argmax(State(state, "Argmax state"), n);
  }
  void Upload(float* state, const float* host, size_t n) override {
    FlushForTheHost();
    std::memcpy(State(state, "Upload state"), Host(host, "Upload host"), n * sizeof(float));
  }

  void Matmul(float* out, const float* x, const kernels::Weights& w) override {
    Do({1, Id(out), Id(x), Id(w.data), w.rows, w.cols},
       [=, this, o = State(out, "Matmul out"), i = State(x, "Matmul x"), v = HostWeights(w, "Matmul")] {
         inner_->Matmul(o, i, v);
       });
  }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    Do({2, Id(out), Id(x), Id(w.data), w.rows, w.cols, T},
       [=, this, o = State(out, "MatmulBatch out"), i = State(x, "MatmulBatch x"), v = HostWeights(w, "MatmulBatch")] {
         inner_->MatmulBatch(o, i, v, T);
       });
  }
  void MatmulRows(float* out, const float* x, const kernels::Weights& w, int n) override {
    Do({3, Id(out), Id(x), Id(w.data), w.rows, w.cols, n},
       [=, this, o = State(out, "MatmulRows out"), i = State(x, "MatmulRows x"), v = HostWeights(w, "MatmulRows")] {
         inner_->MatmulRows(o, i, v, n);
       });
  }
  void MatmulShared(const float* x, int T, const MatmulTarget* targets, int count) override {
    Do(SharedSig(4, x, T, targets, count),
       [=, this, i = State(x, "MatmulShared x"), t = Targets(targets, count, "MatmulShared")] {
         inner_->MatmulShared(i, T, t.Get().data(), count);
       });
  }
  void MatmulSharedRows(const float* x, int n, const MatmulTarget* targets, int count) override {
    Do(SharedSig(5, x, n, targets, count),
       [=, this, i = State(x, "MatmulSharedRows x"), t = Targets(targets, count, "MatmulSharedRows")] {
         inner_->MatmulSharedRows(i, n, t.Get().data(), count);
       });
  }
  void Attention(const kernels::AttentionArgs& a) override {
    // In a deferred step the position is read when the call runs (a device reads it from memory).
    Do({6, Id(a.out), Id(a.q), Id(a.key_cache), Id(a.value_cache), a.pos_stride},
       [=, this, p = PlainArgs(a, "Attention")] {
         kernels::AttentionArgs at = p;
         if (deferred_) at.pos = step_pos_;
         inner_->Attention(at);
       });
  }
  void RopeBlock(float* vec, int n, int width, int head_size, int pos0, const float* inv_freq,
                 bool interleaved) override {
    blocks_++;
    if (n > 1) FlushForTheHost();  // a block runs at once, as on the device
    Do({7, Id(vec), n, width, Id(inv_freq)},
       [=, this, v = State(vec, "RopeBlock vec"), f = Host(inv_freq, "RopeBlock inv_freq")] {
         inner_->RopeBlock(v, n, width, head_size, deferred_ ? step_pos_ : pos0, f, interleaved);
       });
  }
  void WriteCacheBlock(float* cache, size_t at0, long pos_stride, const float* rows, int width, int n) override {
    if (n > 1) FlushForTheHost();
    // Deferred, the row's place is the base (at0 less this position's rows) plus the position read at run time.
    const int64_t base = static_cast<int64_t>(at0) - static_cast<int64_t>(step_pos_) * pos_stride;
    const bool deferring = deferring_;
    Do({8, Id(cache), deferring ? base : static_cast<int64_t>(at0), pos_stride, Id(rows), width, n},
       [=, this, c = State(cache, "WriteCacheBlock cache"), r = State(rows, "WriteCacheBlock rows")] {
         const size_t at = deferred_ ? static_cast<size_t>(base + static_cast<int64_t>(step_pos_) * pos_stride) : at0;
         inner_->WriteCacheBlock(c, at, pos_stride, r, width, n);
       });
  }
  void AttentionBlock(const kernels::AttentionArgs& a, int n) override {
    if (n == 1) return Attention(a);  // as the device backend does
    FlushForTheHost();
    Do({17, Id(a.out), n}, [=, this, p = PlainArgs(a, "AttentionBlock")] { inner_->AttentionBlock(p, n); });
  }
  int prefill_block() const override { return inner_->prefill_block(); }
  void Rope(float* vec, int size, int head_size, int pos, const float* inv_freq, bool interleaved) override {
    FlushForTheHost();  // runs at once on the device: nothing kept may run after it
    Do({10}, [=, this, v = State(vec, "Rope vec"), f = Host(inv_freq, "Rope inv_freq")] {
      inner_->Rope(v, size, head_size, pos, f, interleaved);
    });
  }
  void SwiGLU(float* hb, const float* hb2, int n) override {
    Do({9, Id(hb), Id(hb2), n},
       [=, this, a = State(hb, "SwiGLU hb"), b = State(hb2, "SwiGLU hb2")] { inner_->SwiGLU(a, b, n); });
  }
  void GeGLU(float* hb, const float* hb2, int n) override {
    Do({20, Id(hb), Id(hb2), n},
       [=, this, a = State(hb, "GeGLU hb"), b = State(hb2, "GeGLU hb2")] { inner_->GeGLU(a, b, n); });
  }
  void ScaleInPlace(float* x, float s, size_t count) override {
    Do({21, Id(x), static_cast<int64_t>(count)},
       [=, this, o = State(x, "ScaleInPlace x")] { inner_->ScaleInPlace(o, s, count); });
  }
  void SoftCapInPlace(float* x, float cap, size_t count) override {
    Do({22, Id(x), static_cast<int64_t>(count)},
       [=, this, o = State(x, "SoftCapInPlace x")] { inner_->SoftCapInPlace(o, cap, count); });
  }
  // The token ids are copied at the call, as a device backend uploads them.
  void Embed(float* x, const float* table, int rows, int dim, const int* tokens, int n) override {
    const int* ids = Host(tokens, "Embed tokens");
    if (n > 1) FlushForTheHost();
    Do({18, Id(x), Id(table), dim, n},
       [=, this, o = State(x, "Embed x"), t = Host(table, "Embed table"), copy = std::vector<int>(ids, ids + n)] {
         inner_->Embed(o, t, rows, dim, deferred_ ? &step_token_ : copy.data(), n);  // deferred: the step's token
       });
  }
  void RmsnormRows(float* out, const float* x, const float* weight, int dim, int n, float eps) override {
    Do({11, Id(out), Id(x), Id(weight), dim, n},
       [=, this, o = State(out, "RmsnormRows out"), i = State(x, "RmsnormRows x"),
        w = Host(weight, "RmsnormRows weight")] { inner_->RmsnormRows(o, i, w, dim, n, eps); });
  }
  void AddInPlace(float* x, const float* y, size_t count) override {
    Do({12, Id(x), Id(y), static_cast<int64_t>(count)},
       [=, this, a = State(x, "AddInPlace x"), b = State(y, "AddInPlace y")] { inner_->AddInPlace(a, b, count); });
  }
  void AddBiasRows(float* x, const float* bias, int width, int n) override {
    Do({19, Id(x), Id(bias), width, n}, [=, this, a = State(x, "AddBiasRows x"), b = Host(bias, "AddBiasRows bias")] {
      inner_->AddBiasRows(a, b, width, n);
    });
  }
  void WriteCache(float* cache, size_t at, const float* row, int width) override {
    FlushForTheHost();
    Do({13}, [=, this, c = State(cache, "WriteCache cache"), r = State(row, "WriteCache row")] {
      inner_->WriteCache(c, at, r, width);
    });
  }
  // The choices go to the host at once: everything deferred runs first.
  void RouteTopK(const float* logits, int n, int k, int* chosen, float* weight) override {
    FlushForTheHost();
    inner_->RouteTopK(State(logits, "RouteTopK logits"), n, k, Host(chosen, "RouteTopK chosen"),
                      Host(weight, "RouteTopK weight"));
  }
  void Zero(float* y, int n) override {
    Do({14, Id(y), n}, [=, this, o = State(y, "Zero y")] { inner_->Zero(o, n); });
  }
  void Axpy(float* y, float a, const float* x, int n) override {
    Do({15, Id(y), Id(x), n}, [=, this, o = State(y, "Axpy y"), i = State(x, "Axpy x")] { inner_->Axpy(o, a, i, n); });
  }
  void DivideInPlace(float* x, float d, size_t count) override {
    Do({16, Id(x), static_cast<int64_t>(count)},
       [=, this, o = State(x, "DivideInPlace x")] { inner_->DivideInPlace(o, d, count); });
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
  // A shared call's targets, untagged, with their own copies of the weight
  // views (a deferred call outlives the caller's).
  struct PlainTargets {
    std::vector<float*> outs;
    std::vector<kernels::Weights> views;
    std::vector<MatmulTarget> Get() const {
      std::vector<MatmulTarget> t(outs.size());
      for (size_t i = 0; i < t.size(); i++) t[i] = {outs[i], &views[i]};
      return t;
    }
  };
  PlainTargets Targets(const MatmulTarget* targets, int count, const char* what) {
    PlainTargets p;
    for (int i = 0; i < count; i++) {
      p.outs.push_back(State(targets[i].out, what));
      p.views.push_back(HostWeights(*targets[i].w, what));
    }
    return p;
  }
  kernels::AttentionArgs PlainArgs(const kernels::AttentionArgs& a, const std::string& what) {
    kernels::AttentionArgs p = a;
    p.out = State(a.out, (what + " out").c_str());
    p.q = State(a.q, (what + " q").c_str());
    p.key_cache = State(a.key_cache, (what + " key cache").c_str());
    p.value_cache = State(a.value_cache, (what + " value cache").c_str());
    p.scores = Host(a.scores, (what + " scores").c_str());
    return p;
  }

  // Runs `f` now, or keeps it for EndDecodeStep inside a deferred step.
  static int64_t Id(const void* p) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)); }
  std::vector<int64_t> SharedSig(int op, const float* x, int n, const MatmulTarget* t, int count) {
    std::vector<int64_t> sig = {op, Id(x), n, count};
    for (int i = 0; i < count; i++) sig.insert(sig.end(), {Id(t[i].out), Id(t[i].w->data), t[i].w->rows});
    return sig;
  }
  // Runs `f` now, or keeps it (with the arguments that are not the position
  // or token: `sig`) inside a deferred step.
  template <class F>
  void Do(const std::vector<int64_t>& sig, F f) {
    if (deferring_) {
      sig_.insert(sig_.end(), sig.begin(), sig.end());
      tape_.emplace_back(std::move(f));
    } else {
      f();
    }
  }
  void Flush() {
    RunTape(tape_);
    tape_.clear();
    sig_.clear();
  }
  void RunTape(const std::vector<std::function<void()>>& tape) {
    deferred_ = true;
    for (auto& f : tape) f();
    deferred_ = false;
  }
  // A result is wanted on the host: run what was kept; the step's remaining calls run as issued.
  void FlushForTheHost() {
    if (!deferring_) return;
    flushed_steps_++;
    Flush();
    deferring_ = false;
  }

  std::unique_ptr<kernels::Backend> inner_;
  bool defer_steps_, in_step_ = false, deferring_ = false;
  std::vector<std::function<void()>> tape_;  // a deferred step's calls, in order
  std::vector<int64_t> sig_;                 // and their arguments but the position and token
  std::map<std::vector<int64_t>, std::vector<std::function<void()>>> replays_;
  std::set<std::vector<int64_t>> seen_;
  bool deferred_ = false;  // a kept call is running: it reads the step's position and token
  int step_token_ = 0, step_pos_ = 0;
  long attends_ = 0, fused_products_ = 0, normed_products_ = 0;
  long deferred_steps_ = 0, flushed_steps_ = 0, replayed_steps_ = 0;
  long misplaced_ = 0, downloads_ = 0, blocks_ = 0, argmaxes_ = 0;
  std::string first_misplaced_;
};

}  // namespace verity::test
