// Tensor-parallel execution (docs/tensor-parallel.md): each rank holds its
// shard of the weights (engine/shard_plan.h) and runs the forward pass on it,
// reducing through one collective (parallel/collective.h): column-parallel
// q/k/v and gate/up, row-parallel o and down, one all-reduce after each
// row-parallel projection, before the residual add and the norm that follows.
// MoE layers hold whole experts in bands; the all-reduce completes the
// partial expert sum before the residual add and the next norm.
//
// Rank 0 leads: TpDecoder (a Decoder, so Generate, teacher forcing, parity
// and bench drive it unchanged) sends each step to the other ranks, which
// follow. In-process, the followers are threads; under MPI, processes whose
// command calls TpGroup::Serve.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/rank_forward.h"
#include "engine/shard_plan.h"
#include "parallel/collective.h"

namespace verity {

// Test-only fault injection into the sharded forward (never set by the CLI):
// at `layer`'s `site`, the all-reduce is removed, made twice, or moved past
// the norm that follows (attention site only: each rank adds its partial sum
// to the residual and normalizes it, and the all-reduce averages the
// normalized rows); or (kBandGap) rank 0 slices its FFN band one unit short
// after the plan was checked, so the parity figures alone must see the gap.
struct FaultPlan {
  enum class Kind { kNone, kRemove, kDuplicate, kMove, kBandGap };
  using Site = ReduceSite;  // kAttentionOut or kFfnOut
  Kind kind = Kind::kNone;
  Site site = Site::kAttentionOut;
  int layer = 0;
};

struct TpOptions {
  int tp = 1;
  // inproc | mpi | nccl (in-process ranks, one GPU each) | mpi-nccl (one
  // process per rank under mpirun, NCCL between their GPUs, MPI to set it up)
  std::string collective = "inproc";
  std::string kernels = "fast";  // the kernels::Backend each rank computes on
  // What the collective reduces in; anything but f32 is refused at Open.
  parallel::ReduceDType reduce_dtype = parallel::ReduceDType::kF32;
  FaultPlan fault;  // tests only
  // Tests only: makes each rank's backend instead of `kernels` by name (a
  // backend whose state the engine cannot read in place: tests/off_host_backend.h).
  std::function<Result<std::unique_ptr<kernels::Backend>>()> make_kernels;
};

// All-reduces a rank makes per step (one position, or one block of prompt
// positions: a block's rows are reduced together): one after the attention
// output projection and one after the FFN's down projection (dense) or the
// partial expert sum (MoE), in every layer.
inline long ReducesPerStep(const ModelConfig& c) { return 2L * c.n_layers; }

class TpRank;
class TpDecoder;

// The ranks of one tensor-parallel run in this process: all of them
// (in-process), or one (MPI). Open it before loading weights.
class TpGroup {
 public:
  // Makes the collectives (refusing a non-f32 reduce dtype, a missing MPI or
  // NCCL, an MPI world of another size) and runs the all-reduce check on every
  // rank, printing "tp all-reduce check: ... verdict=PASS" (rank 0, stderr).
  static Result<std::unique_ptr<TpGroup>> Open(const TpOptions& o);
  ~TpGroup();
  // True iff this process holds rank 0 (in-process: always).
  bool leader() const;
  int tp() const { return opt_.tp; }
  // Every rank reports whether it loaded the model (MPI: one all-reduce), so
  // all go on or all stop. Returns `local`'s error, or one naming the other
  // ranks' failure. Call it once, after loading, before Start or Serve.
  Status Agree(const Status& local);
  // Leader: plans the shards (the plan is checked, "tp shard plan check: ..."),
  // builds every local rank over `model`, starts the in-process followers and
  // returns the decoder. `model` must outlive it.
  Result<std::unique_ptr<TpDecoder>> Start(const Model& model);
  // MPI follower: builds this rank over `model` and follows the leader's steps
  // until it stops. Returns the rank's guard status.
  Status Serve(const Model& model);

 private:
  friend class TpDecoder;
  TpGroup() = default;
  Status Build(const Model& model, std::vector<std::unique_ptr<TpRank>>* ranks);
  void Stop();
  TpOptions opt_;
  std::unique_ptr<parallel::InProcGroup> inproc_;
  std::unique_ptr<parallel::Collective> own_;                // mpi (also the bootstrap of mpi-nccl)
  std::vector<std::unique_ptr<parallel::Collective>> nccl_;  // nccl, mpi-nccl: one per local rank
  std::vector<parallel::Collective*> local_;                 // the collective of each local rank
  bool stopped_ = false, started_ = false, ready_ = false, build_failed_ = false;
  std::vector<std::thread> followers_;
  std::vector<std::unique_ptr<TpRank>> ranks_;
  std::vector<Status> follower_status_;
};

class TpDecoder : public Decoder {
 public:
  ~TpDecoder() override;
  const float* Forward(int token, int pos) override;
  const float* Prefill(const int* tokens, int T, int pos0) override;
  const Model& model() const override { return model_; }
  const char* backend_name() const override { return name_.c_str(); }
  // Stops the followers and checks the collective count of every rank on
  // every step run: prints "tp collective guard: ... verdict=PASS|FAIL"
  // (stderr) and returns an error naming the first mismatch.
  [[nodiscard]] Status Finish();
  // The count guard's record so far on rank 0 (tests): steps (positions and
  // prefill blocks) checked, the positions they ran, the all-reduces made.
  long steps_checked() const;
  long positions_run() const;
  long reduces_counted() const;
  // The thread pools' counters summed over this process's ranks (in-process:
  // every rank; MPI: rank 0's own); nullopt when no rank's pool has more than
  // one thread.
  std::optional<kernels::Backend::PoolCounters> pool_counters() const override;

 private:
  friend class TpGroup;
  TpDecoder(TpGroup& g, const Model& m, TpRank& rank0);
  TpGroup& group_;
  const Model& model_;
  TpRank& rank0_;
  std::string name_;
  bool finished_ = false;
  Status finish_status_;
};

}  // namespace verity
