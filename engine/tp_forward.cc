// The sharded forward pass of one rank, and the leader/follower protocol that
// drives the ranks (tp_forward.h). The algebra of where the all-reduces sit
// is in docs/tensor-parallel.md.
#include "engine/tp_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/tp_hooks.h"

namespace verity {
namespace {

using kernels::Weights;

// Rows [r0, r1) of a row-major matrix: contiguous, so a view where it lies.
Weights RowSlice(const Weights& w, int r0, int r1) { return {w.dtype, w.row(r0), r1 - r0, w.cols}; }

// Columns [c0, c1): not contiguous, so copied once into `store`.
Result<Weights> ColumnSlice(const Weights& w, int c0, int c1, std::vector<unsigned char>* store, const char* what) {
  if (w.dtype == kernels::DType::kQ8_0 && (c0 % kernels::kQ8_0BlockSize || c1 % kernels::kQ8_0BlockSize))
    return Status::Error(std::string("--tp: ") + what + " columns [" + std::to_string(c0) + "," + std::to_string(c1) +
                         ") do not fall on q8_0 blocks of 32; use f32 or bf16 weights");
  // Both bounds are whole units of RowBytes (elements, or q8_0 blocks).
  const size_t skip = kernels::RowBytes(w.dtype, c0), take = kernels::RowBytes(w.dtype, c1 - c0);
  store->resize(take * w.rows);
  for (int r = 0; r < w.rows; r++) {
    if (w.dtype == kernels::DType::kQ8_0) {
      kernels::SliceQ8_0Row(w, r, c0, c1, store->data() + take * r);  // its blocks are interleaved in groups
    } else {
      std::memcpy(store->data() + take * r, w.row(r) + skip, take);
    }
  }
  return Weights{w.dtype, store->data(), w.rows, c1 - c0};
}

enum Op { kForward = 1, kPrefill = 2, kStop = 3 };

}  // namespace

// One rank: its shard of every layer, its KV cache, and the sharded forward.
class TpRank {
 public:
  TpRank(const Model& m, const RankShard& s, parallel::Collective& c, std::unique_ptr<kernels::Backend> k,
         const FaultPlan& f)
      : m_(m), s_(s), coll_(c), k_(std::move(k)), fault_(f), after_norm_(hooks::TpReduceAfterNorm()) {}

  Status Build() {
    const ModelConfig& c = m_.config;
    const int hd = PlanHeadDim(c);
    nq_ = s_.q_heads.size();
    nkv_ = s_.kv_heads.size();
    nffn_ = s_.ffn.size();
    if (nkv_ < 1 || nq_ % nkv_ != 0)
      return Status::Error("--tp: rank " + std::to_string(s_.rank) + " holds " + std::to_string(nkv_) +
                           " KV heads for " + std::to_string(nq_) + " query heads");
    layers_.resize(c.n_layers);
    for (int l = 0; l < c.n_layers; l++) {
      const LayerWeights& w = m_.layers[l];
      Layer& L = layers_[l];
      L.wq = RowSlice(w.wq, s_.q_heads.begin * hd, s_.q_heads.end * hd);
      L.wk = RowSlice(w.wk, s_.kv_heads.begin * hd, s_.kv_heads.end * hd);
      L.wv = RowSlice(w.wv, s_.kv_heads.begin * hd, s_.kv_heads.end * hd);
      VERITY_ASSIGN_OR_RETURN(L.wo, ColumnSlice(w.wo, s_.q_heads.begin * hd, s_.q_heads.end * hd, &L.wo_store, "wo"));
      if (c.n_experts == 0) {
        L.w1 = RowSlice(w.w1, s_.ffn.begin, s_.ffn.end);
        L.w3 = RowSlice(w.w3, s_.ffn.begin, s_.ffn.end);
        VERITY_ASSIGN_OR_RETURN(L.w2, ColumnSlice(w.w2, s_.ffn.begin, s_.ffn.end, &L.w2_store, "w2"));
      }
    }
    const size_t T = c.seq_len;
    x_.resize(c.dim);
    xb_.resize(c.dim);
    xb2_.resize(c.dim);
    q_.resize(static_cast<size_t>(nq_) * hd);
    rope_inv_freq_ = RopeInverseFrequencies(c);
    att_out_.resize(static_cast<size_t>(nq_) * hd);
    att_.resize(static_cast<size_t>(nq_) * T);
    hb_.resize(std::max(nffn_, m_.ffn_dim));
    hb2_.resize(std::max(nffn_, m_.ffn_dim));
    router_.resize(c.n_experts);
    moe_out_.resize(c.dim);
    logits_.resize(c.vocab_size);
    kv_dim_ = nkv_ * hd;
    key_cache_.assign(static_cast<size_t>(c.n_layers) * T * kv_dim_, 0.0f);
    value_cache_.assign(key_cache_.size(), 0.0f);
    return OkStatus();
  }

  // One position on this rank; every rank must make the same call.
  const float* Forward(int token, int pos) {
    const long before = coll_.reduces();
    Body(token, pos);
    const long made = coll_.reduces() - before, want = ReducesPerToken(m_.config);
    tokens_++;
    reduces_ += made;
    if (made != want && mismatches_++ == 0)
      first_mismatch_ = "rank " + std::to_string(s_.rank) + " made " + std::to_string(made) + " all-reduces at position " +
                        std::to_string(pos) + "; the model needs " + std::to_string(want) + " (2 per layer x " +
                        std::to_string(m_.config.n_layers) + " layers)";
    return logits_.data();
  }

  // Follower: runs the leader's steps until it stops. Returns this rank's guard status.
  Status Serve() {
    for (;;) {
      float cmd[3] = {0, 0, 0};
      coll_.AllReduceSum(cmd, 3);
      const int op = static_cast<int>(cmd[0]), a = static_cast<int>(cmd[1]), b = static_cast<int>(cmd[2]);
      if (op == kForward) {
        Forward(a, b);
      } else if (op == kPrefill) {
        std::vector<float> toks(a, 0.0f);
        coll_.AllReduceSum(toks.data(), toks.size());
        for (int i = 0; i < a; i++) Forward(static_cast<int>(toks[i]), b + i);
      } else {
        return ReportGuard();
      }
    }
  }

  // The leader's side of one step (every follower's Serve receives it).
  void Send(int op, int a, int b) {
    float cmd[3] = {static_cast<float>(op), static_cast<float>(a), static_cast<float>(b)};
    coll_.AllReduceSum(cmd, 3);
  }
  void SendTokens(const int* tokens, int T) {
    std::vector<float> toks(tokens, tokens + T);
    coll_.AllReduceSum(toks.data(), toks.size());
  }

  // After kStop: every rank adds its mismatch count and tokens, so the leader
  // learns the whole group's record. Returns this rank's own verdict.
  Status ReportGuard() {
    float rec[2] = {static_cast<float>(mismatches_), static_cast<float>(tokens_)};
    coll_.AllReduceSum(rec, 2);
    group_mismatches_ = static_cast<long>(rec[0]);
    group_tokens_ = static_cast<long>(rec[1]);
    if (mismatches_ == 0) return OkStatus();
    return Status::Error("tp collective guard: " + first_mismatch_);
  }

  long tokens() const { return tokens_; }
  long reduces() const { return reduces_; }
  long group_mismatches() const { return group_mismatches_; }
  long group_tokens() const { return group_tokens_; }
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  struct Layer {
    Weights wq, wk, wv, wo, w1, w2, w3;
    std::vector<unsigned char> wo_store, w2_store;  // the copied column slices
  };

  // The all-reduce of a row-parallel projection's partial sum, or the
  // injected fault at this site.
  void Reduce(float* partial, int n, FaultPlan::Site site, int layer) {
    const bool here = fault_.kind != FaultPlan::Kind::kNone && fault_.site == site && fault_.layer == layer;
    if (here && fault_.kind == FaultPlan::Kind::kRemove) return;
    coll_.AllReduceSum(partial, n);
    if (here && fault_.kind == FaultPlan::Kind::kDuplicate) coll_.AllReduceSum(partial, n);
  }

  bool MovedPastNorm(int layer) const {
    return after_norm_ || (fault_.kind == FaultPlan::Kind::kMove && fault_.site == FaultPlan::Site::kAttentionOut &&
                           fault_.layer == layer);
  }

  void Body(int token, int pos) {
    const ModelConfig& c = m_.config;
    const int dim = c.dim, hd = PlanHeadDim(c);
    kernels::Backend& k = *k_;
    float* x = x_.data();
    std::memcpy(x, m_.token_embedding + static_cast<size_t>(token) * dim, dim * sizeof(float));
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    const long pos_stride = kv_dim_, layer_stride = static_cast<long>(c.seq_len) * kv_dim_;
    for (int l = 0; l < c.n_layers; l++) {
      const LayerWeights& w = m_.layers[l];
      const Layer& L = layers_[l];
      // Attention: this rank's query heads and the KV heads they attend through.
      kernels::Rmsnorm(xb_.data(), x, w.rms_att, dim, c.norm_eps);
      const size_t layer_off = static_cast<size_t>(l) * layer_stride;
      float* kc = key_cache_.data() + layer_off + static_cast<size_t>(pos) * pos_stride;
      float* vc = value_cache_.data() + layer_off + static_cast<size_t>(pos) * pos_stride;
      k.Matmul(q_.data(), xb_.data(), L.wq);
      k.Matmul(kc, xb_.data(), L.wk);
      k.Matmul(vc, xb_.data(), L.wv);
      k.Rope(q_.data(), nq_ * hd, hd, pos, rope_inv_freq_.data(), interleaved);
      k.Rope(kc, kv_dim_, hd, pos, rope_inv_freq_.data(), interleaved);
      kernels::AttentionArgs a{att_out_.data(), q_.data(), key_cache_.data() + layer_off,
                               value_cache_.data() + layer_off, pos_stride, att_.data(), pos, nq_, nkv_, hd, c.seq_len};
      k.Attention(a);
      // Row-parallel o: a partial sum over this rank's heads, completed by the
      // all-reduce before the residual add and the FFN's RMSNorm.
      k.Matmul(xb2_.data(), att_out_.data(), L.wo);
      if (MovedPastNorm(l)) {
        // The deliberate bug (tests and the tp-reduce-past-norm corruption):
        // the partial sum goes through the residual add and the norm first.
        for (int i = 0; i < dim; i++) x[i] += xb2_[i];
        kernels::Rmsnorm(xb_.data(), x, w.rms_ffn, dim, c.norm_eps);
        coll_.AllReduceSum(xb_.data(), dim);
        for (int i = 0; i < dim; i++) xb_[i] /= static_cast<float>(s_.tp);
      } else {
        Reduce(xb2_.data(), dim, FaultPlan::Site::kAttentionOut, l);
        for (int i = 0; i < dim; i++) x[i] += xb2_[i];
        kernels::Rmsnorm(xb_.data(), x, w.rms_ffn, dim, c.norm_eps);
      }
      if (c.n_experts == 0) {
        // Column-parallel gate/up over this rank's FFN units, SwiGLU (its
        // units only: no reduce needed), row-parallel down: a partial sum.
        k.Matmul(hb_.data(), xb_.data(), L.w1);
        k.Matmul(hb2_.data(), xb_.data(), L.w3);
        k.SwiGLU(hb_.data(), hb2_.data(), nffn_);
        k.Matmul(xb2_.data(), hb_.data(), L.w2);
        Reduce(xb2_.data(), dim, FaultPlan::Site::kFfnOut, l);
        for (int i = 0; i < dim; i++) x[i] += xb2_[i];
      } else {
        Experts(w, l);
        for (int i = 0; i < dim; i++) x[i] += moe_out_[i];
      }
    }
    kernels::Rmsnorm(x, x, m_.rms_final, dim, c.norm_eps);
    k.Matmul(logits_.data(), x, m_.classifier);
  }

  // Mixtral routing on every rank (the router is replicated and xb agrees),
  // the chosen experts that lie in this rank's band, and the all-reduce that
  // completes the weighted sum before the residual add and the next norm.
  void Experts(const LayerWeights& w, int layer) {
    const ModelConfig& c = m_.config;
    kernels::Backend& k = *k_;
    const int dim = c.dim, n = c.n_experts, topk = c.n_experts_per_tok, ffn = m_.ffn_dim;
    k.Matmul(router_.data(), xb_.data(), w.router);
    chosen_.clear();
    for (int e = 0; e < n; e++) chosen_.push_back(e);
    std::partial_sort(chosen_.begin(), chosen_.begin() + topk, chosen_.end(), [&](int a, int b) {
      return router_[a] != router_[b] ? router_[a] > router_[b] : a < b;
    });
    float mx = router_[chosen_[0]], sum = 0.0f;
    for (int j = 0; j < topk; j++) sum += expf(router_[chosen_[j]] - mx);
    std::fill(moe_out_.begin(), moe_out_.end(), 0.0f);
    for (int j = 0; j < topk; j++) {
      if (!s_.experts.Contains(chosen_[j])) continue;
      const ExpertWeights& e = w.experts[chosen_[j]];
      const float weight = expf(router_[chosen_[j]] - mx) / sum;
      k.Matmul(hb_.data(), xb_.data(), e.w1);
      k.Matmul(hb2_.data(), xb_.data(), e.w3);
      k.SwiGLU(hb_.data(), hb2_.data(), ffn);
      k.Matmul(xb2_.data(), hb_.data(), e.w2);
      for (int i = 0; i < dim; i++) moe_out_[i] += weight * xb2_[i];
    }
    Reduce(moe_out_.data(), dim, FaultPlan::Site::kFfnOut, layer);
  }

  const Model& m_;
  RankShard s_;
  parallel::CountingCollective coll_;
  std::unique_ptr<kernels::Backend> k_;
  FaultPlan fault_;
  bool after_norm_;
  int nq_ = 0, nkv_ = 0, nffn_ = 0, kv_dim_ = 0;
  std::vector<Layer> layers_;
  std::vector<float> x_, xb_, xb2_, q_, att_out_, att_, hb_, hb2_, router_, moe_out_, logits_;
  std::vector<float> rope_inv_freq_;  // RopeInverseFrequencies(config), once
  std::vector<int> chosen_;
  std::vector<float> key_cache_, value_cache_;
  long tokens_ = 0, reduces_ = 0, mismatches_ = 0, group_mismatches_ = 0, group_tokens_ = 0;
  std::string first_mismatch_;
};

// ---- the group --------------------------------------------------------------

Result<std::unique_ptr<TpGroup>> TpGroup::Open(const TpOptions& o) {
  // The dtype is refused first, before any rank, device or weight exists.
  VERITY_RETURN_IF_ERROR(parallel::CheckReduceDType(o.collective, o.reduce_dtype));
  if (o.tp < 1 || o.tp > 256) return Status::Error("--tp " + std::to_string(o.tp) + " is outside [1, 256]");
  std::unique_ptr<TpGroup> g(new TpGroup());
  g->opt_ = o;
  if (o.collective == "inproc" || o.collective == "nccl") {
    VERITY_ASSIGN_OR_RETURN(g->inproc_, parallel::InProcGroup::Create(o.tp, o.reduce_dtype));
    for (int r = 0; r < o.tp; r++) g->local_.push_back(&g->inproc_->Rank(r));
  } else if (o.collective == "mpi") {
    VERITY_ASSIGN_OR_RETURN(g->own_, parallel::MakeMpiCollective(o.tp, o.reduce_dtype));
    g->local_.push_back(g->own_.get());
  } else {
    return Status::Error("--tp-backend " + o.collective + ": expected inproc, mpi or nccl");
  }
  // Runs `fn(rank index)` on every local rank at once (collectives need every rank).
  auto on_every_rank = [&](auto fn) {
    std::vector<Status> st(g->local_.size());
    std::vector<std::thread> th;
    for (size_t i = 1; i < g->local_.size(); i++) th.emplace_back([&, i] { st[i] = fn(i); });
    st[0] = fn(0);
    for (auto& t : th) t.join();
    for (auto& s : st) VERITY_RETURN_IF_ERROR(s);
    return OkStatus();
  };
  if (o.collective == "nccl") {
    g->nccl_.resize(o.tp);
    VERITY_RETURN_IF_ERROR(on_every_rank([&](size_t i) -> Status {
      VERITY_ASSIGN_OR_RETURN(g->nccl_[i], parallel::MakeNcclCollective(*g->local_[i], o.reduce_dtype));
      return OkStatus();
    }));
    for (int r = 0; r < o.tp; r++) g->local_[r] = g->nccl_[r].get();
  }
  constexpr size_t kCheckElements = 4096;
  VERITY_RETURN_IF_ERROR(on_every_rank([&](size_t i) { return parallel::CheckAllReduce(*g->local_[i], kCheckElements); }));
  if (g->leader())
    std::fprintf(stderr,
                 "tp all-reduce check: tp=%d %s: every rank contributed rank+1 and read tp(tp+1)/2 = %d in all %zu "
                 "elements verdict=PASS\n",
                 o.tp, o.collective.c_str(), o.tp * (o.tp + 1) / 2, kCheckElements);
  return g;
}

TpGroup::~TpGroup() { Stop(); }

// A group whose set-up failed holds no rank (its destructor still runs Stop).
bool TpGroup::leader() const { return !local_.empty() && local_.front()->rank() == 0; }

Status TpGroup::Build(const Model& model, std::vector<std::unique_ptr<TpRank>>* ranks) {
  const ModelConfig& c = model.config;
  if (model.ffn_dim != c.hidden_dim)
    return Status::Error("--tp: the FFN is padded to " + std::to_string(model.ffn_dim) + " units for q8_0 (hidden_dim " +
                         std::to_string(c.hidden_dim) + "); use f32 or bf16 weights");
  if (c.vocab_size > (1 << 24))
    return Status::Error("--tp: vocab_size=" + std::to_string(c.vocab_size) + " exceeds 2^24 (token ids travel as f32)");
  VERITY_ASSIGN_OR_RETURN(ShardPlan plan, PlanShards(c, opt_.tp));
  long checks = 0;
  Status cover = CheckPlanCoverage(c, plan, &checks);
  if (leader())
    std::fprintf(stderr, "tp shard plan check: %s: %ld index checks over the sharded tensors verdict=%s\n",
                 DescribePlan(plan).c_str(), checks, cover.ok() ? "PASS" : "FAIL");
  VERITY_RETURN_IF_ERROR(cover);
  for (parallel::Collective* coll : local_) {
    VERITY_ASSIGN_OR_RETURN(auto k, kernels::MakeBackend(opt_.kernels));
    RankShard shard = plan.ranks[coll->rank()];
    if (opt_.fault.kind == FaultPlan::Kind::kBandGap && shard.rank == 0 && c.n_experts == 0) shard.ffn.end -= 1;
    auto rank = std::make_unique<TpRank>(model, shard, *coll, std::move(k), opt_.fault);
    VERITY_RETURN_IF_ERROR(rank->Build());
    ranks->push_back(std::move(rank));
  }
  return OkStatus();
}

Result<std::unique_ptr<TpDecoder>> TpGroup::Start(const Model& model) {
  if (!leader()) return Status::Error("--tp: Start is for rank 0; rank " + std::to_string(local_.front()->rank()) + " serves");
  if (!ready_) return Status::Error("--tp: Start before the ranks agreed the model loaded (TpGroup::Agree)");
  if (started_) return Status::Error("--tp: the group has already started");
  Status built = Build(model, &ranks_);
  if (!built.ok()) {
    build_failed_ = true;  // the followers' Build fails alike (same plan, same file): nobody serves
    return built;
  }
  started_ = true;
  follower_status_.assign(ranks_.size(), OkStatus());
  for (size_t i = 1; i < ranks_.size(); i++)
    followers_.emplace_back([this, i] { follower_status_[i] = ranks_[i]->Serve(); });
  return std::unique_ptr<TpDecoder>(new TpDecoder(*this, model, *ranks_[0]));
}

Status TpGroup::Serve(const Model& model) {
  if (leader()) return Status::Error("--tp: rank 0 leads; it does not serve");
  if (!ready_) return Status::Error("--tp: Serve before the ranks agreed the model loaded");
  std::vector<std::unique_ptr<TpRank>> mine;
  Status built = Build(model, &mine);
  if (!built.ok()) return built;  // the leader's Build fails alike (same plan, same file)
  stopped_ = true;
  return mine[0]->Serve();
}

void TpGroup::Stop() {
  if (stopped_ || !leader()) return;
  stopped_ = true;
  if (!started_) {
    // MPI followers that agreed to run are serving, waiting for a step: release them.
    if (!inproc_ && ready_ && !build_failed_ && opt_.tp > 1) {
      float cmd[3] = {static_cast<float>(kStop), 0, 0};
      local_.front()->AllReduceSum(cmd, 3);
      float rec[2] = {0, 0};
      local_.front()->AllReduceSum(rec, 2);
    }
    return;
  }
  ranks_[0]->Send(kStop, 0, 0);
  (void)ranks_[0]->ReportGuard();
  for (auto& t : followers_) t.join();
  followers_.clear();
}

Status TpGroup::Agree(const Status& local) {
  if (inproc_) {
    ready_ = local.ok();
    return local;
  }
  float failed[1] = {local.ok() ? 0.0f : 1.0f};
  local_.front()->AllReduceSum(failed, 1);
  if (!local.ok()) return local;
  if (failed[0] != 0.0f)
    return Status::Error("--tp: " + std::to_string(static_cast<int>(failed[0])) + " other rank(s) failed to load the model");
  ready_ = true;
  return OkStatus();
}

// ---- the leader's decoder ---------------------------------------------------

TpDecoder::TpDecoder(TpGroup& g, const Model& m, TpRank& rank0) : group_(g), model_(m), rank0_(rank0) {
  name_ = g.opt_.kernels + " tp=" + std::to_string(g.opt_.tp) + " " + g.opt_.collective;
}

TpDecoder::~TpDecoder() {
  if (!finished_) (void)Finish();
}

const float* TpDecoder::Forward(int token, int pos) {
  rank0_.Send(kForward, token, pos);
  return rank0_.Forward(token, pos);
}

const float* TpDecoder::Prefill(const int* tokens, int T, int pos0) {
  rank0_.Send(kPrefill, T, pos0);
  rank0_.SendTokens(tokens, T);
  const float* out = nullptr;
  for (int i = 0; i < T; i++) out = rank0_.Forward(tokens[i], pos0 + i);
  return out;
}

long TpDecoder::tokens_checked() const { return rank0_.tokens(); }
long TpDecoder::reduces_counted() const { return rank0_.reduces(); }

Status TpDecoder::Finish() {
  if (finished_) return finish_status_;
  finished_ = true;
  group_.Stop();
  const ModelConfig& c = model_.config;
  const long want = ReducesPerToken(c);
  const long bad = rank0_.group_mismatches();
  std::string first = rank0_.first_mismatch();
  for (size_t i = 1; i < group_.follower_status_.size() && first.empty(); i++)
    if (!group_.follower_status_[i].ok()) first = group_.follower_status_[i].message();
  std::fprintf(stderr,
               "tp collective guard: %ld all-reduces per position expected (2 per layer x %d layers%s); rank 0 ran %ld "
               "positions and counted %ld; %ld rank-position(s) of %ld off count verdict=%s\n",
               want, c.n_layers, c.n_experts ? ", MoE: attention out + expert sum" : "", rank0_.tokens(),
               rank0_.reduces(), bad, rank0_.group_tokens(), bad == 0 ? "PASS" : "FAIL");
  if (bad != 0)
    finish_status_ = Status::Error("tp collective guard: " + std::to_string(bad) + " rank-position(s) made the wrong "
                                   "number of all-reduces; first: " + (first.empty() ? "(on a follower process)" : first));
  return finish_status_;
}

}  // namespace verity
