// SlotDecoder's contract: every row a Step writes is bit for bit the logits
// that slot gets decoded alone by a Transformer on the same backend, whoever
// else is in the step, in whatever order, joining and leaving between steps,
// and in a slot reused for a new sequence.
#include "engine/slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tests/test_util.h"

namespace verity {
namespace {

constexpr int kSlots = 4, kSteps = 12;

int Argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

std::vector<int> Prompt(int s, int vocab) {
  std::vector<int> p(1 + 4 * s);  // lengths 1, 5, 9, 13
  for (size_t i = 0; i < p.size(); i++) p[i] = static_cast<int>((1 + 7919 * (i + 31 * s)) % vocab);
  return p;
}

// The logits of each decode step of slot s's sequence, decoded alone.
std::vector<std::vector<float>> Alone(const Model& m, const std::string& backend, int s, int steps) {
  auto t = Transformer::Create(m, std::move(kernels::MakeBackend(backend)).value());
  EXPECT_TRUE(t.ok());
  const int vocab = m.config.vocab_size;
  const std::vector<int> p = Prompt(s, vocab);
  const float* l = (*t)->Prefill(p.data(), static_cast<int>(p.size()), 0);
  std::vector<std::vector<float>> rows;
  int pos = static_cast<int>(p.size());
  for (int k = 0; k < steps; k++) {
    l = (*t)->Forward(Argmax(l, vocab), pos++);
    rows.emplace_back(l, l + vocab);
  }
  return rows;
}

// Sequence s joins at step s in slot s; the one in slot 1 leaves after 6
// steps, and a fifth sequence (prompt 0 again) reuses that slot from step 8.
// Each step's order is reversed on odd steps.
void ExpectBatchInvariant(const Model& m, const std::string& backend) {
  SCOPED_TRACE(backend + " " + kernels::DTypeName(m.dtype));
  const int vocab = m.config.vocab_size;
  auto d = SlotDecoder::Create(m, std::move(kernels::MakeBackend(backend)).value(), kSlots);
  ASSERT_TRUE(d.ok()) << d.status().message();
  struct Seq {
    int slot, prompt, join, leave, pos = 0, next = 0, done = 0;
  };
  std::vector<Seq> seqs = {{0, 0, 0, kSteps}, {1, 1, 1, 7}, {2, 2, 2, kSteps}, {3, 3, 3, kSteps}, {1, 0, 8, kSteps}};
  std::vector<std::vector<std::vector<float>>> want;
  for (const Seq& q : seqs) want.push_back(Alone(m, backend, q.prompt, q.leave - q.join));
  std::vector<float> logits(static_cast<size_t>(kSlots) * vocab);
  for (int step = 0; step < kSteps; step++) {
    std::vector<int> active;
    for (size_t i = 0; i < seqs.size(); i++) {
      Seq& q = seqs[i];
      if (q.join == step) {  // joins between steps: its prompt prefilled into its slot
        const std::vector<int> p = Prompt(q.prompt, vocab);
        const float* l = (*d)->Prefill(q.slot, p.data(), static_cast<int>(p.size()), 0);
        q.pos = static_cast<int>(p.size());
        q.next = Argmax(l, vocab);
      }
      if (q.join <= step && step < q.leave) active.push_back(static_cast<int>(i));
    }
    if (step % 2) std::reverse(active.begin(), active.end());
    std::vector<int> slot, token, pos;
    for (int i : active) slot.push_back(seqs[i].slot), token.push_back(seqs[i].next), pos.push_back(seqs[i].pos);
    (*d)->Step(slot.data(), token.data(), pos.data(), static_cast<int>(active.size()), logits.data());
    ASSERT_TRUE((*d)->status().ok());
    for (size_t r = 0; r < active.size(); r++) {
      Seq& q = seqs[active[r]];
      const float* row = logits.data() + r * vocab;
      const std::vector<float>& alone = want[active[r]][q.done];
      ASSERT_EQ(std::memcmp(row, alone.data(), vocab * sizeof(float)), 0)
          << "sequence " << active[r] << " step " << q.done << " differs from its decode alone";
      q.next = Argmax(row, vocab);
      q.pos++;
      q.done++;
    }
  }
  for (const Seq& q : seqs) EXPECT_EQ(q.done, q.leave - q.join);  // every step was checked
}

TEST(Slots, EveryStepRowIsTheSlotsDecodeAloneOnStories260K) {
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto m = LoadModel(test::Model("stories260K.bin"), t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (const char* b : {"reference", "fast"}) ExpectBatchInvariant(**m, b);
  }
}

// A synth wide enough that the fast backend splits its matmuls over threads.
ModelConfig WiderConfig(int hidden_dim, int seq_len) {
  ModelConfig c;
  c.dim = 256;
  c.hidden_dim = hidden_dim;
  c.n_layers = 2;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 1000;
  c.seq_len = c.max_positions = seq_len;
  c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  return c;
}

TEST(Slots, EveryStepRowIsTheSlotsDecodeAloneOnAWiderModel) {
  ModelConfig c = WiderConfig(768, 64);
  auto m = SyntheticModel(c, 11);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectBatchInvariant(**m, "fast");
  c.n_experts = 4;
  c.n_experts_per_tok = 2;
  auto moe = SyntheticModel(c, 12);
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  ExpectBatchInvariant(**moe, "fast");
}

// Prompts of `len` tokens (the sequence's own seed s).
std::vector<int> PromptOf(int s, int len, int vocab) {
  std::vector<int> p(len);
  for (int i = 0; i < len; i++) p[i] = static_cast<int>((3 + 104729L * (i + 17 * s)) % vocab);
  return p;
}

// 16 slots at once, one of them at a late position beside one at position 1,
// then steps of one slot alone (n = 1) between full steps: every row is still
// the slot's decode alone.
void ExpectSixteenSlotsInvariant(const Model& m, const std::string& backend) {
  SCOPED_TRACE(backend + " " + kernels::DTypeName(m.dtype));
  constexpr int kN = 16, kRounds = 4;
  const int vocab = m.config.vocab_size, late = m.config.seq_len - 2 * kRounds - 2;
  auto d = SlotDecoder::Create(m, std::move(kernels::MakeBackend(backend)).value(), kN);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<int> len(kN), pos(kN), next(kN), slot(kN);
  std::vector<std::unique_ptr<Transformer>> alone;
  for (int s = 0; s < kN; s++) {
    len[s] = s == 0 ? 1 : s == 1 ? late : 1 + 3 * s;
    const std::vector<int> p = PromptOf(s, len[s], vocab);
    const float* l = (*d)->Prefill(s, p.data(), len[s], 0);
    auto t = Transformer::Create(m, std::move(kernels::MakeBackend(backend)).value());
    ASSERT_TRUE(t.ok());
    const float* la = (*t)->Prefill(p.data(), len[s], 0);
    ASSERT_EQ(std::memcmp(l, la, vocab * sizeof(float)), 0) << "prefill of slot " << s;
    alone.push_back(std::move(t).value());
    pos[s] = len[s], next[s] = Argmax(l, vocab), slot[s] = s;
  }
  std::vector<float> logits(static_cast<size_t>(kN) * vocab);
  auto check = [&](int first, int n) {
    (*d)->Step(slot.data() + first, next.data() + first, pos.data() + first, n, logits.data());
    ASSERT_TRUE((*d)->status().ok()) << (*d)->status().message();
    for (int r = 0; r < n; r++) {
      const int s = first + r;
      const float* want = alone[s]->Forward(next[s], pos[s]);
      ASSERT_EQ(std::memcmp(logits.data() + static_cast<size_t>(r) * vocab, want, vocab * sizeof(float)), 0)
          << "slot " << s << " at position " << pos[s] << " in a step of " << n;
      next[s] = Argmax(want, vocab), pos[s]++;
    }
  };
  for (int round = 0; round < kRounds; round++) {
    check(0, kN);
    check(round % 2, 1);  // position 1's slot, or the late one, alone
  }
}

TEST(Slots, SixteenSlotsLateBesideEarlyAndSingleSlotSteps) {
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto m = LoadModel(test::Model("stories260K.bin"), t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (const char* b : {"reference", "fast"}) ExpectSixteenSlotsInvariant(**m, b);
  }
}

// The fast backend, saying its batched rows are not independent: PrefillMany
// must then prefill the prompts one after another, with the same results.
class DependentRows final : public kernels::Backend {
 public:
  DependentRows() : inner_(std::move(kernels::MakeBackend("fast")).value()) {}
  const char* name() const override { return "fast-dependent-rows"; }
  void Matmul(float* out, const float* x, const kernels::Weights& w) override { inner_->Matmul(out, x, w); }
  void MatmulBatch(float* out, const float* x, const kernels::Weights& w, int T) override {
    inner_->MatmulBatch(out, x, w, T);
  }
  void Attention(const kernels::AttentionArgs& a) override { inner_->Attention(a); }
  void Rope(float* v, int size, int hs, int pos, const float* f, bool interleaved) override {
    inner_->Rope(v, size, hs, pos, f, interleaved);
  }
  void SwiGLU(float* hb, const float* hb2, int n) override { inner_->SwiGLU(hb, hb2, n); }
  bool batch_rows_independent() const override { return false; }

 private:
  std::unique_ptr<kernels::Backend> inner_;
};

std::unique_ptr<kernels::Backend> BackendNamed(const std::string& name) {
  if (name == "dependent") return std::make_unique<DependentRows>();
  return std::move(kernels::MakeBackend(name)).value();
}

// Prompts of many lengths prefilled together: each row of logits, and the
// cache behind it (checked by one decode step), is the prompt's prefill alone.
// The lengths cut blocks of 1, 2, 3 and 64 rows, two 1-row tails in one wave
// (two 1-token and two 65-token prompts), and a prompt that ends in a wave
// where longer ones go on. Then a second PrefillMany continues every sequence
// from where it is (pos0 > 0), as a conversation's next turn would.
void ExpectPrefillManyIsEachAlone(const Model& m, const std::string& backend) {
  SCOPED_TRACE(backend + " " + kernels::DTypeName(m.dtype));
  const std::vector<int> lengths = {3, 1, 65, 2, 130, 64, 7, 129, 66, 1, 65};
  const int n = static_cast<int>(lengths.size()), vocab = m.config.vocab_size;
  auto d = SlotDecoder::Create(m, BackendNamed(backend), n + 1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<std::unique_ptr<Transformer>> alone;
  for (int i = 0; i < n; i++) {
    auto t = Transformer::Create(m, BackendNamed(backend));
    ASSERT_TRUE(t.ok());
    alone.push_back(std::move(t).value());
  }
  std::vector<int> pos(n, 0), slot(n), next(n);
  for (int i = 0; i < n; i++) slot[i] = n - i;  // slots in reverse
  std::vector<float> logits(static_cast<size_t>(n) * vocab), step(static_cast<size_t>(n) * vocab);
  for (int turn = 0; turn < 2; turn++) {
    std::vector<std::vector<int>> tokens;
    std::vector<SlotDecoder::Prompt> prompts;
    for (int i = 0; i < n; i++)
      tokens.push_back(PromptOf(i + 100 * turn, turn == 0 ? lengths[i] : lengths[n - 1 - i], vocab));
    for (int i = 0; i < n; i++)
      prompts.push_back({slot[i], tokens[i].data(), static_cast<int>(tokens[i].size()), pos[i]});
    (*d)->PrefillMany(prompts.data(), n, logits.data());
    ASSERT_TRUE((*d)->status().ok()) << (*d)->status().message();
    std::vector<const float*> want_step;
    for (int i = 0; i < n; i++) {
      const int T = static_cast<int>(tokens[i].size());
      const float* want = alone[i]->Prefill(tokens[i].data(), T, pos[i]);
      ASSERT_EQ(std::memcmp(logits.data() + static_cast<size_t>(i) * vocab, want, vocab * sizeof(float)), 0)
          << "turn " << turn << ": prompt " << i << " of " << T << " tokens at position " << pos[i]
          << ", prefilled with the others";
      pos[i] += T;
      next[i] = Argmax(want, vocab);
    }
    (*d)->Step(slot.data(), next.data(), pos.data(), n, step.data());
    ASSERT_TRUE((*d)->status().ok()) << (*d)->status().message();
    for (int i = 0; i < n; i++) {
      const float* want = alone[i]->Forward(next[i], pos[i]);
      ASSERT_EQ(std::memcmp(step.data() + static_cast<size_t>(i) * vocab, want, vocab * sizeof(float)), 0)
          << "turn " << turn << ": the step after prompt " << i << ": its cache differs";
      pos[i]++;
    }
  }
}

TEST(Slots, PromptsPrefilledTogetherAreEachPrefilledAlone) {
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto m = LoadModel(test::Model("stories260K.bin"), t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (const char* b : {"reference", "fast", "dependent"}) ExpectPrefillManyIsEachAlone(**m, b);
  }
}

TEST(Slots, PromptsPrefilledTogetherOnAWiderModelAndMoE) {
  ModelConfig c = WiderConfig(772, 320);  // 772: not a multiple of any vector width, every dot has a tail
  auto m = SyntheticModel(c, 21);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectPrefillManyIsEachAlone(**m, "fast");
  c.n_experts = 4;
  c.n_experts_per_tok = 2;
  auto moe = SyntheticModel(c, 22);
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  ExpectPrefillManyIsEachAlone(**moe, "fast");
}

TEST(Slots, BadPrefillManyArgumentsAreNamedErrors) {
  auto m = LoadModel(test::Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  const int vocab = (*m)->config.vocab_size, ctx = (*m)->config.seq_len;
  const std::vector<int> ok = {1, 2, 3}, bad = {1, vocab, 3};
  struct Case {
    std::vector<SlotDecoder::Prompt> prompts;
    const char* says;
  };
  const Case cases[] = {
      {{{0, ok.data(), 3, 0}, {0, ok.data(), 3, 0}}, "slot 0 appears twice"},
      {{{0, ok.data(), 3, 0}, {2, ok.data(), 3, 0}}, "slot 2 is not one of the 2 slots"},
      {{{1, bad.data(), 3, 0}}, "outside the vocabulary"},
      {{{0, ok.data(), 3, ctx - 2}}, "outside the context"},
      {{{0, ok.data(), 3, 0}, {1, ok.data(), 3, 0}, {0, ok.data(), 3, 0}}, "3 sequences in one call"}};
  for (const Case& c : cases) {
    auto d = SlotDecoder::Create(**m, std::move(kernels::MakeBackend("fast")).value(), 2);
    ASSERT_TRUE(d.ok());
    std::vector<float> logits(c.prompts.size() * vocab, 0.0f);
    (*d)->PrefillMany(c.prompts.data(), static_cast<int>(c.prompts.size()), logits.data());
    ASSERT_FALSE((*d)->status().ok()) << c.says;
    EXPECT_NE((*d)->status().message().find(c.says), std::string::npos) << (*d)->status().message();
    EXPECT_TRUE(std::isnan(logits[0]) && std::isnan(logits.back())) << c.says;
  }
}

// A bad slot, token or position is a named error and NaN rows, never a write
// into another slot's cache.
TEST(Slots, BadStepArgumentsAreNamedErrors) {
  auto m = LoadModel(test::Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  const int vocab = (*m)->config.vocab_size, ctx = (*m)->config.seq_len;
  struct Case {
    std::vector<int> slot, token, pos;
    const char* says;
  };
  const Case cases[] = {{{0, 2}, {1, 1}, {0, 0}, "slot 2 is not one of the 2 slots"},
                        {{1, 1}, {1, 1}, {0, 0}, "slot 1 appears twice"},
                        {{0}, {vocab}, {0}, "outside the vocabulary"},
                        {{0}, {1}, {ctx}, "outside the context"}};
  for (const Case& c : cases) {
    auto d = SlotDecoder::Create(**m, std::move(kernels::MakeBackend("fast")).value(), 2);
    ASSERT_TRUE(d.ok());
    std::vector<float> logits(c.slot.size() * vocab, 0.0f);
    (*d)->Step(c.slot.data(), c.token.data(), c.pos.data(), static_cast<int>(c.slot.size()), logits.data());
    ASSERT_FALSE((*d)->status().ok()) << c.says;
    EXPECT_NE((*d)->status().message().find(c.says), std::string::npos) << (*d)->status().message();
    EXPECT_TRUE(std::isnan(logits[0]) && std::isnan(logits.back())) << c.says;
  }
}

// A batched step's greedy picks (StepGreedy: the backend's ArgmaxRows) are
// the largest logit of each row Step writes (ties to the lower index), on the
// host backends and on state off the host (the device path: no logits come
// down); a bad argument makes every pick -1 and is named.
TEST(Slots, StepGreedyPicksEachRowsLargestLogit) {
  auto m = LoadModel(test::Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  const int vocab = (*m)->config.vocab_size;
  for (const std::string backend : {"reference", "fast"}) {
    auto a = SlotDecoder::Create(**m, std::move(kernels::MakeBackend(backend)).value(), 3);
    auto b = SlotDecoder::Create(**m, std::move(kernels::MakeBackend(backend)).value(), 3);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<int> slot = {2, 0, 1}, token = {5, 77, 300}, pos = {0, 0, 0}, picks(3, -7);
    std::vector<float> logits(3 * static_cast<size_t>(vocab));
    for (int step = 0; step < 6; step++) {
      (*a)->Step(slot.data(), token.data(), pos.data(), 3, logits.data());
      (*b)->StepGreedy(slot.data(), token.data(), pos.data(), 3, picks.data());
      for (int i = 0; i < 3; i++) {
        EXPECT_EQ(picks[i], Argmax(logits.data() + static_cast<size_t>(i) * vocab, vocab))
            << backend << " step " << step;
        token[i] = picks[i];
        pos[i]++;
      }
    }
    ASSERT_TRUE((*b)->status().ok()) << (*b)->status().message();
    std::vector<int> bad_slot = {0, 0};
    (*b)->StepGreedy(bad_slot.data(), token.data(), pos.data(), 2, picks.data());
    EXPECT_EQ(picks[0], -1);
    EXPECT_EQ(picks[1], -1);
    ASSERT_FALSE((*b)->status().ok());
    EXPECT_NE((*b)->status().message().find("slot 0 appears twice"), std::string::npos) << (*b)->status().message();
  }
}

TEST(Slots, KvCacheBytesIsSlotsTimesOneContext) {
  auto m = LoadModel(test::Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  auto d = SlotDecoder::Create(**m, std::move(kernels::MakeBackend("fast")).value(), 3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->kv_cache_bytes(), 3 * FootprintOf(**m).kv_cache_bytes);
}

TEST(Slots, ZeroSlotsIsANamedError) {
  auto m = LoadModel(test::Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  auto d = SlotDecoder::Create(**m, std::move(kernels::MakeBackend("fast")).value(), 0);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--parallel"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace verity
