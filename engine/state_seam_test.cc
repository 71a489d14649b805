// The seam between the engine and a backend that keeps its state (issue 26):
// with a backend whose state the engine cannot touch (tests/off_host_backend.h),
// every decoder gives bit for bit what it gives on host memory, every argument
// is where the seam says it lives, and the tag traps an engine that reads
// state in place. This is the CPU's stand-in for a device backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/slots.h"
#include "engine/tp_forward.h"
#include "corruptions/forwarding_backend.h"
#include "tests/off_host_backend.h"
#include "tests/test_util.h"

namespace verity {
namespace {

using test::OffHostBackend;

ModelConfig Config(int experts) {
  ModelConfig c;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.vocab_size = 320;
  c.seq_len = c.max_positions = 160;
  c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = RopeStyle::kHalves;
  c.n_experts = experts;
  c.n_experts_per_tok = experts ? 2 : 0;
  c.shared_classifier = false;
  return c;
}

std::vector<int> Ids(int n, int vocab, int seed) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; i++) ids[i] = static_cast<int>((7 + 7919L * (i + 13 * seed)) % vocab);
  return ids;
}

// A prompt of 70 positions (two prefill blocks), then 12 decoded ones: every
// row of logits the decoder returned.
std::vector<float> Run(Decoder& d, const std::vector<int>& ids) {
  const int V = d.model().config.vocab_size, prompt = 70;
  const float* l = d.Prefill(ids.data(), prompt, 0);
  std::vector<float> rows(l, l + V);
  for (int pos = prompt; pos < static_cast<int>(ids.size()); pos++) {
    l = d.Forward(ids[pos], pos);
    rows.insert(rows.end(), l, l + V);
  }
  return rows;
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << ": the logits differ";
}

std::unique_ptr<kernels::Backend> Make(const std::string& name) {
  return std::move(kernels::MakeBackend(name)).value();
}

// Without and with deferred decode steps (a graph-recording device): the
// same bits; every decode step bracketed, and deferred whole unless a call
// inside hands a result to the host (MoE routing).
void ExpectTransformerAgrees(const Model& m, const std::string& backend, const std::string& what) {
  for (bool defer : {false, true}) {
    SCOPED_TRACE(what + " on " + backend + (defer ? ", decode steps deferred" : ""));
    const std::vector<int> ids = Ids(82, m.config.vocab_size, 1);
    auto on_host = Transformer::Create(m, Make(backend));
    ASSERT_TRUE(on_host.ok()) << on_host.status().message();
    auto off = std::make_unique<OffHostBackend>(Make(backend), defer);
    OffHostBackend* seen = off.get();
    auto off_host = Transformer::Create(m, std::move(off));
    ASSERT_TRUE(off_host.ok()) << off_host.status().message();
    ExpectSameBits(Run(**on_host, ids), Run(**off_host, ids), what);
    EXPECT_EQ(seen->misplaced(), 0) << seen->first_misplaced();
    EXPECT_EQ(seen->downloads(), 13) << "one download of the logits per Prefill and per Forward, nothing else";
    // One RopeBlock each for q and k per layer and block: 2 prompt blocks + 12 positions.
    EXPECT_EQ(seen->rope_blocks(), 2L * m.config.n_layers * (2 + 12)) << "a sequence's block takes the block calls";
    const bool moe = m.config.n_experts > 0;
    // Per layer and block, the fused calls a device makes one launch each:
    // one AttendBlock; the FFN's gate/up with SwiGLU and both residual adds
    // with their projections (only the attention's under MoE; none for
    // Gemma, whose output norms sit between the products and their adds and
    // whose gate is GeGLU: the separate calls, on a device as on the host).
    EXPECT_EQ(seen->attends(), m.config.n_layers * (2L + 12));
    EXPECT_EQ(seen->fused_products(), m.config.n_layers * (2L + 12) * (m.config.gemma ? 0 : moe ? 1 : 3));
    // And each norm with the products that read it: the attention's always,
    // the FFN's where nothing sits between them (not Gemma, not MoE).
    EXPECT_EQ(seen->normed_products(), m.config.n_layers * (2L + 12) * (m.config.gemma || moe ? 1 : 2));
    EXPECT_EQ(seen->deferred_steps(), defer && !moe ? 12 : 0);
    EXPECT_EQ(seen->flushed_steps(), defer && moe ? 12 : 0) << "routing flushes a MoE step at its first layer";
    // The first step runs, the second is kept, the other 10 replay it (dense).
    EXPECT_EQ(seen->replayed_steps(), defer && !moe ? 10 : 0);
  }
}

TEST(StateSeam, ATransformerWhoseStateIsOffTheHostGivesTheSameBitsInEveryDtype) {
  const std::string path = test::TempDir("state-seam") + "/gqa.bin";
  ASSERT_TRUE(WriteSyntheticLlama2c(Config(0), 3, path).ok());
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto m = LoadModel(path, t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ExpectTransformerAgrees(**m, "fast", kernels::DTypeName(t));
    if (t == kernels::DType::kF32) ExpectTransformerAgrees(**m, "reference", "f32");
  }
}

// The greedy pick is the backend's (Backend::Argmax): the same tokens as the
// host's pick from Forward's logits, and no logits downloaded to make it.
TEST(StateSeam, TheGreedyPickIsTheBackendsAndNeedsNoLogits) {
  auto m = SyntheticModel(Config(0), 13);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto on_host = Transformer::Create(**m, Make("fast"));
  ASSERT_TRUE(on_host.ok());
  auto off = std::make_unique<OffHostBackend>(Make("fast"), /*defer_steps=*/true);
  OffHostBackend* seen = off.get();
  auto off_host = Transformer::Create(**m, std::move(off));
  ASSERT_TRUE(off_host.ok());
  const std::vector<int> prompt = Ids(9, 320, 6);
  (*on_host)->Prefill(prompt.data(), 9, 0);
  (*off_host)->Prefill(prompt.data(), 9, 0);
  int a = 5, b = 5;
  for (int pos = 9; pos < 40; pos++) {
    const float* l = (*on_host)->Forward(a, pos);
    a = static_cast<int>(std::max_element(l, l + 320) - l);
    b = (*off_host)->ForwardGreedy(b, pos);
    ASSERT_EQ(a, b) << "position " << pos;
  }
  EXPECT_EQ(seen->argmaxes(), 31);
  EXPECT_EQ(seen->downloads(), 1) << "the prompt's logits only";
  EXPECT_EQ(seen->misplaced(), 0) << seen->first_misplaced();
  EXPECT_EQ(seen->replayed_steps(), 29) << "every greedy step is bracketed like Forward's";
}

// A batched step's greedy picks off the host: Backend::ArgmaxRows, no logits
// downloaded, the picks those of the host's logits.
TEST(StateSeam, ABatchedStepsGreedyPicksNeedNoLogits) {
  auto m = SyntheticModel(Config(0), 17);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto on_host = SlotDecoder::Create(**m, Make("fast"), 3);
  auto off = std::make_unique<OffHostBackend>(Make("fast"));
  OffHostBackend* seen = off.get();
  auto off_host = SlotDecoder::Create(**m, std::move(off), 3);
  ASSERT_TRUE(on_host.ok() && off_host.ok());
  std::vector<int> slot = {1, 2, 0}, a = {3, 9, 27}, b = a, picks(3), pos = {0, 0, 0};
  std::vector<float> rows(3 * 320);
  for (int step = 0; step < 8; step++) {
    (*on_host)->Step(slot.data(), a.data(), pos.data(), 3, rows.data());
    for (int i = 0; i < 3; i++)
      a[i] = static_cast<int>(std::max_element(&rows[i * 320], &rows[i * 320] + 320) - &rows[i * 320]);
    (*off_host)->StepGreedy(slot.data(), b.data(), pos.data(), 3, picks.data());
    ASSERT_EQ(a, picks) << "step " << step;
    b = picks;
    for (int& p : pos) p++;
  }
  EXPECT_EQ(seen->downloads(), 0) << "no logits came to the host";
  EXPECT_EQ(seen->argmaxes(), 8 * 3);
  EXPECT_EQ(seen->misplaced(), 0) << seen->first_misplaced();
}

TEST(StateSeam, AMoeTransformerRoutesThroughTheSeam) {
  auto m = SyntheticModel(Config(4), 5);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectTransformerAgrees(**m, "fast", "MoE 4 experts top-2");
}

// Qwen2's biases are model vectors added to state (Backend::AddBiasRows):
// the same bits off the host, decode steps deferred and replayed.
TEST(StateSeam, Qwen2BiasesAreAddedThroughTheSeam) {
  ModelConfig c = Config(0);
  c.qkv_bias = true;
  auto m = SyntheticModel(c, 21);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectTransformerAgrees(**m, "fast", "qwen2 q/k/v biases");
  ExpectTransformerAgrees(**m, "reference", "qwen2 q/k/v biases");
}

// Qwen3's q/k norms normalise state in place (Backend::RmsnormRows over
// head_dim rows): the same bits off the host.
TEST(StateSeam, Qwen3NormsAreAppliedThroughTheSeam) {
  ModelConfig c = Config(0);
  c.qk_norm = true;
  auto m = SyntheticModel(c, 23);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectTransformerAgrees(**m, "fast", "qwen3 q/k norms");
  ExpectTransformerAgrees(**m, "reference", "qwen3 q/k norms");
}

// A sliding window (Mistral) travels in the attention calls: 82 positions
// past a window of 24, the same bits off the host as on it.
TEST(StateSeam, AWindowIsAttendedWithinThroughTheSeam) {
  ModelConfig c = Config(0);
  c.sliding_window = 24;
  auto m = SyntheticModel(c, 25);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectTransformerAgrees(**m, "fast", "mistral window 24");
  ExpectTransformerAgrees(**m, "reference", "mistral window 24");
}

// Gemma's steps on state: the embedding's scale, the sublayers' output
// norms, GeGLU, the soft-capped scores (in the attention calls) and logits,
// windows on alternate layers; the same bits off the host.
TEST(StateSeam, GemmasStepsRunThroughTheSeam) {
  ModelConfig c = Config(0);
  c.gemma = true;
  c.query_pre_attn_scalar = 24;
  c.attn_softcap = 5;
  c.final_softcap = 3;
  c.sliding_window = 24;
  c.window_pattern = 2;
  auto m = SyntheticModel(c, 27);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectTransformerAgrees(**m, "fast", "gemma2");
  ExpectTransformerAgrees(**m, "reference", "gemma2");
}

// A backend that does not compute Gemma's steps (a device backend that
// has not written them: the CUDA backend before session 32) is refused a
// Gemma by name.
class NoGemma final : public corruptions::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  const char* name() const override { return "no-gemma"; }
  bool runs_gemma() const override { return false; }
};

TEST(StateSeam, ABackendWithoutGemmasStepsIsRefusedAGemma) {
  ModelConfig c = Config(0);
  c.gemma = true;
  c.query_pre_attn_scalar = 24;
  c.sliding_window = 24;
  c.window_pattern = 2;
  auto m = SyntheticModel(c, 27);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string says =
      "a Gemma model needs its attention's scale and soft-cap, the GeGLU gate and the scaled embedding, and the "
      "no-gemma backend does not compute";
  auto refused = Transformer::Create(**m, std::make_unique<NoGemma>(Make("reference")));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(says), std::string::npos) << refused.status().message();
  auto slots = SlotDecoder::Create(**m, std::make_unique<NoGemma>(Make("reference")), 2);  // what serve builds
  ASSERT_FALSE(slots.ok());
  EXPECT_NE(slots.status().message().find(says), std::string::npos) << slots.status().message();
}

// A backend that does not attend within windows (as the CUDA backend said
// before session 32):
// the reference's kernels, forwarded, with attends_windows() false.
class NoWindows final : public corruptions::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  const char* name() const override { return "no-windows"; }
  bool attends_windows() const override { return false; }
};

// Such a backend is refused a context past the model's window, naming the
// window, the context and the way out; within the window it runs.
TEST(StateSeam, ABackendThatCannotAttendWithinAWindowIsRefusedAContextPastIt) {
  ModelConfig c = Config(0);
  c.sliding_window = 24;
  auto m = SyntheticModel(c, 25);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto refused = Transformer::Create(**m, std::make_unique<NoWindows>(Make("reference")));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a context of 160 passes the model's sliding window of 24, and the "
                                            "no-windows backend does not attend within a window"),
            std::string::npos)
      << refused.status().message();
  (*m)->config.seq_len = 24;
  EXPECT_TRUE(Transformer::Create(**m, std::make_unique<NoWindows>(Make("reference"))).ok());
}

// Three slots: prompts prefilled together, then steps of all three.
std::vector<float> RunSlots(SlotDecoder& d, int vocab) {
  std::vector<std::vector<int>> prompts = {Ids(9, vocab, 2), Ids(5, vocab, 3), Ids(12, vocab, 4)};
  std::vector<SlotDecoder::Prompt> p;
  for (int s = 0; s < 3; s++) p.push_back({s, prompts[s].data(), static_cast<int>(prompts[s].size()), 0});
  std::vector<float> rows(3 * static_cast<size_t>(vocab));
  d.PrefillMany(p.data(), 3, rows.data());
  std::vector<float> all = rows;
  int pos[3] = {9, 5, 12}, slot[3] = {2, 0, 1}, token[3];
  for (int step = 0; step < 6; step++) {
    for (int i = 0; i < 3; i++) token[i] = (step * 31 + i * 7) % vocab;
    int pos_of[3];
    for (int i = 0; i < 3; i++) pos_of[i] = pos[slot[i]]++;
    d.Step(slot, token, pos_of, 3, rows.data());
    all.insert(all.end(), rows.begin(), rows.end());
  }
  EXPECT_TRUE(d.status().ok()) << d.status().message();
  return all;
}

TEST(StateSeam, ASlotDecoderWhoseStateIsOffTheHostGivesTheSameBits) {
  for (int experts : {0, 4}) {
    auto m = SyntheticModel(Config(experts), 7);
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto on_host = SlotDecoder::Create(**m, Make("fast"), 3);
    ASSERT_TRUE(on_host.ok()) << on_host.status().message();
    auto off = std::make_unique<OffHostBackend>(Make("fast"));
    OffHostBackend* seen = off.get();
    auto off_host = SlotDecoder::Create(**m, std::move(off), 3);
    ASSERT_TRUE(off_host.ok()) << off_host.status().message();
    ExpectSameBits(RunSlots(**on_host, 320), RunSlots(**off_host, 320), experts ? "MoE slots" : "dense slots");
    EXPECT_EQ(seen->misplaced(), 0) << seen->first_misplaced();
    EXPECT_GT(seen->attends(), 0) << "rows of several sequences take AttendRows";
    EXPECT_EQ(seen->rope_blocks(), 0) << "and not a sequence's block calls";
  }
}

// Tensor parallelism over in-process ranks: the off-host ranks' partial sums
// go through the host collective and back (Download, reduce, Upload), which
// must not change a bit; the averaging fault divides on the backend.
std::vector<float> RunTp(const Model& m, bool off_host, FaultPlan fault, long* misplaced, long* flushed = nullptr) {
  TpOptions o;
  o.tp = 2;
  o.fault = fault;
  std::vector<OffHostBackend*> made;
  if (off_host)
    o.make_kernels = [&made]() -> Result<std::unique_ptr<kernels::Backend>> {
      auto b = std::make_unique<OffHostBackend>(Make("fast"), /*defer_steps=*/true);
      made.push_back(b.get());
      return std::unique_ptr<kernels::Backend>(std::move(b));
    };
  ::testing::internal::CaptureStderr();
  auto g = TpGroup::Open(o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE((*g)->Agree(OkStatus()).ok());
  auto d = (*g)->Start(m);
  EXPECT_TRUE(d.ok()) << d.status().message();
  std::vector<float> rows = Run(**d, Ids(82, m.config.vocab_size, 5));
  const Status guard = (*d)->Finish();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(guard.ok(), fault.kind != FaultPlan::Kind::kDuplicate) << err;
  EXPECT_NE(err.find("tp collective guard:"), std::string::npos) << err;
  *misplaced = 0;
  for (OffHostBackend* b : made) *misplaced += b->misplaced();
  if (flushed)
    for (OffHostBackend* b : made) *flushed += b->flushed_steps();
  if (off_host) {
    EXPECT_EQ(made.size(), 2u);
  }
  return rows;
}

TEST(StateSeam, TensorParallelRanksWhoseStateIsOffTheHostGiveTheSameBits) {
  for (int experts : {0, 4}) {
    auto m = SyntheticModel(Config(experts), 9);
    ASSERT_TRUE(m.ok()) << m.status().message();
    FaultPlan moved;
    moved.kind = FaultPlan::Kind::kMove;
    moved.layer = 1;
    for (const FaultPlan& f : {FaultPlan{}, moved}) {
      SCOPED_TRACE(std::string(experts ? "MoE" : "dense") + (f.kind == FaultPlan::Kind::kMove ? " moved" : ""));
      long on_misplaced = 0, off_misplaced = 0;
      const std::vector<float> on = RunTp(**m, false, f, &on_misplaced);
      long flushed = 0;
      const std::vector<float> off = RunTp(**m, true, f, &off_misplaced, &flushed);
      ExpectSameBits(on, off, "tp=2");
      EXPECT_EQ(off_misplaced, 0);
      EXPECT_EQ(flushed, 2 * 12) << "each rank's deferred step is flushed by its first all-reduce's download";
    }
  }
}

// The checks can fail: a host pointer where state belongs is counted and
// named, and the engine's reading state in place traps.
TEST(StateSeam, TheOffHostBackendCatchesMisplacedArgumentsAndInPlaceReads) {
  OffHostBackend b(Make("fast"));
  auto state = b.AllocateState(8);
  EXPECT_TRUE(OffHostBackend::Tagged(state->data()));
  std::vector<float> host(8, 1.0f), weights(64, 0.5f);
  b.Matmul(host.data(), state->data(), kernels::F32Weights(weights.data(), 8, 8));
  EXPECT_EQ(b.misplaced(), 1);
  EXPECT_EQ(b.first_misplaced(), "Matmul out is not backend state");
  std::vector<float> up(8, 2.5f), down(8, 0.0f);
  b.Upload(state->data(), up.data(), 8);
  b.Download(down.data(), state->data(), 8);
  EXPECT_EQ(down, up);
  EXPECT_EQ(b.misplaced(), 1);
  EXPECT_DEATH(
      {
        volatile float v = state->data()[0];
        (void)v;
      },
      "");
}

}  // namespace
}  // namespace verity
