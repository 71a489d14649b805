// Tensor parallelism: the collectives, the start-up and per-token guards, and
// sharded forwards that agree with the single-rank one on a trained dense
// model, a synthetic MoE model and a model with fewer KV heads than ranks;
// the guards and the parity figures fail when a reduce is removed,
// duplicated or moved. The CLI runs (in-process and under mpirun) print the
// golden text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <thread>
#include <tuple>

#include "verify/parity.h"
#include "engine/tp_forward.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

// Runs fn(rank) on every rank of an in-process group at once.
template <class Fn>
void OnEveryRank(parallel::InProcGroup& g, Fn fn) {
  std::vector<std::thread> th;
  for (int r = 1; r < g.size(); r++) th.emplace_back([&, r] { fn(r); });
  fn(0);
  for (auto& t : th) t.join();
}

TEST(Collective, InProcSumsInRankOrderOnEveryRank) {
  for (int tp : {1, 2, 3, 4, 7}) {
    auto g = parallel::InProcGroup::Create(tp, parallel::ReduceDType::kF32);
    ASSERT_TRUE(g.ok()) << g.status().message();
    const size_t n = 1000;
    std::vector<std::vector<float>> x(tp);
    OnEveryRank(**g, [&](int r) {
      x[r].resize(n);
      for (size_t i = 0; i < n; i++) x[r][i] = (r == 0 ? 1e8f : 1.0f) * (i % 3 ? 1 : -1) + 0.1f * r;
      (*g)->Rank(r).AllReduceSum(x[r].data(), n);
      (*g)->Rank(r).AllReduceSum(x[r].data(), 1);  // sizes may differ call to call
    });
    for (size_t i = 1; i < n; i++) {
      float want = 1e8f * (i % 3 ? 1 : -1);  // rank order: rank 0 first, then 1, 2, ...
      for (int r = 1; r < tp; r++) want += 1.0f * (i % 3 ? 1 : -1) + 0.1f * r;
      for (int r = 0; r < tp; r++) ASSERT_EQ(x[r][i], want) << "tp=" << tp << " rank " << r << " element " << i;
    }
  }
}

// A collective that loses one rank's contribution: the check must see it on every rank.
class DroppingCollective : public parallel::Collective {
 public:
  DroppingCollective(parallel::Collective& inner, int drop) : inner_(inner), drop_(drop) {}
  void AllReduceSum(float* x, size_t n) override {
    if (calls_++ == 0 && inner_.rank() == drop_) std::fill(x, x + n, 0.0f);
    inner_.AllReduceSum(x, n);
  }
  void Barrier() override { inner_.Barrier(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return "dropping"; }

 private:
  parallel::Collective& inner_;
  int drop_, calls_ = 0;
};

TEST(Collective, AllReduceCheckPassesAndFailsOnEveryRank) {
  int passed = 0;
  for (int tp = 1; tp <= 8; tp++) {
    auto g = parallel::InProcGroup::Create(tp, parallel::ReduceDType::kF32);
    ASSERT_TRUE(g.ok());
    std::vector<Status> st(tp);
    OnEveryRank(**g, [&](int r) { st[r] = parallel::CheckAllReduce((*g)->Rank(r)); });
    for (auto& s : st) EXPECT_TRUE(s.ok()) << s.message();
    passed += tp;
  }
  auto g = parallel::InProcGroup::Create(3, parallel::ReduceDType::kF32);
  ASSERT_TRUE(g.ok());
  std::vector<Status> st(3);
  OnEveryRank(**g, [&](int r) {
    DroppingCollective d((*g)->Rank(r), 2);
    st[r] = parallel::CheckAllReduce(d);
  });
  for (int r = 0; r < 3; r++) {
    ASSERT_FALSE(st[r].ok()) << "rank " << r << " did not see the lost contribution";
    EXPECT_NE(st[r].message().find("expected tp(tp+1)/2 = 6"), std::string::npos) << st[r].message();
  }
  std::printf("all-reduce check: passed on %d ranks over tp 1..8, failed on all 3 ranks of a lossy collective\n",
              passed);
}

TEST(Collective, Bf16ReduceIsRefusedAtSetUp) {
  auto g = parallel::InProcGroup::Create(2, parallel::ReduceDType::kBF16);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("reducing in bf16 is refused"), std::string::npos) << g.status().message();
  auto m = parallel::MakeMpiCollective(2, parallel::ReduceDType::kBF16);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("collective mpi: reducing in bf16 is refused"), std::string::npos);
  auto boot = parallel::InProcGroup::Create(1, parallel::ReduceDType::kF32);
  ASSERT_TRUE(boot.ok());
  auto n = parallel::MakeNcclCollective((*boot)->Rank(0), parallel::ReduceDType::kBF16);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("collective nccl: reducing in bf16 is refused"), std::string::npos);
  // Through the tensor-parallel set-up: refused before any model exists.
  TpOptions o;
  o.tp = 2;
  o.reduce_dtype = parallel::ReduceDType::kBF16;
  auto tg = TpGroup::Open(o);
  ASSERT_FALSE(tg.ok());
  EXPECT_NE(tg.status().message().find("refused"), std::string::npos);
}

// ---- sharded forwards against the single-rank one ----------------------------

struct Figures {
  double max_abs = 0, worst_mean_kl = 0;
  long steps = 0, positions = 0, reduces = 0;
  Status guard;
  std::string err;
};

std::vector<float> SingleRank(const verity::Model& m, const std::vector<int>& ids) {
  auto k = kernels::MakeBackend("fast");
  Transformer t(m, std::move(k.value()));
  return TeacherForcedLogits(t, ids).value();
}

double MeanKl(const std::vector<float>& p, const std::vector<float>& q, int V) {
  double total = 0;
  const size_t rows = p.size() / V;
  for (size_t r = 0; r < rows; r++) {
    const float* a = p.data() + r * V;
    const float* b = q.data() + r * V;
    double ma = a[0], mb = b[0], sa = 0, sb = 0, kl = 0;
    for (int i = 1; i < V; i++) ma = std::max(ma, double(a[i])), mb = std::max(mb, double(b[i]));
    for (int i = 0; i < V; i++) sa += std::exp(a[i] - ma), sb += std::exp(b[i] - mb);
    for (int i = 0; i < V; i++) {
      const double la = a[i] - ma - std::log(sa), lb = b[i] - mb - std::log(sb);
      kl += std::exp(la) * (la - lb);
    }
    total += std::max(0.0, kl);
  }
  return total / rows;
}

Figures RunTp(const verity::Model& m, int tp, const std::vector<int>& ids, const std::vector<float>& ref,
              FaultPlan fault = {}) {
  Figures f;
  TpOptions o;
  o.tp = tp;
  o.fault = fault;
  testing::internal::CaptureStderr();
  auto g = TpGroup::Open(o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) {
    f.err = testing::internal::GetCapturedStderr();
    return f;
  }
  EXPECT_TRUE((*g)->Agree(OkStatus()).ok());
  auto d = (*g)->Start(m);
  EXPECT_TRUE(d.ok()) << d.status().message();
  if (!d.ok()) {
    f.err = testing::internal::GetCapturedStderr();
    return f;
  }
  std::vector<float> got = TeacherForcedLogits(**d, ids).value();
  f.guard = (*d)->Finish();
  f.steps = (*d)->steps_checked();
  f.positions = (*d)->positions_run();
  f.reduces = (*d)->reduces_counted();
  f.err = testing::internal::GetCapturedStderr();
  for (size_t i = 0; i < got.size(); i++) f.max_abs = std::max(f.max_abs, double(std::fabs(got[i] - ref[i])));
  f.worst_mean_kl = MeanKl(ref, got, m.config.vocab_size);
  return f;
}

std::vector<int> Ids(const ModelConfig& c, int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; i++) ids.push_back(static_cast<int>((7 + 7919L * i) % c.vocab_size));
  return ids;
}

void ExpectParity(const char* what, const verity::Model& m, std::vector<int> tps, int positions) {
  const auto ids = Ids(m.config, positions);
  const auto ref = SingleRank(m, ids);
  for (int tp : tps) {
    Figures f = RunTp(m, tp, ids, ref);
    std::printf("tp parity %s tp=%d vs single rank: %d positions, max abs logit diff %.3g, mean KL %.3g\n", what, tp,
                positions, f.max_abs, f.worst_mean_kl);
    EXPECT_TRUE(f.guard.ok()) << f.guard.message();
    EXPECT_LE(f.max_abs, kTpMaxAbsDiff) << what << " tp=" << tp;
    EXPECT_LE(f.worst_mean_kl, kTpMaxMeanKl) << what << " tp=" << tp;
    EXPECT_EQ(f.steps, positions);
    EXPECT_EQ(f.positions, positions);
    EXPECT_EQ(f.reduces, ReducesPerStep(m.config) * positions);
    EXPECT_NE(f.err.find("tp all-reduce check: tp=" + std::to_string(tp) + " inproc"), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("tp shard plan check: tp=" + std::to_string(tp)), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("tp collective guard: " + std::to_string(ReducesPerStep(m.config)) + " all-reduces per step"),
              std::string::npos)
        << f.err;
    EXPECT_NE(f.err.find("verdict=PASS"), std::string::npos);
  }
}

TEST(TpParity, Stories260KAtTp2And4) {
  auto m = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectParity("stories260K", **m, {1, 2, 4}, 128);
}

ModelConfig Synth(int dim, int hidden, int heads, int kv, int experts, int topk) {
  ModelConfig c;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = 3;
  c.n_heads = heads;
  c.n_kv_heads = kv;
  c.vocab_size = 320;
  c.seq_len = c.max_positions = 96;
  c.head_dim = dim / heads;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = RopeStyle::kHalves;
  c.n_experts = experts;
  c.n_experts_per_tok = topk;
  return c;
}

TEST(TpParity, SyntheticMoeWithExpertBands) {
  auto m = SyntheticModel(Synth(64, 96, 8, 4, 8, 2), 7);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectParity("synthetic MoE 8 experts top-2", **m, {2, 4}, 64);
}

TEST(TpParity, FewerKvHeadsThanRanks) {
  auto m = SyntheticModel(Synth(64, 128, 8, 2, 0, 0), 11);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectParity("GQA 8 heads 2 KV heads", **m, {4, 8}, 64);
}

// Qwen2 (issue 44): each rank adds the q/k/v biases of the heads it holds,
// also where KV heads are replicated (tp 4 and 8 over 2 KV heads).
TEST(TpParity, Qwen2BiasesShardWithTheirHeads) {
  ModelConfig c = Synth(64, 128, 8, 2, 0, 0);
  c.qkv_bias = true;
  c.rope_theta = 1e6f;
  auto m = SyntheticModel(c, 13);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_NE((*m)->layers[0].bk, nullptr);
  ExpectParity("qwen2 8 heads 2 KV heads", **m, {2, 4, 8}, 64);
}

// Qwen3 (issue 44): every head shares its q (and k) norm vector, so each
// rank normalises the heads it holds with the whole vector; head_dim 16
// with 8 heads over a residual of 64 (q twice its width).
TEST(TpParity, Qwen3NormsApplyToEveryRanksHeads) {
  ModelConfig c = Synth(64, 128, 8, 2, 0, 0);
  c.qk_norm = true;
  c.head_dim = 16;
  c.rope_theta = 1e6f;
  auto m = SyntheticModel(c, 17);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_NE((*m)->layers[0].k_norm, nullptr);
  ExpectParity("qwen3 8 heads 2 KV heads head_dim 16", **m, {2, 4, 8}, 64);
}

// Phi-3 (issue 44): loaded from its files, q, k and v are row views of one
// fused tensor (and gate and up of another); each rank's slices are views
// of those views. Its window (48) is attended within on every rank, 64
// positions compared.
TEST(TpParity, Phi3FusedProjectionsShardAsTheirParts) {
  ModelConfig c = Synth(64, 128, 8, 4, 0, 0);
  c.fused_projections = true;
  c.sliding_window = 48;
  auto synth = SyntheticModel(c, 19);
  ASSERT_TRUE(synth.ok()) << synth.status().message();
  const std::string dir = test::TempDir("tp-phi3") + "/hf";
  ASSERT_TRUE(WriteHfCheckpoint(**synth, dir, 1, "f32").ok());
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE((*m)->config.fused_projections);
  ExpectParity("phi3 8 heads 4 KV heads fused", **m, {2, 4, 8}, 64);
}

// Gemma 2 and 3 (issue 44): each sublayer's output is normed after its
// all-reduce (the norm needs the whole row), the soft-capped attention and
// GeGLU act per head and unit on each rank, the final soft-cap on the
// replicated logits; windows of 24 on the pattern's layers within the 64
// positions compared, Gemma 3's local RoPE base on its windowed layers.
TEST(TpParity, GemmaNormsEachSublayersWholeOutput) {
  for (const bool gemma3 : {false, true}) {
    ModelConfig c = Synth(64, 128, 8, 2, 0, 0);
    c.n_layers = gemma3 ? 3 : 2;
    c.gemma = true;
    c.qk_norm = gemma3;
    c.head_dim = 16;
    c.query_pre_attn_scalar = 24;
    c.attn_softcap = gemma3 ? 0.0f : 50.0f;
    c.final_softcap = 3;
    c.sliding_window = 24;
    c.window_pattern = gemma3 ? 3 : 2;
    c.rope_local_theta = gemma3 ? 10000.0f : 0.0f;
    c.rope_theta = gemma3 ? 1e6f : 1e4f;
    auto m = SyntheticModel(c, 23);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_NE((*m)->layers[0].post_ffn_norm, nullptr);
    ExpectParity(gemma3 ? "gemma3 8 heads 2 KV heads, a global layer in 3" : "gemma2 8 heads 2 KV heads soft-capped",
                 **m, {2, 4, 8}, 64);
  }
}

// ---- batched prefill: one step, and one all-reduce per projection, per block ---

// A prompt of `prompt` positions through Prefill (blocks of 64), then `decode`
// positions one by one: the prefill's last row and every decoded row.
std::vector<float> PrefillThenDecode(Decoder& d, const std::vector<int>& ids, int prompt) {
  const int V = d.model().config.vocab_size;
  const float* out = d.Prefill(ids.data(), prompt, 0);
  std::vector<float> rows(out, out + V);
  for (int pos = prompt; pos < static_cast<int>(ids.size()); pos++) {
    out = d.Forward(ids[pos], pos);
    rows.insert(rows.end(), out, out + V);
  }
  return rows;
}

struct PrefillFigures {
  double max_abs = 0;
  long steps = 0, positions = 0, reduces = 0;
  Status guard;
  std::string err;
};

PrefillFigures RunTpPrefill(const verity::Model& m, int tp, const std::vector<int>& ids, int prompt,
                            const std::vector<float>& ref, FaultPlan fault = {}) {
  PrefillFigures f;
  TpOptions o;
  o.tp = tp;
  o.fault = fault;
  testing::internal::CaptureStderr();
  auto g = TpGroup::Open(o);
  EXPECT_TRUE(g.ok() && (*g)->Agree(OkStatus()).ok());
  auto d = (*g)->Start(m);
  EXPECT_TRUE(d.ok()) << d.status().message();
  if (!d.ok()) {
    f.err = testing::internal::GetCapturedStderr();
    return f;
  }
  const std::vector<float> got = PrefillThenDecode(**d, ids, prompt);
  f.guard = (*d)->Finish();
  f.steps = (*d)->steps_checked();
  f.positions = (*d)->positions_run();
  f.reduces = (*d)->reduces_counted();
  f.err = testing::internal::GetCapturedStderr();
  for (size_t i = 0; i < got.size(); i++) f.max_abs = std::max(f.max_abs, double(std::fabs(got[i] - ref[i])));
  return f;
}

void ExpectPrefillParity(const char* what, const verity::Model& m, std::vector<int> tps) {
  const int prompt = 150, decode = 16;  // blocks of 64, 64 and 22 positions
  const auto ids = Ids(m.config, prompt + decode);
  Transformer single(m, kernels::MakeBackend("fast").value());
  const auto ref = PrefillThenDecode(single, ids, prompt);
  const long blocks = (prompt + Transformer::kPrefillBlock - 1) / Transformer::kPrefillBlock;
  for (int tp : tps) {
    PrefillFigures f = RunTpPrefill(m, tp, ids, prompt, ref);
    std::printf(
        "tp prefill parity %s tp=%d vs single-rank Prefill: %d-position prompt in %ld blocks + %d decoded, "
        "max abs logit diff %.3g over %d rows; %ld steps, %ld all-reduces\n",
        what, tp, prompt, blocks, decode, f.max_abs, decode + 1, f.steps, f.reduces);
    EXPECT_TRUE(f.guard.ok()) << f.guard.message();
    EXPECT_LE(f.max_abs, kTpMaxAbsDiff) << what << " tp=" << tp;
    EXPECT_EQ(f.steps, blocks + decode);
    EXPECT_EQ(f.positions, prompt + decode);
    EXPECT_EQ(f.reduces, ReducesPerStep(m.config) * (blocks + decode));
    EXPECT_NE(f.err.find("rank 0 ran " + std::to_string(blocks + decode) + " steps (" +
                         std::to_string(prompt + decode) + " positions)"),
              std::string::npos)
        << f.err;
  }
}

TEST(TpPrefill, BlocksAgreeWithSingleRankPrefill) {
  auto m = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectPrefillParity("stories260K", **m, {2, 4});
  ModelConfig c = Synth(64, 96, 8, 4, 8, 2);
  c.seq_len = c.max_positions = 192;
  auto moe = SyntheticModel(c, 7);
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  ExpectPrefillParity("synthetic MoE 8 experts top-2", **moe, {2, 4});
}

// ---- faults: the guards and the parity figures must see them -----------------

TEST(TpFaults, RemovedDuplicatedAndMovedReducesAreCaught) {
  auto m = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  const auto ids = Ids((*m)->config, 48);
  const auto ref = SingleRank(**m, ids);
  using K = FaultPlan::Kind;
  using S = FaultPlan::Site;
  struct Case {
    const char* name;
    FaultPlan f;
    bool count_guard_fails;
  } cases[] = {
      {"removed after o (layer 0)", {K::kRemove, S::kAttentionOut, 0}, true},
      {"removed after down (layer 4)", {K::kRemove, S::kFfnOut, 4}, true},
      {"duplicated after down (layer 2)", {K::kDuplicate, S::kFfnOut, 2}, true},
      {"duplicated after o (layer 3)", {K::kDuplicate, S::kAttentionOut, 3}, true},
      {"moved past the FFN norm (layer 1)", {K::kMove, S::kAttentionOut, 1}, false},
      {"one-unit gap in rank 0's FFN band (past the plan check)", {K::kBandGap, S::kFfnOut, 0}, false},
  };
  for (const auto& c : cases) {
    Figures f = RunTp(**m, 2, ids, ref, c.f);
    std::printf("tp fault %s: collective guard %s, max abs logit diff %.3g, mean KL %.3g\n", c.name,
                f.guard.ok() ? "PASS" : "FAIL", f.max_abs, f.worst_mean_kl);
    EXPECT_EQ(!f.guard.ok(), c.count_guard_fails) << c.name << ": " << f.guard.message();
    if (c.count_guard_fails) {
      EXPECT_NE(f.err.find("verdict=FAIL"), std::string::npos) << f.err;
      EXPECT_NE(f.guard.message().find("the model needs 10 (2 per layer x 5 layers)"), std::string::npos)
          << f.guard.message();
    }
    // The parity gate's bounds see every one of them.
    EXPECT_GT(f.max_abs, kTpMaxAbsDiff * 10) << c.name;
    EXPECT_GT(f.worst_mean_kl, kTpMaxMeanKl) << c.name;
  }
}

// The same faults inside prefill blocks: the count guard counts per block (a
// removed reduce leaves 9 of 10 in the block, a duplicated one 11), and the
// logits after the prompt move far past the gate.
TEST(TpFaults, FaultsInsidePrefillBlocksAreCaught) {
  auto m = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  const int prompt = 100;  // blocks 0..63 and 64..99
  const auto ids = Ids((*m)->config, prompt + 4);
  Transformer single(**m, kernels::MakeBackend("fast").value());
  const auto ref = PrefillThenDecode(single, ids, prompt);
  using K = FaultPlan::Kind;
  using S = FaultPlan::Site;
  struct Case {
    const char* name;
    FaultPlan f;
    bool count_guard_fails;
  } cases[] = {
      {"removed after o (layer 1)", {K::kRemove, S::kAttentionOut, 1}, true},
      {"duplicated after down (layer 0)", {K::kDuplicate, S::kFfnOut, 0}, true},
      {"moved past the FFN norm (layer 2)", {K::kMove, S::kAttentionOut, 2}, false},
  };
  for (const auto& c : cases) {
    PrefillFigures f = RunTpPrefill(**m, 2, ids, prompt, ref, c.f);
    std::printf("tp prefill fault %s: collective guard %s, max abs logit diff %.3g\n", c.name,
                f.guard.ok() ? "PASS" : "FAIL", f.max_abs);
    EXPECT_EQ(!f.guard.ok(), c.count_guard_fails) << c.name << ": " << f.guard.message();
    if (c.count_guard_fails) {
      EXPECT_NE(f.guard.message().find("all-reduces at the block of positions 0..63; the model needs 10"),
                std::string::npos)
          << f.guard.message();
    }
    EXPECT_GT(f.max_abs, kTpMaxAbsDiff * 10) << c.name;
  }
}

// ---- the CLI ------------------------------------------------------------------

std::string GenerateCmd(const std::string& extra) {
  return VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin") +
         " --steps 200 --temperature 0 " + extra;
}

TEST(TpCli, GoldenTextAtTp2And4InProcess) {
  const std::string golden = test::ReadFile(Model("stories260K.greedy200.txt"));
  ASSERT_FALSE(golden.empty());
  for (int tp : {2, 4}) {
    auto r = Shell(GenerateCmd("--tp " + std::to_string(tp)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, golden) << "tp=" << tp;
    EXPECT_NE(r.err.find("tp all-reduce check: tp=" + std::to_string(tp)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tp collective guard: 10 all-reduces per step"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("verdict=FAIL"), std::string::npos) << r.err;
  }
}

// The NCCL collective is a run-time plugin (docs/tensor-parallel.md): without
// it `--tp-backend nccl` is a named error, never a crash.
TEST(TpCli, NcclWithoutItsPluginIsANamedError) {
  const std::string empty = test::TempDir("nccl-plugin-missing");
  auto r = Shell("VERITY_PLUGIN_DIR=" + empty + " " + GenerateCmd("--tp 2 --tp-backend nccl"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  if (parallel::HaveNccl())
    EXPECT_NE(r.err.find("--tp-backend nccl: plugin libverity_nccl.so not found (VERITY_PLUGIN_DIR=" + empty +
                         "): tried " + empty + "/libverity_nccl.so"),
              std::string::npos)
        << r.err;
  else EXPECT_NE(r.err.find("built without CUDA and NCCL"), std::string::npos) << r.err;
  std::printf("nccl plugin: missing plugin refused: %s", r.err.c_str());
}

// NCCL set up over MPI ranks (--tp-backend mpi-nccl). Here, without a GPU
// (or a machine with fewer GPUs than ranks), every rank must stop with the
// reason, named, and none may crash or hang waiting for another.
TEST(TpCli, MpiNcclWithoutAGpuPerRankIsANamedErrorOnEveryRank) {
  auto which = Shell("command -v mpirun");
  ASSERT_EQ(which.exit_code, 0) << "mpirun is missing: scripts/setup.sh installs openmpi-bin";
  auto r = Shell("mpirun --allow-run-as-root --oversubscribe -np 2 " + GenerateCmd("--tp 2 --tp-backend mpi-nccl"));
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("verity: error: --tp-backend mpi-nccl: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Segmentation fault"), std::string::npos) << r.err;
  std::printf("mpi-nccl without a GPU per rank: %s", r.err.substr(0, r.err.find('\n') + 1).c_str());
}

// A quantized dtype under --tp is compared with one rank on the same kernels
// and the same converted weights: only the sharding differs, so the tp
// thresholds (mean KL 1e-9) hold for q8_0 as for f32. Against one f32 rank
// q8_0's own rounding (KL ~3e-4) would fail them whatever the sharding did.
// bf16 on stories260K; q8_0 on a synth whose FFN needs no padding (q8_0
// under --tp refuses a padded one), with its own bounds (kTpQ8MaxAbsDiff).
TEST(TpCli, QuantizedParityComparesWithOneRankOnTheSameWeights) {
  const std::string synth = test::TempDir("tp-q8") + "/m.bin";
  auto made = Shell(
      VerityBin() + " synth --out " + synth +
      " --config '{\"dim\":128,\"hidden_dim\":256,"
      "\"n_layers\":2,\"n_heads\":4,\"n_kv_heads\":2,\"vocab_size\":256,\"seq_len\":64,\"shared_classifier\":true}'");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  for (auto [dtype, model, kl] :
       {std::tuple{"bf16", Model("stories260K.bin"), kTpMaxMeanKl}, std::tuple{"q8_0", synth, kTpQ8MaxMeanKl}}) {
    auto r = Shell(VerityBin() + " parity --model " + model + " --tp 2 --json --dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["dtype"], dtype);
    EXPECT_EQ(j["reference_dtype"], dtype);
    EXPECT_EQ(j["worst"]["top1"].get<double>(), 1.0) << dtype;
    EXPECT_LE(j["worst"]["mean_kl"].get<double>(), kl) << dtype;
    std::printf("tp=2 %s: worst mean KL %.3g, max |diff| %.3g\n", dtype, j["worst"]["mean_kl"].get<double>(),
                j["max_abs_diff"].get<double>());
  }
}

TEST(TpCli, Tp8IsRefusedNamingTheIntermediateSize) {
  auto r = Shell(GenerateCmd("--tp 8"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("intermediate_size=172 is not divisible by tp=8"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(TpCli, GoldenTextUnderMpirun) {
  const std::string golden = test::ReadFile(Model("stories260K.greedy200.txt"));
  auto which = Shell("command -v mpirun");
  ASSERT_EQ(which.exit_code, 0) << "mpirun is missing: scripts/setup.sh installs openmpi-bin";
  for (int tp : {2, 4}) {
    // Root needs --allow-run-as-root; --oversubscribe runs 4 ranks on 2 cores.
    auto r = Shell("mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(tp) + " " +
                   GenerateCmd("--tp " + std::to_string(tp) + " --tp-backend mpi"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, golden) << "mpi tp=" << tp << " (rank 0 alone prints)";
    EXPECT_NE(r.err.find("tp all-reduce check: tp=" + std::to_string(tp) + " mpi"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tp collective guard: 10 all-reduces per step"), std::string::npos) << r.err;
  }
  // A world of another size is refused by name on every rank, without a crash.
  auto r = Shell("mpirun --allow-run-as-root --oversubscribe -np 3 " + GenerateCmd("--tp 2 --tp-backend mpi"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the MPI world has 3 process(es); run under mpirun -np 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Segmentation fault"), std::string::npos) << r.err;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

// Under mpirun -np 2 an in-process group would run whole in both processes
// (the story printed twice, exit 0): inproc and nccl are refused by name, on
// every command that takes --tp, and without --tp-backend the ranks are the
// launcher's processes, said once.
TEST(TpCli, UnderAnMpiLauncherInprocIsRefusedAndTheDefaultIsMpi) {
  ASSERT_EQ(Shell("command -v mpirun").exit_code, 0) << "mpirun is missing: scripts/setup.sh installs openmpi-bin";
  const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe -np 2 ";
  const std::string under =
      "running under an MPI launcher with 2 processes (OMPI_COMM_WORLD_SIZE=2): each would run "
      "all 2 ranks itself, the output 2 times over; use --tp-backend ";
  const std::string stories = Model("stories260K.bin");
  struct Refused {
    std::string cmd, names;
  } refused[] = {
      {GenerateCmd("--tp 2 --tp-backend inproc"),
       "--tp-backend inproc: " + under + "mpi --tp 2 (one rank per process)"},
      {GenerateCmd("--tp 2 --tp-backend nccl"), "--tp-backend nccl: " + under + "mpi-nccl --tp 2"},
      {VerityBin() + " parity --model " + stories + " --tp 2 --tp-backend inproc", "--tp-backend inproc: " + under},
      {VerityBin() + " bench --model " + stories + " --steps 8 --min-seconds 0 --tp 2 --tp-backend inproc",
       "--tp-backend inproc: " + under},
  };
  for (const auto& c : refused) {
    auto r = Shell(mpirun + c.cmd);
    EXPECT_EQ(r.exit_code, 1) << c.cmd << "\n" << r.err;
    EXPECT_EQ(Count(r.err, "verity: error: " + c.names), 2u) << "both processes name it: " << r.err;
    EXPECT_EQ(r.out.find("Once upon a time"), std::string::npos) << r.out;
  }
  const std::string golden = test::ReadFile(Model("stories260K.greedy200.txt"));
  auto r = Shell(mpirun + GenerateCmd("--tp 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden) << "the story once, from rank 0";
  EXPECT_EQ(Count(r.err,
                  "verity: --tp-backend not given, running under an MPI launcher with 2 processes "
                  "(OMPI_COMM_WORLD_SIZE=2): using --tp-backend mpi\n"),
            1u)
      << r.err;
  EXPECT_NE(r.err.find("tp all-reduce check: tp=2 mpi"), std::string::npos) << r.err;
  // No --tp: mpi with one rank, which the world of 2 refuses, naming the fix.
  auto one = Shell(mpirun + GenerateCmd(""));
  EXPECT_EQ(one.exit_code, 1) << one.err;
  EXPECT_TRUE(one.out.empty()) << one.out;
  EXPECT_NE(one.err.find("--tp 1 --tp-backend mpi: the MPI world has 2 process(es); run under mpirun -np 1, or give "
                         "--tp 2"),
            std::string::npos)
      << one.err;
  std::printf("under mpirun -np 2: %s", r.err.substr(0, r.err.find('\n') + 1).c_str());
}

// The launcher is known by its variables alone (base/env.h): Hydra's PMI_SIZE
// as OpenMPI's OMPI_COMM_WORLD_SIZE; a size of 1 is no launch of several; a
// size that is not a count is named.
TEST(TpCli, TheLauncherIsReadFromItsVariables) {
  auto pmi = Shell("PMI_SIZE=4 PMI_RANK=1 " + GenerateCmd("--tp 2 --tp-backend inproc"));
  EXPECT_EQ(pmi.exit_code, 1) << pmi.err;
  EXPECT_NE(pmi.err.find("--tp-backend inproc: running under an MPI launcher with 4 processes (PMI_SIZE=4)"),
            std::string::npos)
      << pmi.err;
  auto single = Shell("OMPI_COMM_WORLD_SIZE=1 " + GenerateCmd("--tp 2"));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_EQ(single.out, test::ReadFile(Model("stories260K.greedy200.txt")));
  EXPECT_NE(single.err.find("tp all-reduce check: tp=2 inproc"), std::string::npos) << single.err;
  auto bad = Shell("OMPI_COMM_WORLD_SIZE=two " + GenerateCmd("--tp 2"));
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("OMPI_COMM_WORLD_SIZE='two' is not a process count"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace verity
