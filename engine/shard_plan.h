// Tensor-parallel shard plan: which slice of every sharded tensor each rank
// holds, as pure functions of a ModelConfig and tp (no threads, no devices).
//
// Rules (docs/tensor-parallel.md): query heads split in tp equal bands; KV
// heads split in tp equal bands when n_kv_heads >= tp, otherwise each rank
// holds (a replica of) the one KV group its query heads attend through, which
// needs tp % n_kv_heads == 0; the dense FFN's units (rows of w1/w3, columns of
// w2) split in tp bands; MoE experts are held whole, in tp bands; norms, the
// router, the embedding and the classifier are replicated. Every sharded axis
// must divide by tp, and a refusal names the field and the values.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace verity {

// A half-open range [begin, end) of indices along one axis.
struct Band {
  int begin = 0, end = 0;
  int size() const { return end - begin; }
  bool Contains(int i) const { return i >= begin && i < end; }
};

// What one rank holds. Bands are in units of heads, FFN units, experts and
// vocabulary rows; RowsOf/ColsOf turn them into matrix rows.
struct RankShard {
  int rank = 0, tp = 1;
  Band q_heads;   // query heads: rows of wq, columns of wo
  Band kv_heads;  // KV heads: rows of wk and wv (a replica when kv_replicated)
  bool kv_replicated = false;
  Band ffn;      // dense FFN units: rows of w1/w3, columns of w2 (whole for MoE)
  Band experts;  // MoE experts held whole (empty for a dense model)
  Band vocab;    // classifier rows: the whole vocabulary (replicated by design)
};

struct ShardPlan {
  int tp = 1;
  int head_dim = 0;
  std::vector<RankShard> ranks;  // ranks[r].rank == r
};

// The head width every band is measured in. The one place the plan reads it,
// so a config that states head_dim explicitly changes one line.
inline int PlanHeadDim(const ModelConfig& c) { return c.head_size(); }

// Returns the plan for `tp` ranks, or an error naming the first axis that does
// not divide ("n_heads=96 is not divisible by tp=7",
// "intermediate_size=172 is not divisible by tp=8"). Axes are checked in a
// fixed order: heads, KV heads, FFN width (dense) or experts (MoE).
Result<ShardPlan> PlanShards(const ModelConfig& c, int tp);

// Checks that the ranks' bands cover every sharded tensor of `c` exactly:
// every row/column index along a sharded axis owned by exactly one rank, or,
// for KV rows when n_kv_heads < tp, held by exactly tp / n_kv_heads ranks with
// each query head's group on the rank that holds the query head; replicated
// tensors held by every rank. Adds the number of index checks made to
// *checks. Returns an error naming the tensor, index and owners on the first
// violation. Run at start-up by every tensor-parallel run and by the tests.
Status CheckPlanCoverage(const ModelConfig& c, const ShardPlan& plan, long* checks);

// One line: "tp=2: rank 0 q_heads [0,4) kv_heads [0,2) ffn [0,86) ...; rank 1 ...".
std::string DescribePlan(const ShardPlan& plan);

}  // namespace verity
