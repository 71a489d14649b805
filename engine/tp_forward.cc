// The sharded forward pass of one rank, and the leader/follower protocol that
// drives the ranks (tp_forward.h). The algebra of where the all-reduces sit
// is in docs/tensor-parallel.md.
#include "engine/tp_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/rank_forward.h"
#include "corruptions/engine_hooks.h"

namespace verity {
namespace {

using kernels::Weights;

// Rows [r0, r1) of a row-major matrix: contiguous, so a view where it lies.
Weights RowSlice(const Weights& w, int r0, int r1) { return {w.dtype, w.row(r0), r1 - r0, w.cols, w.block}; }

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

// Completes a row-parallel projection's partial sums through the collective:
// one all-reduce per site that needs one, or the injected fault at that site.
class CollectiveReducer final : public Reducer {
 public:
  CollectiveReducer(parallel::Collective& c, kernels::Backend& k, const FaultPlan& f, int tp)
      : coll_(c), k_(k), fault_(f), tp_(tp), after_norm_(corruptions::ActiveEngineHooks().TpReduceAfterNorm()) {}

  void Reduce(float* x, size_t n, ReduceSite site, int layer) override {
    const bool moved = MovedPastNorm(layer);
    if (site == ReduceSite::kPastFfnNorm) {
      if (!moved) return;  // nothing reduces here: the FFN norm needs the complete residual
      // The deliberate bug (tests and the tp-reduce-past-norm corruption): each
      // rank added its partial o to the residual and normalized that; the
      // all-reduce averages the normalized rows.
      AllReduce(x, n);
      k_.DivideInPlace(x, static_cast<float>(tp_), n);
      return;
    }
    if (site == ReduceSite::kAttentionOut && moved) return;
    const bool here = fault_.kind != FaultPlan::Kind::kNone && fault_.site == site && fault_.layer == layer;
    if (here && fault_.kind == FaultPlan::Kind::kRemove) return;
    AllReduce(x, n);
    if (here && fault_.kind == FaultPlan::Kind::kDuplicate) AllReduce(x, n);
  }

 private:
  // x is the backend's state. Host state, or a collective that reduces device
  // memory in the backend's order (NCCL on the backend's stream), reduces it
  // in place; otherwise it goes through host memory and back (a device
  // backend under the in-process or MPI collective).
  void AllReduce(float* x, size_t n) {
    if (k_.state_on_host()) return coll_.AllReduceSum(x, n);
    if (coll_.reduces_device_memory()) return coll_.AllReduceSumOnDevice(x, n, k_.device_stream());
    staged_.resize(n);
    k_.Download(staged_.data(), x, n);
    coll_.AllReduceSum(staged_.data(), n);
    k_.Upload(x, staged_.data(), n);
  }

  bool MovedPastNorm(int layer) const {
    return after_norm_ ||
           (fault_.kind == FaultPlan::Kind::kMove && fault_.site == ReduceSite::kAttentionOut && fault_.layer == layer);
  }
  parallel::Collective& coll_;
  kernels::Backend& k_;
  FaultPlan fault_;
  int tp_;
  bool after_norm_;
  std::vector<float> staged_;  // a device backend's partial sums on their way through a host collective
};

// One rank: its shard of every layer and the forward pass over it
// (RankForward, the single rank's code), counted step by step.
class TpRank {
 public:
  TpRank(const Model& m, const RankShard& s, parallel::Collective& c, std::unique_ptr<kernels::Backend> k,
         const FaultPlan& f)
      : m_(m), s_(s), coll_(c), k_(std::move(k)), reducer_(coll_, *k_, f, s.tp) {}

  Status Build() {
    const ModelConfig& c = m_.config;
    const int hd = PlanHeadDim(c);
    const int nq = s_.q_heads.size(), nkv = s_.kv_heads.size();
    if (nkv < 1 || nq % nkv != 0)
      return Status::Error("--tp: rank " + std::to_string(s_.rank) + " holds " + std::to_string(nkv) +
                           " KV heads for " + std::to_string(nq) + " query heads");
    std::vector<LayerSlice> slices(c.n_layers);
    stores_.resize(c.n_layers);
    for (int l = 0; l < c.n_layers; l++) {
      const LayerWeights& w = m_.layers[l];
      LayerSlice& L = slices[l];
      L.full = &w;
      L.wq = RowSlice(w.wq, s_.q_heads.begin * hd, s_.q_heads.end * hd);
      L.wk = RowSlice(w.wk, s_.kv_heads.begin * hd, s_.kv_heads.end * hd);
      L.wv = RowSlice(w.wv, s_.kv_heads.begin * hd, s_.kv_heads.end * hd);
      if (w.bq) {  // biases shard with their heads' rows
        L.bq = w.bq + static_cast<size_t>(s_.q_heads.begin) * hd;
        L.bk = w.bk + static_cast<size_t>(s_.kv_heads.begin) * hd;
        L.bv = w.bv + static_cast<size_t>(s_.kv_heads.begin) * hd;
      }
      VERITY_ASSIGN_OR_RETURN(L.wo,
                              ColumnSlice(w.wo, s_.q_heads.begin * hd, s_.q_heads.end * hd, &stores_[l].wo, "wo"));
      if (c.n_experts == 0) {
        L.w1 = RowSlice(w.w1, s_.ffn.begin, s_.ffn.end);
        L.w3 = RowSlice(w.w3, s_.ffn.begin, s_.ffn.end);
        VERITY_ASSIGN_OR_RETURN(L.w2, ColumnSlice(w.w2, s_.ffn.begin, s_.ffn.end, &stores_[l].w2, "w2"));
      }
    }
    const RankWidths widths{nq, nkv, s_.ffn.size(), s_.experts.begin, s_.experts.end};
    KvCacheLayout kv;  // [layer][position][this rank's kv_dim]
    kv.pos_stride = static_cast<long>(nkv) * hd;
    kv.layer_stride = static_cast<long>(c.seq_len) * kv.pos_stride;
    kv.floats = static_cast<size_t>(c.n_layers) * kv.layer_stride;
    forward_ = std::make_unique<RankForward>(m_, std::move(slices), widths, kv, *k_, reducer_);
    return OkStatus();
  }

  // One position on this rank; every rank must make the same call.
  const float* Forward(int token, int pos) {
    Step(&token, 1, pos, true);
    return forward_->logits();
  }

  // Positions pos0 .. pos0+T-1 in blocks of the backend's prefill_block, one
  // step (and one all-reduce per row-parallel projection) per block.
  const float* Prefill(const int* tokens, int T, int pos0) {
    const int block = k_->prefill_block();
    for (int b = 0; b < T; b += block) {
      const int n = std::min(block, T - b);
      Step(tokens + b, n, pos0 + b, b + n == T);
    }
    return forward_->logits();
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
        std::vector<int> ids(toks.begin(), toks.end());
        Prefill(ids.data(), a, b);
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

  // After kStop: every rank adds its mismatch count and steps, so the leader
  // learns the whole group's record. Returns this rank's own verdict.
  Status ReportGuard() {
    float rec[2] = {static_cast<float>(mismatches_), static_cast<float>(steps_)};
    coll_.AllReduceSum(rec, 2);
    group_mismatches_ = static_cast<long>(rec[0]);
    group_steps_ = static_cast<long>(rec[1]);
    if (mismatches_ == 0) return OkStatus();
    return Status::Error("tp collective guard: " + first_mismatch_);
  }

  std::optional<kernels::Backend::PoolCounters> pool_counters() const { return k_->pool_counters(); }
  long steps() const { return steps_; }
  long positions() const { return positions_; }
  long reduces() const { return reduces_; }
  long group_mismatches() const { return group_mismatches_; }
  long group_steps() const { return group_steps_; }
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  // One step (a position, or a block of prompt positions) and its count: the
  // all-reduces it made must be ReducesPerStep, whatever the block's size.
  void Step(const int* tokens, int n, int pos0, bool logits) {
    const long before = coll_.reduces();
    forward_->Block(tokens, n, pos0, logits);
    const long made = coll_.reduces() - before, want = ReducesPerStep(m_.config);
    steps_++;
    positions_ += n;
    reduces_ += made;
    if (made != want && mismatches_++ == 0)
      first_mismatch_ =
          "rank " + std::to_string(s_.rank) + " made " + std::to_string(made) + " all-reduces at " +
          (n == 1 ? "position " + std::to_string(pos0)
                  : "the block of positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + n - 1)) +
          "; the model needs " + std::to_string(want) + " (2 per layer x " + std::to_string(m_.config.n_layers) +
          " layers)";
  }

  struct ColumnStores {
    std::vector<unsigned char> wo, w2;  // the copied column slices
  };

  const Model& m_;
  RankShard s_;
  parallel::CountingCollective coll_;
  std::unique_ptr<kernels::Backend> k_;
  CollectiveReducer reducer_;
  std::vector<ColumnStores> stores_;
  std::unique_ptr<RankForward> forward_;
  long steps_ = 0, positions_ = 0, reduces_ = 0, mismatches_ = 0, group_mismatches_ = 0, group_steps_ = 0;
  std::string first_mismatch_;
};

// ---- the group --------------------------------------------------------------

Result<std::unique_ptr<TpGroup>> TpGroup::Open(const TpOptions& o) {
  // The dtype is refused first, before any rank, device or weight exists.
  VERITY_RETURN_IF_ERROR(parallel::CheckReduceDType(o.collective, o.reduce_dtype));
  if (o.tp < 1 || o.tp > 256) return Status::Error("--tp " + std::to_string(o.tp) + " is outside [1, 256]");
  std::unique_ptr<TpGroup> g(new TpGroup());
  g->opt_ = o;
  // The ranks' first collective: in-process threads or this MPI process. NCCL
  // is then set up over it (its unique id travels through it).
  const bool nccl = o.collective == "nccl" || o.collective == "mpi-nccl";
  if (o.collective == "inproc" || o.collective == "nccl") {
    VERITY_ASSIGN_OR_RETURN(g->inproc_, parallel::InProcGroup::Create(o.tp, o.reduce_dtype));
    for (int r = 0; r < o.tp; r++) g->local_.push_back(&g->inproc_->Rank(r));
  } else if (o.collective == "mpi" || o.collective == "mpi-nccl") {
    VERITY_ASSIGN_OR_RETURN(g->own_, parallel::MakeMpiCollective(o.tp, o.reduce_dtype));
    g->local_.push_back(g->own_.get());
  } else {
    return Status::Error("--tp-backend " + o.collective + ": expected inproc, mpi, nccl or mpi-nccl");
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
  if (nccl) {
    g->nccl_.resize(g->local_.size());
    VERITY_RETURN_IF_ERROR(on_every_rank([&](size_t i) -> Status {
      auto made = parallel::MakeNcclCollective(*g->local_[i], o.reduce_dtype);
      if (!made.ok()) {
        const std::string& m = made.status().message();
        return m.rfind("--tp-backend", 0) == 0 ? made.status()
                                               : Status::Error("--tp-backend " + o.collective + ": " + m);
      }
      g->nccl_[i] = std::move(made.value());
      return OkStatus();
    }));
    for (size_t i = 0; i < g->local_.size(); i++) g->local_[i] = g->nccl_[i].get();
  }
  constexpr size_t kCheckElements = 4096;
  VERITY_RETURN_IF_ERROR(
      on_every_rank([&](size_t i) { return parallel::CheckAllReduce(*g->local_[i], kCheckElements); }));
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
  // A shard's columns may cut a block (and the ranks have no block kernels
  // planned): refused outright rather than split or expanded to f32.
  if (!model.first_block_tensor.empty())
    return Status::Error("--tp: " + model.source + ": tensor " + model.first_block_tensor +
                         " is a llama.cpp block quantization; tensor parallelism does not shard block-quantized "
                         "matrices yet (run without --tp, on the fast or reference backend)");
  if (model.ffn_dim != c.hidden_dim)
    return Status::Error("--tp: the FFN is padded to " + std::to_string(model.ffn_dim) +
                         " units for q8_0 (hidden_dim " + std::to_string(c.hidden_dim) + "); use f32 or bf16 weights");
  if (c.vocab_size > (1 << 24))
    return Status::Error("--tp: vocab_size=" + std::to_string(c.vocab_size) +
                         " exceeds 2^24 (token ids travel as f32)");
  VERITY_ASSIGN_OR_RETURN(ShardPlan plan, PlanShards(c, opt_.tp));
  long checks = 0;
  Status cover = CheckPlanCoverage(c, plan, &checks);
  if (leader())
    std::fprintf(stderr, "tp shard plan check: %s: %ld index checks over the sharded tensors verdict=%s\n",
                 DescribePlan(plan).c_str(), checks, cover.ok() ? "PASS" : "FAIL");
  VERITY_RETURN_IF_ERROR(cover);
  for (parallel::Collective* coll : local_) {
    // A device backend on the rank's own device (rank r on device r % count, as NCCL places it).
    VERITY_ASSIGN_OR_RETURN(auto k,
                            opt_.make_kernels ? opt_.make_kernels() : kernels::MakeBackend(opt_.kernels, coll->rank()));
    VERITY_RETURN_IF_ERROR(CheckBackendRunsModel(model, *k));
    RankShard shard = plan.ranks[coll->rank()];
    if (opt_.fault.kind == FaultPlan::Kind::kBandGap && shard.rank == 0 && c.n_experts == 0) shard.ffn.end -= 1;
    auto rank = std::make_unique<TpRank>(model, shard, *coll, std::move(k), opt_.fault);
    VERITY_RETURN_IF_ERROR(rank->Build());
    ranks->push_back(std::move(rank));
  }
  return OkStatus();
}

Result<std::unique_ptr<TpDecoder>> TpGroup::Start(const Model& model) {
  if (!leader())
    return Status::Error("--tp: Start is for rank 0; rank " + std::to_string(local_.front()->rank()) + " serves");
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
    return Status::Error("--tp: " + std::to_string(static_cast<int>(failed[0])) +
                         " other rank(s) failed to load the model");
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
  return rank0_.Prefill(tokens, T, pos0);
}

std::optional<kernels::Backend::PoolCounters> TpDecoder::pool_counters() const {
  std::optional<kernels::Backend::PoolCounters> sum;
  for (const auto& rank : group_.ranks_) {
    const auto c = rank->pool_counters();
    if (!c) continue;
    if (!sum) sum.emplace();
    sum->split_jobs += c->split_jobs;
    sum->caller_jobs += c->caller_jobs;
    sum->backoff_jobs += c->backoff_jobs;
    sum->stalls += c->stalls;
    sum->contended_windows += c->contended_windows;
  }
  return sum;
}

long TpDecoder::steps_checked() const { return rank0_.steps(); }
long TpDecoder::positions_run() const { return rank0_.positions(); }
long TpDecoder::reduces_counted() const { return rank0_.reduces(); }

Status TpDecoder::Finish() {
  if (finished_) return finish_status_;
  finished_ = true;
  group_.Stop();
  const ModelConfig& c = model_.config;
  const long want = ReducesPerStep(c);
  const long bad = rank0_.group_mismatches();
  std::string first = rank0_.first_mismatch();
  for (size_t i = 1; i < group_.follower_status_.size() && first.empty(); i++)
    if (!group_.follower_status_[i].ok()) first = group_.follower_status_[i].message();
  std::fprintf(stderr,
               "tp collective guard: %ld all-reduces per step expected (2 per layer x %d layers%s; a step is a "
               "position or a prefill block); rank 0 ran %ld steps (%ld positions) and counted %ld; %ld rank-step(s) "
               "of %ld off count verdict=%s\n",
               want, c.n_layers, c.n_experts ? ", MoE: attention out + expert sum" : "", rank0_.steps(),
               rank0_.positions(), rank0_.reduces(), bad, rank0_.group_steps(), bad == 0 ? "PASS" : "FAIL");
  if (bad != 0)
    finish_status_ = Status::Error("tp collective guard: " + std::to_string(bad) +
                                   " rank-step(s) made the wrong "
                                   "number of all-reduces; first: " +
                                   (first.empty() ? "(on a follower process)" : first));
  return finish_status_;
}

}  // namespace verity
