#include "engine/shard_plan.h"

#include <sstream>

#include "corruptions/engine_hooks.h"

namespace verity {
namespace {

Status NotDivisible(const char* field, int value, int tp) {
  return Status::Error(std::string(field) + "=" + std::to_string(value) +
                       " is not divisible by tp=" + std::to_string(tp));
}

// Band r of `n` indices split in `parts` equal bands (n % parts == 0).
Band EqualBand(int n, int parts, int r) { return {r * (n / parts), (r + 1) * (n / parts)}; }

std::string BandText(const Band& b) { return "[" + std::to_string(b.begin) + "," + std::to_string(b.end) + ")"; }

// Counts, for every index along an axis of `n`, the ranks whose band (in
// units of `unit` indices) holds it.
std::vector<int> Holders(const ShardPlan& plan, int n, int unit, Band RankShard::*band) {
  std::vector<int> count(n, 0);
  for (const RankShard& s : plan.ranks) {
    const Band b = s.*band;
    for (long i = static_cast<long>(b.begin) * unit; i < static_cast<long>(b.end) * unit; i++)
      if (i >= 0 && i < n) count[i]++;
  }
  return count;
}

// Every index held exactly `want` times; the error names the tensor and index.
Status ExpectHolders(const std::vector<int>& count, int want, const std::string& tensor, long* checks) {
  for (size_t i = 0; i < count.size(); i++) {
    ++*checks;
    if (count[i] != want)
      return Status::Error("shard plan: " + tensor + " index " + std::to_string(i) + " is held by " +
                           std::to_string(count[i]) + " ranks, expected " + std::to_string(want));
  }
  return OkStatus();
}

}  // namespace

Result<ShardPlan> PlanShards(const ModelConfig& c, int tp) {
  if (tp < 1) return Status::Error("tp=" + std::to_string(tp) + " must be at least 1");
  if (c.n_heads < 1 || c.n_kv_heads < 1 || c.head_dim < 1 || c.n_heads % c.n_kv_heads != 0)
    return Status::Error("shard plan: config has n_heads=" + std::to_string(c.n_heads) +
                         ", n_kv_heads=" + std::to_string(c.n_kv_heads) + ", head_dim=" + std::to_string(c.head_dim) +
                         " (need head_dim >= 1 and n_heads % n_kv_heads == 0)");
  if (c.n_heads % tp != 0) return NotDivisible("n_heads", c.n_heads, tp);
  if (c.n_kv_heads >= tp) {
    if (c.n_kv_heads % tp != 0) return NotDivisible("n_kv_heads", c.n_kv_heads, tp);
  } else if (tp % c.n_kv_heads != 0) {
    return Status::Error("tp=" + std::to_string(tp) +
                         " is not a multiple of n_kv_heads=" + std::to_string(c.n_kv_heads) +
                         " (with fewer KV heads than ranks, each KV head is "
                         "replicated on tp / n_kv_heads ranks)");
  }
  if (c.n_experts > 0) {
    if (c.n_experts % tp != 0) return NotDivisible("n_experts", c.n_experts, tp);
  } else if (c.hidden_dim % tp != 0) {
    return NotDivisible("intermediate_size", c.hidden_dim, tp);
  }
  ShardPlan plan;
  plan.tp = tp;
  plan.head_dim = PlanHeadDim(c);
  const int group = c.n_heads / c.n_kv_heads;  // query heads per KV head
  for (int r = 0; r < tp; r++) {
    RankShard s;
    s.rank = r;
    s.tp = tp;
    s.q_heads = EqualBand(c.n_heads, tp, r);
    if (c.n_kv_heads >= tp) {
      s.kv_heads = EqualBand(c.n_kv_heads, tp, r);
    } else {
      // The rank's query heads all lie in one group (tp % n_kv_heads == 0): hold that KV head.
      const int kv = s.q_heads.begin / group;
      s.kv_heads = {kv, kv + 1};
      s.kv_replicated = true;
    }
    if (c.n_experts > 0) {
      s.experts = EqualBand(c.n_experts, tp, r);
      s.ffn = {0, c.hidden_dim};
    } else {
      s.ffn = EqualBand(c.hidden_dim, tp, r);
    }
    s.vocab = {0, c.vocab_size};
    plan.ranks.push_back(corruptions::ActiveEngineHooks().TpRankShard(s, c));
  }
  return plan;
}

Status CheckPlanCoverage(const ModelConfig& c, const ShardPlan& plan, long* checks) {
  const int tp = plan.tp, hd = plan.head_dim;
  if (static_cast<int>(plan.ranks.size()) != tp)
    return Status::Error("shard plan: " + std::to_string(plan.ranks.size()) + " ranks for tp=" + std::to_string(tp));
  for (int r = 0; r < tp; r++) {
    const RankShard& s = plan.ranks[r];
    ++*checks;
    if (s.rank != r || s.q_heads.size() < 1 || s.kv_heads.size() < 1 || s.ffn.size() < 1)
      return Status::Error("shard plan: rank " + std::to_string(r) + " holds q_heads " + BandText(s.q_heads) +
                           ", kv_heads " + BandText(s.kv_heads) + ", ffn " + BandText(s.ffn) +
                           " (every rank needs at least one of each)");
  }
  const int q_rows = c.n_heads * hd, kv_rows = c.n_kv_heads * hd;
  // Query heads: rows of wq and columns of wo, each exactly once.
  VERITY_RETURN_IF_ERROR(ExpectHolders(Holders(plan, q_rows, hd, &RankShard::q_heads), 1, "wq row", checks));
  VERITY_RETURN_IF_ERROR(ExpectHolders(Holders(plan, q_rows, hd, &RankShard::q_heads), 1, "wo column", checks));
  // KV heads: once each, or tp / n_kv_heads replicas by design.
  const int kv_want = c.n_kv_heads >= tp ? 1 : tp / c.n_kv_heads;
  for (const char* t : {"wk row", "wv row"})
    VERITY_RETURN_IF_ERROR(ExpectHolders(Holders(plan, kv_rows, hd, &RankShard::kv_heads), kv_want, t, checks));
  // Every query head's KV group lives on the rank that holds the query head.
  const int group = c.n_heads / c.n_kv_heads;
  for (const RankShard& s : plan.ranks)
    for (int h = s.q_heads.begin; h < s.q_heads.end; h++) {
      ++*checks;
      if (!s.kv_heads.Contains(h / group))
        return Status::Error("shard plan: rank " + std::to_string(s.rank) + " holds query head " + std::to_string(h) +
                             " but not KV head " + std::to_string(h / group) + " it attends through (kv_heads " +
                             BandText(s.kv_heads) + ")");
    }
  if (c.n_experts > 0) {
    VERITY_RETURN_IF_ERROR(ExpectHolders(Holders(plan, c.n_experts, 1, &RankShard::experts), 1, "expert", checks));
    for (const RankShard& s : plan.ranks) {
      ++*checks;
      if (s.ffn.begin != 0 || s.ffn.end != c.hidden_dim)
        return Status::Error("shard plan: rank " + std::to_string(s.rank) + " holds experts' FFN units " +
                             BandText(s.ffn) + ", not all " + std::to_string(c.hidden_dim));
    }
  } else {
    for (const char* t : {"w1 row", "w3 row", "w2 column"})
      VERITY_RETURN_IF_ERROR(ExpectHolders(Holders(plan, c.hidden_dim, 1, &RankShard::ffn), 1, t, checks));
  }
  // The classifier (and embedding, norms, router) are replicated on every rank.
  VERITY_RETURN_IF_ERROR(
      ExpectHolders(Holders(plan, c.vocab_size, 1, &RankShard::vocab), tp, "classifier row", checks));
  return OkStatus();
}

std::string DescribePlan(const ShardPlan& plan) {
  std::ostringstream o;
  o << "tp=" << plan.tp << ":";
  for (const RankShard& s : plan.ranks) {
    o << (s.rank ? ";" : "") << " rank " << s.rank << " q_heads " << BandText(s.q_heads) << " kv_heads "
      << BandText(s.kv_heads) << (s.kv_replicated ? " (replica)" : "") << " ffn " << BandText(s.ffn);
    if (s.experts.size() > 0) o << " experts " << BandText(s.experts);
  }
  return o.str();
}

}  // namespace verity
