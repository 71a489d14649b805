// The forward pass of one rank over the weights it holds: all of them on a
// single rank (Transformer), its shard under tensor parallelism (TpRank,
// engine/tp_forward.cc). One function runs the layers for both; they differ
// only in the slices of the weights (widths: heads, FFN units, experts) and in
// the Reducer, which completes a row-parallel projection's partial sums (a
// single rank's sums are already whole: it does nothing). Internal to the
// engine; docs/tensor-parallel.md has the algebra.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/engine.h"
#include "engine/zeroed_buffer.h"

namespace verity {

// Where the forward offers its partial sums to the Reducer.
enum class ReduceSite {
  kAttentionOut,  // the o projection's output: all-reduced here
  kPastFfnNorm,   // the FFN's normed rows: nothing reduces here except an injected fault
  kFfnOut,        // the down projection's output, or the partial expert sum (MoE): all-reduced here
};

// Completes partial sums in place. Every rank of a group makes the same calls.
class Reducer {
 public:
  virtual ~Reducer() = default;
  // `n` floats at `x` (a block's rows, row-major) at `site` of `layer`.
  virtual void Reduce(float* x, size_t n, ReduceSite site, int layer) = 0;
  // Whether Reduce never changes anything (a single rank's whole sums), so
  // a projection and its residual add may run as one call.
  [[nodiscard]] virtual bool changes_nothing() const { return false; }
};

// A single rank holds whole sums: nothing to reduce.
class NoReduce final : public Reducer {
 public:
  void Reduce(float*, size_t, ReduceSite, int) override {}
  bool changes_nothing() const override { return true; }
};

// One layer as one rank sees it. On a single rank every view is the whole
// matrix. Under tensor parallelism wq/wk/wv and w1/w3 are row slices
// (column-parallel: this rank's heads and FFN units), wo and w2 column slices
// (row-parallel: their products are partial sums).
struct LayerSlice {
  kernels::Weights wq, wk, wv, wo, w1, w2, w3;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // this rank's heads' q/k/v biases (Qwen2), or null
  const LayerWeights* full = nullptr;  // norms, router and experts (replicated; experts used in the band)
};

// The widths of one rank's slices.
struct RankWidths {
  int n_heads = 0, n_kv_heads = 0;       // query heads, and the KV heads they attend through
  int ffn = 0;                           // dense FFN units (rows of w1/w3)
  int expert_begin = 0, expert_end = 0;  // MoE experts held, [begin, end)
};

class RankForward {
 public:
  // `layers` has one slice per layer; `kv` lays out one sequence's KV cache
  // (kv_dim = widths.n_kv_heads * head_size), of which this rank holds `slots`
  // (one per sequence it decodes: a server's --parallel; 1 otherwise).
  // Allocates the KV caches and the one-position buffers (std::bad_alloc
  // escapes: Transformer::Create turns it into an error). `m`, `k` and `r`
  // must outlive this.
  RankForward(const Model& m, std::vector<LayerSlice> layers, const RankWidths& widths, const KvCacheLayout& kv,
              kernels::Backend& k, Reducer& r, int slots = 1);

  // Runs positions pos0 .. pos0+n-1 (tokens[0..n)) of the sequence in KV slot
  // `slot` through every layer, writing its KV cache; positions before pos0
  // must be in it. With `logits`, writes the logits of the last position
  // (logits()). The rows share batched matmuls (MatmulBatch): n > 1 rounds
  // slightly differently from n = 1.
  void Block(const int* tokens, int n, int pos0, bool logits, int slot = 0);
  // Block of one position, then the greedy pick of its logits, made by the
  // backend (Backend::Argmax): the logits are not handed to the host.
  int BlockGreedy(int token, int pos, int slot = 0);
  // One position of each of n sequences in distinct slots: token[t] at pos[t]
  // into slot[t]; writes n rows of vocab_size logits. The weights are read
  // once for all rows (MatmulRows) and row t is bit for bit what Block(&token[t],
  // 1, pos[t], true, slot[t]) gives: no row depends on the others.
  void Step(const int* slot, const int* token, const int* pos, int n, float* logits);
  // Step, then each row's greedy pick into picks[t] (Backend::ArgmaxRows):
  // the logits are not handed to the host.
  void StepGreedy(const int* slot, const int* token, const int* pos, int n, int* picks);
  // Prompt blocks of several sequences as one block: row t is token[t] at
  // pos[t] into slot[t]; each sequence's rows are consecutive positions, the
  // ones before them in its slot. The rows share batched matmuls
  // (MatmulBatch). When the backend's batched rows are independent
  // (Backend::batch_rows_independent) and every sequence brings at least 2
  // rows, row t is bit for bit what that sequence's own Block of its rows
  // gives. Writes the logits of rows last[0..n_last) into n_last rows of
  // `logits`.
  void PromptRows(const int* slot, const int* token, const int* pos, int n, const int* last, int n_last, float* logits);
  // The last Block's logits (vocab_size floats on the host): the backend's
  // own buffer when its state is host memory, else a copy downloaded once.
  float* logits() { return k_.state_on_host() ? logits_->data() : host_logits_.data(); }
  // Bytes of K and V cache held for every slot together.
  size_t kv_cache_bytes() const { return 2 * key_cache_->floats() * sizeof(float); }

 private:
  void Layers(const int* tokens, int n);
  // The embeddings of the block's rows into x_ (Backend::Embed), scaled
  // where the model scales them (Gemma).
  void Embed(const int* tokens, int n);
  void LookUp(const int* tokens, int n);
  std::vector<float> embed_rows_;  // a block-quantized table's looked-up rows, dequantized
  // Block up to the logits, which it returns where the backend holds them
  // (nullptr without logits).
  const float* Run(const int* tokens, int n, int pos0, bool logits, int slot);
  // The final norm and the classifier for `count` rows of the block, one
  // vector each (Matmul, as decode): row rows[i]'s logits into row i of host
  // memory `out`.
  void FinalLogits(const int* rows, int count, float* out);
  // Step's layers and every row's logits, into LogitsTarget(logits, n).
  float* StepRows(const int* slot, const int* token, const int* pos, int n, float* logits);
  // The final norm and classifier of FinalLogits, into LogitsTarget(out, count).
  void Classify(const int* rows, int count, float* out);
  // Where the classifier writes `count` rows bound for host memory `out`:
  // `out` itself when the backend computes on host memory, else the rows'
  // logits state (then Delivered downloads them into `out`).
  float* LogitsTarget(float* out, int count);
  std::vector<float> greedy_rows_;  // StepGreedy's logits on host state
  void Delivered(float* out, int count);
  void Attention(int l, int n);
  void FeedForward(int l, int n);
  void Experts(const LayerWeights& w, const float* xb, float* out);
  void Reserve(int n);
  // A block's matmuls: batched over positions of one sequence, or row by row
  // exact over independent sequences (independent_).
  void Project(float* out, const float* x, const kernels::Weights& w, int n);
  void ProjectResidual(const float* h, const kernels::Weights& w, int n, ReduceSite site, int l,
                       const float* post_norm = nullptr);
  void GatedFeedForward(const LayerSlice& w, int n);
  void ProjectShared(const float* x, int n, const kernels::Backend::MatmulTarget* targets, int count);

  const Model& m_;
  std::vector<LayerSlice> layers_;
  RankWidths w_;
  kernels::Backend& k_;
  Reducer& reduce_;
  int head_size_ = 0, q_dim_ = 0, kv_dim_ = 0, rows_ = 0;
  long kv_pos_stride_ = 0, kv_layer_stride_ = 0;
  size_t kv_slot_floats_ = 0;  // one slot's cache: slot s starts at s * kv_slot_floats_
  // The block being run: row t is position pos_[t] of the sequence in slot
  // slot_[t]; independent_ when the rows are different sequences (Step).
  std::vector<int> pos_, slot_;
  bool independent_ = false;
  bool one_sequence_ = false;         // Block: every row of one slot, at consecutive positions
  std::vector<float> rope_inv_freq_;  // RopeInverseFrequencies(config), once
  // Gemma 3's windowed layers' table (ModelConfig::rope_local_theta); else empty.
  std::vector<float> rope_local_inv_freq_;
  // The backend's state (Backend::AllocateState), so a device keeps it where
  // it computes. [rows x width] each, row t for position pos0 + t: the
  // residual stream, the normed rows, q/k/v, the attention output, a
  // projection's output, the FFN; one row of logits (on host state, what
  // logits() returns); the logits of several rows bound for the host (a
  // backend whose state is not host memory); one position's router logits
  // and expert buffers (MoE).
  std::unique_ptr<kernels::StateBuffer> x_, xb_, q_, key_, val_, att_, out_, hb_, hb2_, logits_, rows_logits_;
  std::unique_ptr<kernels::StateBuffer> router_, moe_hb_, moe_hb2_, moe_out_;
  AlignedVector<float> scores_;       // host scratch of a backend that scores attention on the host
  std::vector<float> host_logits_;    // Block's logits downloaded from a backend whose state is not host memory
  std::vector<int> chosen_;           // a position's experts, in routing order
  std::vector<float> chosen_weight_;  // and their softmax weights
  // Every slot's K and V caches, owned by the backend that attends over them
  // (Backend::AllocateState). Read every token, one head-width row per
  // position 1 KB apart on the ~110M synth: on 4 KB pages that is 4
  // positions a page; the CPU backends' huge pages cut a q8_0 decode's
  // attention share (~400 positions) from ~12% to ~8% (perf).
  std::unique_ptr<kernels::StateBuffer> key_cache_, value_cache_;
};

// The whole model on one rank (a Transformer, a SlotDecoder): every weight,
// nothing to reduce, `slots` KV caches in the layout the backend uses.
std::unique_ptr<RankForward> WholeModelForward(const Model& m, kernels::Backend& k, int slots);

}  // namespace verity
