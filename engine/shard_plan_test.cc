// The shard plan, exhaustively: every rank at every tp in 1..16 (and every
// divisor of the shape's head count) over a table of shapes; every row or
// column index along every sharded axis owned by exactly one rank, or
// replicated by design. The walk here is the test's own, independent of
// CheckPlanCoverage, which is checked as well.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "engine/shard_plan.h"

namespace verity {
namespace {

struct Shape {
  const char* name;
  ModelConfig c;
};

ModelConfig Config(int dim, int hidden, int heads, int kv, int layers, int vocab, int experts = 0, int topk = 0) {
  ModelConfig c;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_heads = heads;
  c.n_kv_heads = kv;
  c.n_layers = layers;
  c.vocab_size = vocab;
  c.seq_len = c.max_positions = 256;
  c.head_dim = heads > 0 && dim % heads == 0 ? dim / heads : 0;
  c.n_experts = experts;
  c.n_experts_per_tok = topk;
  return c;
}

std::vector<Shape> Shapes() {
  return {
      {"stories260K", Config(64, 172, 8, 4, 5, 512)},
      {"dense 110M-like", Config(768, 2048, 12, 12, 12, 32000)},
      {"synthetic", Config(96, 256, 6, 3, 2, 300)},
      {"moe 8x2", Config(128, 344, 8, 8, 2, 512, 8, 2)},
      {"gqa kv<ranks", Config(128, 384, 16, 2, 2, 512)},
      {"mqa", Config(64, 192, 8, 1, 2, 256)},
      {"K3-like", Config(12288, 2048, 96, 1, 2, 1024, 896, 8)},
  };
}

// The first axis that does not divide, by the plan's rules (empty if none).
std::string ExpectedRefusal(const ModelConfig& c, int tp) {
  if (c.n_heads % tp) return "n_heads=" + std::to_string(c.n_heads);
  if (c.n_kv_heads >= tp ? c.n_kv_heads % tp : tp % c.n_kv_heads) return "n_kv_heads=" + std::to_string(c.n_kv_heads);
  if (c.n_experts > 0 && c.n_experts % tp) return "n_experts=" + std::to_string(c.n_experts);
  if (c.n_experts == 0 && c.hidden_dim % tp) return "intermediate_size=" + std::to_string(c.hidden_dim);
  return "";
}

// Holders of each index of an axis of n, the rank bands in units of `unit`.
std::vector<int> Count(const ShardPlan& p, int n, int unit, Band RankShard::*band) {
  std::vector<int> held(n, 0);
  for (const auto& s : p.ranks)
    for (int u = (s.*band).begin; u < (s.*band).end; u++)
      for (int i = u * unit; i < (u + 1) * unit; i++) held.at(i)++;
  return held;
}

long ExpectAll(const std::vector<int>& held, int want, const std::string& what) {
  long n = 0;
  for (size_t i = 0; i < held.size(); i++, n++)
    if (held[i] != want) {
      ADD_FAILURE() << what << " index " << i << " held " << held[i] << " times, want " << want;
      return n;
    }
  return n;
}

TEST(ShardPlan, EveryRankEveryTpEveryShape) {
  long checks = 0, library_checks = 0;
  int planned = 0, refused = 0;
  const auto shapes = Shapes();
  for (const auto& sh : shapes) {
    const ModelConfig& c = sh.c;
    std::set<int> tps;
    for (int tp = 1; tp <= 16; tp++) tps.insert(tp);
    for (int d = 1; d <= c.n_heads; d++)
      if (c.n_heads % d == 0) tps.insert(d);
    for (int tp : tps) {
      SCOPED_TRACE(std::string(sh.name) + " tp=" + std::to_string(tp));
      auto plan = PlanShards(c, tp);
      const std::string refusal = ExpectedRefusal(c, tp);
      checks++;
      if (!refusal.empty()) {
        ASSERT_FALSE(plan.ok());
        EXPECT_NE(plan.status().message().find(refusal), std::string::npos) << plan.status().message();
        EXPECT_NE(plan.status().message().find("tp=" + std::to_string(tp)), std::string::npos);
        refused++;
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      planned++;
      const ShardPlan& p = plan.value();
      const int hd = c.dim / c.n_heads, group = c.n_heads / c.n_kv_heads;
      ASSERT_EQ(static_cast<int>(p.ranks.size()), tp);
      checks += ExpectAll(Count(p, c.n_heads * hd, hd, &RankShard::q_heads), 1, "wq row / wo column");
      const int kv_want = c.n_kv_heads >= tp ? 1 : tp / c.n_kv_heads;
      checks += ExpectAll(Count(p, c.n_kv_heads * hd, hd, &RankShard::kv_heads), kv_want, "wk/wv row");
      for (const auto& s : p.ranks) {
        EXPECT_EQ(s.q_heads.size(), c.n_heads / tp);
        EXPECT_GE(s.kv_heads.size(), 1) << "kv/tp = 0 on rank " << s.rank;
        EXPECT_EQ(s.kv_replicated, c.n_kv_heads < tp);
        for (int h = s.q_heads.begin; h < s.q_heads.end; h++, checks++)
          EXPECT_TRUE(s.kv_heads.Contains(h / group)) << "rank " << s.rank << " query head " << h;
      }
      if (c.n_experts > 0) {
        checks += ExpectAll(Count(p, c.n_experts, 1, &RankShard::experts), 1, "expert");
        for (const auto& s : p.ranks) {
          checks++;
          EXPECT_EQ(s.ffn.size(), c.hidden_dim);
        }
      } else {
        checks += ExpectAll(Count(p, c.hidden_dim, 1, &RankShard::ffn), 1, "w1/w3 row, w2 column");
      }
      checks += ExpectAll(Count(p, c.vocab_size, 1, &RankShard::vocab), tp, "classifier row (replicated)");
      Status s = CheckPlanCoverage(c, p, &library_checks);
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
  std::printf(
      "shard plan: %ld checks over %zu shapes x tp 1..16 (and head-count divisors): %d plans, %d refusals; "
      "CheckPlanCoverage made %ld more\n",
      checks, shapes.size(), planned, refused, library_checks);
  EXPECT_GT(checks, 0);
  EXPECT_GT(library_checks, 0);
  EXPECT_GT(refused, 0);
}

TEST(ShardPlan, NamedRefusals) {
  ModelConfig stories = Config(64, 172, 8, 4, 5, 512);
  auto p8 = PlanShards(stories, 8);
  ASSERT_FALSE(p8.ok());
  EXPECT_EQ(p8.status().message(), "intermediate_size=172 is not divisible by tp=8");
  ModelConfig k3 = Config(12288, 2048, 96, 1, 2, 1024, 896, 8);
  ASSERT_EQ(896 % 7, 0);  // the experts would divide; the heads refuse first
  auto p7 = PlanShards(k3, 7);
  ASSERT_FALSE(p7.ok());
  EXPECT_EQ(p7.status().message(), "n_heads=96 is not divisible by tp=7");
  auto k3_8 = PlanShards(k3, 8);
  ASSERT_TRUE(k3_8.ok());
  for (const auto& s : k3_8->ranks) EXPECT_EQ(s.kv_heads.begin, 0);  // the one KV head, replicated
  auto p0 = PlanShards(stories, 0);
  EXPECT_FALSE(p0.ok());
}

// The checker fails on the bugs it exists for (so a PASS means something).
TEST(ShardPlan, CoverageCheckRejectsGapOverlapAndNaiveKv) {
  ModelConfig stories = Config(64, 172, 8, 4, 5, 512);
  auto p = PlanShards(stories, 2);
  ASSERT_TRUE(p.ok());
  long n = 0;
  ASSERT_TRUE(CheckPlanCoverage(stories, p.value(), &n).ok());
  ShardPlan gap = p.value();
  gap.ranks[0].ffn.end -= 1;  // a one-element gap
  Status s = CheckPlanCoverage(stories, gap, &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("w1 row index 85 is held by 0 ranks"), std::string::npos) << s.message();
  ShardPlan overlap = p.value();
  overlap.ranks[1].q_heads.begin -= 1;
  EXPECT_FALSE(CheckPlanCoverage(stories, overlap, &n).ok());

  ModelConfig gqa = Config(128, 384, 16, 2, 2, 512);
  auto q = PlanShards(gqa, 4);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(CheckPlanCoverage(gqa, q.value(), &n).ok());
  ShardPlan naive = q.value();
  for (auto& r : naive.ranks) r.kv_heads = {r.rank * (2 / 4), (r.rank + 1) * (2 / 4)};  // kv/tp = 0
  s = CheckPlanCoverage(gqa, naive, &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kv_heads [0,0)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace verity
