// The forward pass, top to bottom: RankForward::Block runs a block of
// positions (one, when decoding) through every layer on one rank. A single
// rank (Transformer) holds every weight and reduces nothing; a tensor-parallel
// rank (engine/tp_forward.cc) runs this same code on its slices, and its
// Reducer all-reduces the two row-parallel partial sums of each layer.
// Every step runs through the backend (the products, attention, and the
// steps between them: embedding, norms, residual adds, KV writes, MoE
// routing), on state the backend allocated (the KV caches), so a device can
// keep its data where it computes; what stays here is the order of the steps.
#include "engine/rank_forward.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "corruptions/engine_hooks.h"

namespace verity {

KvCacheLayout StandardKvCacheLayout(const ModelConfig& c) {
  KvCacheLayout kv;
  kv.pos_stride = c.kv_dim();
  kv.layer_stride = static_cast<long>(c.seq_len) * c.kv_dim();
  kv.floats = static_cast<size_t>(c.n_layers) * c.seq_len * c.kv_dim();
  return kv;
}

RankForward::RankForward(const Model& m, std::vector<LayerSlice> layers, const RankWidths& widths,
                         const KvCacheLayout& kv, kernels::Backend& k, Reducer& r, int slots)
    : m_(m), layers_(std::move(layers)), w_(widths), k_(k), reduce_(r) {
  const ModelConfig& c = m.config;
  head_size_ = c.head_size();
  q_dim_ = w_.n_heads * head_size_;
  kv_dim_ = w_.n_kv_heads * head_size_;
  kv_pos_stride_ = kv.pos_stride;
  kv_layer_stride_ = kv.layer_stride;
  kv_slot_floats_ = kv.floats;
  key_cache_ = k.AllocateState(kv.floats * slots);
  value_cache_ = k.AllocateState(kv.floats * slots);
  rope_inv_freq_ = RopeInverseFrequencies(c);
  rope_local_inv_freq_ = RopeLocalInverseFrequencies(c);
  scores_.resize(static_cast<size_t>(w_.n_heads) * c.seq_len);
  // One row, for good (Prefill's callers hold its pointer): the backend's on
  // host state, else a host copy of what is downloaded.
  if (k.state_on_host()) {
    logits_ = k.AllocateState(c.vocab_size);
  } else {
    host_logits_.resize(c.vocab_size);
  }
  if (c.n_experts > 0) {
    router_ = k.AllocateState(c.n_experts);
    chosen_.resize(c.n_experts_per_tok);
    chosen_weight_.resize(c.n_experts_per_tok);
    moe_hb_ = k.AllocateState(m.ffn_dim);
    moe_hb2_ = k.AllocateState(m.ffn_dim);
    moe_out_ = k.AllocateState(c.dim);
  }
  Reserve(1);
}

// State for blocks of `n` rows (grown on first use: decoding needs one; the
// old contents are not kept, every block writes its rows before reading them).
void RankForward::Reserve(int n) {
  if (n <= rows_) return;
  rows_ = n;
  const size_t N = n, dim = m_.config.dim;
  for (auto* v : {&x_, &xb_, &out_}) *v = k_.AllocateState(N * dim);
  for (auto* v : {&q_, &att_}) *v = k_.AllocateState(N * q_dim_);
  for (auto* v : {&key_, &val_}) *v = k_.AllocateState(N * kv_dim_);
  if (m_.config.n_experts == 0)
    for (auto* v : {&hb_, &hb2_}) *v = k_.AllocateState(N * w_.ffn);
  pos_.resize(N);
  slot_.resize(N);
}

namespace {
// Row t of a row-major [rows x width] state buffer.
float* Row(kernels::StateBuffer& v, int t, int width) { return v.data() + static_cast<size_t>(t) * width; }
}  // namespace

void RankForward::Block(const int* tokens, int n, int pos0, bool logits, int slot) {
  Run(tokens, n, pos0, logits, slot);
  if (logits) Delivered(this->logits(), 1);
}

int RankForward::BlockGreedy(int token, int pos, int slot) {
  return k_.Argmax(Run(&token, 1, pos, /*logits=*/true, slot), m_.config.vocab_size);
}

// A block of one sequence through every layer, and the last row's logits
// classified where the backend holds them (returned; the host row on host
// state). One decoded position is bracketed (Backend::BeginDecodeStep): the
// same calls every time, up to the logits' download.
const float* RankForward::Run(const int* tokens, int n, int pos0, bool logits, int slot) {
  Reserve(n);
  for (int t = 0; t < n; t++) pos_[t] = pos0 + t, slot_[t] = slot;
  independent_ = false;
  one_sequence_ = true;
  const bool step = n == 1;
  if (step) k_.BeginDecodeStep(tokens[0], pos0);
  Layers(tokens, n);
  const int last = n - 1;
  const float* written = nullptr;
  if (logits) {
    Classify(&last, 1, this->logits());
    written = LogitsTarget(this->logits(), 1);
  }
  if (step) k_.EndDecodeStep();
  return written;
}

void RankForward::PromptRows(const int* slot, const int* token, const int* pos, int n, const int* last, int n_last,
                             float* logits) {
  Reserve(std::max(n, n_last));
  std::copy(pos, pos + n, pos_.begin());
  std::copy(slot, slot + n, slot_.begin());
  independent_ = false;
  one_sequence_ = false;
  Layers(token, n);
  FinalLogits(last, n_last, logits);
}

float* RankForward::LogitsTarget(float* out, int count) {
  if (k_.state_on_host()) return out;
  const size_t floats = static_cast<size_t>(count) * m_.config.vocab_size;
  if (!rows_logits_ || rows_logits_->floats() < floats) rows_logits_ = k_.AllocateState(floats);
  return rows_logits_->data();
}

void RankForward::Delivered(float* out, int count) {
  if (!k_.state_on_host()) k_.Download(out, rows_logits_->data(), static_cast<size_t>(count) * m_.config.vocab_size);
}

// The classifier is replicated under tensor parallelism: every rank computes it.
void RankForward::FinalLogits(const int* rows, int count, float* out) {
  Classify(rows, count, out);
  Delivered(out, count);
}

void RankForward::Classify(const int* rows, int count, float* out) {
  k_.BeginLayer(-1);
  const ModelConfig& c = m_.config;
  float* target = LogitsTarget(out, count);
  for (int i = 0; i < count; i++) {
    float* x = Row(*x_, rows[i], c.dim);
    k_.RmsnormRows(x, x, m_.rms_final, c.dim, 1, c.norm_eps);
    k_.Matmul(target + static_cast<size_t>(i) * c.vocab_size, x, m_.classifier);
  }
  if (c.final_softcap > 0.0f) k_.SoftCapInPlace(target, c.final_softcap, static_cast<size_t>(count) * c.vocab_size);
}

void RankForward::Step(const int* slot, const int* token, const int* pos, int n, float* logits) {
  StepRows(slot, token, pos, n, logits);
  Delivered(logits, n);
}

void RankForward::StepGreedy(const int* slot, const int* token, const int* pos, int n, int* picks) {
  const int vocab = m_.config.vocab_size;
  if (k_.state_on_host()) greedy_rows_.resize(static_cast<size_t>(n) * vocab);  // a device keeps its own rows
  k_.ArgmaxRows(StepRows(slot, token, pos, n, greedy_rows_.data()), n, vocab, picks);
}

float* RankForward::StepRows(const int* slot, const int* token, const int* pos, int n, float* logits) {
  Reserve(n);
  std::copy(pos, pos + n, pos_.begin());
  std::copy(slot, slot + n, slot_.begin());
  independent_ = true;
  one_sequence_ = false;
  Layers(token, n);
  k_.BeginLayer(-1);  // every row's logits
  const int dim = m_.config.dim;
  k_.RmsnormRows(x_->data(), x_->data(), m_.rms_final, dim, n, m_.config.norm_eps);
  float* target = LogitsTarget(logits, n);
  k_.MatmulRows(target, x_->data(), m_.classifier, n);
  if (m_.config.final_softcap > 0.0f)
    k_.SoftCapInPlace(target, m_.config.final_softcap, static_cast<size_t>(n) * m_.config.vocab_size);
  return target;
}

// The embeddings of the block's rows, then every layer.
void RankForward::Layers(const int* tokens, int n) {
  const ModelConfig& c = m_.config;
  Embed(tokens, n);
  for (int l = 0; l < c.n_layers; l++) {
    k_.BeginLayer(l);
    Attention(l, n);
    FeedForward(l, n);
  }
}

// The block's embeddings; Gemma's scaled by sqrt(dim) (the table is the
// classifier too, so the scale cannot be folded into it).
void RankForward::Embed(const int* tokens, int n) {
  LookUp(tokens, n);
  const ModelConfig& c = m_.config;
  if (c.gemma) k_.ScaleInPlace(x_->data(), sqrtf(static_cast<float>(c.dim)), static_cast<size_t>(n) * c.dim);
}

void RankForward::LookUp(const int* tokens, int n) {
  const ModelConfig& c = m_.config;
  if (m_.token_embedding) return k_.Embed(x_->data(), m_.token_embedding, c.vocab_size, c.dim, tokens, n);
  // A block-quantized table (Model::embedding_blocks): only the looked-up
  // rows are dequantized (exactly, so the embeddings are the f32 table's)
  // and uploaded as x. Not handed to Embed as a small table: a device
  // backend keeps one copy per host table (uploaded once, as a model's
  // tables are), and a recorded step looks its token up in the model's
  // table on the device; this buffer is neither.
  const size_t dim = static_cast<size_t>(c.dim);
  embed_rows_.resize(static_cast<size_t>(n) * dim);
  for (int t = 0; t < n; t++) kernels::DecodeRow(m_.embedding_blocks, tokens[t], embed_rows_.data() + t * dim);
  k_.Upload(x_->data(), embed_rows_.data(), embed_rows_.size());
}

void RankForward::Project(float* out, const float* x, const kernels::Weights& w, int n) {
  if (independent_) {
    k_.MatmulRows(out, x, w, n);
  } else {
    k_.MatmulBatch(out, x, w, n);
  }
}

void RankForward::ProjectShared(const float* x, int n, const kernels::Backend::MatmulTarget* targets, int count) {
  if (independent_) {
    k_.MatmulSharedRows(x, n, targets, count);
  } else {
    k_.MatmulShared(x, n, targets, count);
  }
}

// Norm, q/k/v, rotate, cache, attend, project, all-reduce, residual.
void RankForward::Attention(int l, int n) {
  const ModelConfig& c = m_.config;
  const LayerSlice& w = layers_[l];
  const int dim = c.dim;
  // Column-parallel: this rank's query heads and the KV heads they attend
  // through, each a whole dot product over dim (no communication).
  const kernels::Backend::MatmulTarget qkv[] = {{q_->data(), &w.wq}, {key_->data(), &w.wk}, {val_->data(), &w.wv}};
  k_.NormMatmulShared({xb_->data(), x_->data(), w.full->rms_att, dim, c.norm_eps}, n, independent_, qkv, 3);
  if (w.bq) {  // Qwen2: each head's bias travels with its rows
    k_.AddBiasRows(q_->data(), w.bq, q_dim_, n);
    k_.AddBiasRows(key_->data(), w.bk, kv_dim_, n);
    k_.AddBiasRows(val_->data(), w.bv, kv_dim_, n);
  }
  if (w.full->q_norm) {  // Qwen3: each head's q and k normalised over head_dim, one weight for all heads
    k_.RmsnormRows(q_->data(), q_->data(), w.full->q_norm, head_size_, n * w_.n_heads, c.norm_eps);
    k_.RmsnormRows(key_->data(), key_->data(), w.full->k_norm, head_size_, n * w_.n_kv_heads, c.norm_eps);
  }
  // This layer's caches: of the block's slot (one sequence), of slot 0 (rows
  // of several sequences, each row in its own slot's).
  const size_t layer = static_cast<size_t>(l) * kv_layer_stride_, slot = one_sequence_ ? slot_[0] * kv_slot_floats_ : 0;
  const kernels::AttendArgs a{
      att_->data(),
      q_->data(),
      key_->data(),
      val_->data(),
      key_cache_->data() + slot + layer,
      value_cache_->data() + slot + layer,
      kv_pos_stride_,
      kv_slot_floats_,
      scores_.data(),
      (c.windowed(l) && !rope_local_inv_freq_.empty() ? rope_local_inv_freq_ : rope_inv_freq_).data(),
      c.rope_style == RopeStyle::kInterleaved,
      w_.n_heads,
      w_.n_kv_heads,
      head_size_,
      c.seq_len,
      c.window_of(l),
      c.query_pre_attn_scalar,
      c.attn_softcap};
  if (one_sequence_) {
    k_.AttendBlock(a, pos_[0], n);  // a prompt block, or one decoded position
  } else {
    k_.AttendRows(a, pos_.data(), slot_.data(), n);  // a batched step, prompts prefilled together
  }
  // Row-parallel o: a partial sum over this rank's heads, completed before the
  // residual add (the FFN's RMSNorm that follows is not linear).
  ProjectResidual(att_->data(), w.wo, n, ReduceSite::kAttentionOut, l, w.full->post_att_norm);
}

// out = W h, all-reduced (a row-parallel projection's partial sums), normed
// where the model norms a sublayer's output (Gemma: after the all-reduce, as
// the norm needs the whole row), then added to the residual stream; one call
// where nothing reduces or norms.
void RankForward::ProjectResidual(const float* h, const kernels::Weights& w, int n, ReduceSite site, int l,
                                  const float* post_norm) {
  const ModelConfig& c = m_.config;
  if (reduce_.changes_nothing() && !post_norm)
    return k_.MatmulAddInPlace(x_->data(), out_->data(), h, w, n, independent_);
  Project(out_->data(), h, w, n);
  reduce_.Reduce(out_->data(), static_cast<size_t>(n) * c.dim, site, l);
  if (post_norm) k_.RmsnormRows(out_->data(), out_->data(), post_norm, c.dim, n, c.norm_eps);
  k_.AddInPlace(x_->data(), out_->data(), static_cast<size_t>(n) * c.dim);
}

// Norm, SwiGLU (silu(w1 x) * w3 x) or the experts, down-project, all-reduce, residual.
void RankForward::FeedForward(int l, int n) {
  const ModelConfig& c = m_.config;
  const LayerSlice& w = layers_[l];
  const int dim = c.dim;
  const kernels::Backend::RowsNormArgs norm{xb_->data(), x_->data(), w.full->rms_ffn, dim, c.norm_eps};
  if (c.n_experts == 0 && !c.gemma && reduce_.changes_nothing()) {  // nothing between the norm and the products
    k_.NormMatmulSwiGLU(norm, n, independent_, {hb_->data(), &w.w1}, {hb2_->data(), &w.w3});
    return ProjectResidual(hb_->data(), w.w2, n, ReduceSite::kFfnOut, l, w.full->post_ffn_norm);
  }
  k_.RmsnormRows(norm.out, norm.x, norm.weight, dim, n, c.norm_eps);
  reduce_.Reduce(xb_->data(), static_cast<size_t>(n) * dim, ReduceSite::kPastFfnNorm, l);  // a fault's place only
  if (c.n_experts == 0) {
    // Column-parallel gate/up over this rank's units; the gate acts per unit
    // (no communication); row-parallel down: a partial sum.
    GatedFeedForward(w, n);
    return ProjectResidual(hb_->data(), w.w2, n, ReduceSite::kFfnOut, l, w.full->post_ffn_norm);
  }
  for (int t = 0; t < n; t++) Experts(*w.full, Row(*xb_, t, dim), Row(*out_, t, dim));  // routed per position
  reduce_.Reduce(out_->data(), static_cast<size_t>(n) * dim, ReduceSite::kFfnOut, l);
  k_.AddInPlace(x_->data(), out_->data(), static_cast<size_t>(n) * dim);
}

// hb = act(w1 x) * (w3 x): SiLU (SwiGLU, one fused call) or Gemma's tanh GELU (GeGLU).
void RankForward::GatedFeedForward(const LayerSlice& w, int n) {
  if (!m_.config.gemma)
    return k_.MatmulSwiGLU(xb_->data(), n, independent_, {hb_->data(), &w.w1}, {hb2_->data(), &w.w3});
  const kernels::Backend::MatmulTarget gate_up[] = {{hb_->data(), &w.w1}, {hb2_->data(), &w.w3}};
  ProjectShared(xb_->data(), n, gate_up, 2);
  k_.GeGLU(hb_->data(), hb2_->data(), n * w.w1.rows);
}

// Mixtral routing: router logits, the top-k experts (ties to the lower index),
// softmax over the chosen k, and the weighted sum of the SwiGLU outputs of
// the chosen experts this rank holds (all of them on a single rank) into
// `out`. The router is replicated and every rank's normed row is the same, so
// every rank chooses alike.
void RankForward::Experts(const LayerWeights& w, const float* xb, float* out) {
  const ModelConfig& c = m_.config;
  const int dim = c.dim, ffn = m_.ffn_dim, topk = c.n_experts_per_tok;
  k_.Matmul(router_->data(), xb, w.router);
  k_.RouteTopK(router_->data(), c.n_experts, topk, chosen_.data(), chosen_weight_.data());
  k_.Zero(out, dim);
  for (int j = 0; j < topk; j++) {
    const int e = chosen_[j];
    if (e < w_.expert_begin || e >= w_.expert_end) continue;
    const ExpertWeights& ex = w.experts[e];
    const kernels::Backend::MatmulTarget gate_up[] = {{moe_hb_->data(), &ex.w1}, {moe_hb2_->data(), &ex.w3}};
    k_.MatmulShared(xb, 1, gate_up, 2);
    k_.SwiGLU(moe_hb_->data(), moe_hb2_->data(), ffn);
    k_.Matmul(moe_out_->data(), moe_hb_->data(), ex.w2);
    k_.Axpy(out, chosen_weight_[j], moe_out_->data(), dim);
  }
}

// ---- the single rank -----------------------------------------------------------

std::unique_ptr<RankForward> WholeModelForward(const Model& m, kernels::Backend& k, int slots) {
  const ModelConfig& c = m.config;
  std::vector<LayerSlice> layers;
  for (const LayerWeights& w : m.layers)
    layers.push_back({w.wq, w.wk, w.wv, w.wo, w.w1, w.w2, w.w3, w.bq, w.bk, w.bv, &w});
  const RankWidths whole{c.n_heads, c.n_kv_heads, m.ffn_dim, 0, c.n_experts};
  const KvCacheLayout kv = corruptions::ActiveEngineHooks().KvLayout(StandardKvCacheLayout(c), c, k.name());
  static NoReduce no_reduce;  // stateless
  return std::make_unique<RankForward>(m, std::move(layers), whole, kv, k, no_reduce, slots);
}

Transformer::Transformer(const Model& model, std::unique_ptr<kernels::Backend> backend)
    : model_(model), backend_(std::move(backend)), forward_(WholeModelForward(model, *backend_, 1)) {}

Transformer::~Transformer() = default;

const float* Transformer::Forward(int token, int pos) {
  forward_->Block(&token, 1, pos, /*logits=*/true);
  return Checked();
}

int Decoder::ForwardGreedy(int token, int pos) {
  return kernels::ArgmaxReference(Forward(token, pos), model().config.vocab_size);
}

int Transformer::ForwardGreedy(int token, int pos) { return forward_->BlockGreedy(token, pos); }

const float* Transformer::Checked() {
  // A failed backend already wrote NaN where it failed; the logits are made NaN
  // too, so a caller that ignores status() still cannot use a stale row.
  float* logits = forward_->logits();
  if (!backend_->status().ok())
    std::fill(logits, logits + model_.config.vocab_size, std::numeric_limits<float>::quiet_NaN());
  return logits;
}

// The prompt in blocks of positions, so each weight matrix is read once per
// block instead of once per position; logits for the prompt's last position.
const float* Transformer::Prefill(const int* tokens, int T, int pos0) {
  const int block = backend_->prefill_block();
  for (int b = 0; b < T; b += block) {
    const int n = std::min(block, T - b);
    forward_->Block(tokens + b, n, pos0 + b, /*logits=*/b + n == T);
  }
  return Checked();
}

}  // namespace verity
