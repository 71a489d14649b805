// The engine runs the shipped model exactly as llama2.c does, the fast path
// keeps parity with the reference path on two differently shaped models, and
// batched prefill leaves what per-token decode leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "engine/engine.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

std::string GenerateCmd(const std::string& extra) {
  return VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin") + " " +
         extra;
}

TEST(Golden, Greedy200MatchesLlama2cOnBothBackends) {
  const std::string golden = test::ReadFile(Model("stories260K.greedy200.txt"));
  ASSERT_FALSE(golden.empty());
  for (const char* backend : {"reference", "fast"}) {
    auto r = Shell(GenerateCmd("--steps 200 --temperature 0 --backend " + std::string(backend)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, golden) << backend;
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << "timing belongs on stderr";
  }
}

TEST(KnownAnswers, ModelCardPromptsContinueAsDocumented) {
  const std::pair<const char*, const char*> cases[] = {
      {"Once upon a time, there was a little girl named", " Lily. She loved to play outside"},
      {"One day, Tom went to the", " park with his mom."},
      {"The cat was very", " excited."}};
  for (const auto& [prompt, continuation] : cases) {
    auto r = Shell(GenerateCmd("--steps 40 --temperature 0 --prompt '" + std::string(prompt) + "'"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(std::string(prompt) + continuation, 0), 0u) << r.out;
  }
}

TEST(Sampling, SameSeedSameTextDifferentSeedDifferentText) {
  auto a = Shell(GenerateCmd("--steps 120 --temperature 1.0 --topp 0.9 --seed 42"));
  auto b = Shell(GenerateCmd("--steps 120 --temperature 1.0 --topp 0.9 --seed 42"));
  auto c = Shell(GenerateCmd("--steps 120 --temperature 1.0 --topp 0.9 --seed 43"));
  auto d = Shell(GenerateCmd("--steps 120 --temperature 0.8 --topp 0 --seed 42"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_GT(d.out.size(), 20u);
}

TEST(Format, IdsAreTheTokensAfterBosAndDecodeToTheText) {
  auto ids = Shell(GenerateCmd("--steps 30 --temperature 0 --format ids"));
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  auto model = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::Load(Model("tok512.bin"), 512);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::istringstream in(ids.out);
  int prev = Llama2cFormat::kBos, id, count = 0;
  std::string text;
  while (in >> id) {
    text += SafePiece(tok->Decode(prev, id));
    prev = id;
    count++;
  }
  EXPECT_EQ(count, 30);
  auto txt = Shell(GenerateCmd("--steps 30 --temperature 0"));
  EXPECT_EQ(text + "\n", txt.out);
}

TEST(Tokenizer, EncodeMatchesLlama2c) {
  auto tok = Tokenizer::Load(Model("tok512.bin"), 512);
  ASSERT_TRUE(tok.ok());
  // BOS, then the dummy-prefix-merged word pieces; decoding reproduces the text.
  std::vector<int> ids = tok->Encode("Once upon a time", true, false);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  std::string back;
  for (size_t i = 1; i < ids.size(); i++) back += tok->Decode(ids[i - 1], ids[i]);
  EXPECT_EQ(back, "Once upon a time");
  // A character outside the vocabulary falls back to its UTF-8 bytes (<0xNN> = byte + 3).
  std::vector<int> e = tok->Encode("\xC3\xA9", false, true);
  ASSERT_EQ(e.back(), 2);
  std::string bytes;
  for (size_t i = 1; i + 1 < e.size(); i++) bytes += tok->Decode(0, e[i]);
  EXPECT_EQ(bytes, "\xC3\xA9");
  EXPECT_TRUE(tok->Encode("", true, false) == std::vector<int>{1});
}

// Per row: max |fast - ref| <= 1e-5 * max |ref| (relative to the row's scale).
void ExpectParity(const std::string& path, int positions) {
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const int V = (*model)->config.vocab_size;
  auto ref_k = kernels::MakeBackend("reference");
  auto fast_k = kernels::MakeBackend("fast");
  ASSERT_TRUE(ref_k.ok() && fast_k.ok());
  Transformer ref(**model, std::move(ref_k).value()), fast(**model, std::move(fast_k).value());
  // Greedy on the reference; the fast path, teacher-forced on the same ids,
  // must pick the same argmax at every position (= the same greedy sequence).
  int token = Llama2cFormat::kBos;
  double worst = 0.0;
  std::vector<float> ref_row(V);
  for (int pos = 0; pos < positions; pos++) {
    const float* r = ref.Forward(token, pos);
    std::copy(r, r + V, ref_row.begin());
    const float* f = fast.Forward(token, pos);
    float scale = 0.0f, diff = 0.0f;
    int ref_best = 0, fast_best = 0;
    for (int i = 0; i < V; i++) {
      scale = std::max(scale, std::fabs(ref_row[i]));
      diff = std::max(diff, std::fabs(ref_row[i] - f[i]));
      if (ref_row[i] > ref_row[ref_best]) ref_best = i;
      if (f[i] > f[fast_best]) fast_best = i;
    }
    worst = std::max(worst, static_cast<double>(diff / scale));
    ASSERT_LE(diff, 1e-5f * scale) << "position " << pos;
    ASSERT_EQ(ref_best, fast_best) << "greedy ids diverge at position " << pos;
    token = ref_best;
  }
  std::printf("parity %s: %d positions, worst relative diff %.3g\n", path.c_str(), positions, worst);
}

TEST(Parity, FastMatchesReferenceOnStories260K) { ExpectParity(Model("stories260K.bin"), 256); }

TEST(Parity, FastMatchesReferenceOnSyntheticGqaUnsharedModel) {
  // ~26M parameters: grouped-query (8 heads over 2 kv heads), unshared classifier.
  ModelConfig c;
  c.dim = 512;
  c.hidden_dim = 1376;
  c.n_layers = 8;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.vocab_size = 4096;
  c.seq_len = 256;
  c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
  c.shared_classifier = false;
  c.rope_theta = Llama2cFormat::kRopeTheta;
  c.norm_eps = Llama2cFormat::kNormEps;
  const std::string path = test::TempDir("synth") + "/gqa.bin";
  ASSERT_TRUE(WriteSyntheticLlama2c(c, 7, path).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_FALSE((*loaded)->config.shared_classifier);
  EXPECT_EQ((*loaded)->config.n_kv_heads, 2);
  ExpectParity(path, 256);
}

// Prefill of T positions from pos0 must leave the logits (and the KV cache)
// that T calls of Forward leave: bit for bit on the reference backend, top-1
// identical and within 1e-5 relative (per row's scale) on the fast one.
void ExpectPrefillMatchesDecode(const class Model& model, const std::string& backend, float rel_tol) {
  const int V = model.config.vocab_size;
  std::vector<int> ids;
  for (int i = 0; i < 300; i++) ids.push_back(i == 0 ? Llama2cFormat::kBos : static_cast<int>((7919L * i + 13) % V));
  // (T, pos0): single positions, a partial block, exactly one block, several blocks, and continuations.
  const std::pair<int, int> cases[] = {{1, 0}, {5, 0}, {64, 0}, {200, 0}, {37, 5}, {70, 64}, {1, 200}};
  for (auto [T, pos0] : cases) {
    Transformer decode(model, std::move(kernels::MakeBackend(backend)).value());
    Transformer prefill(model, std::move(kernels::MakeBackend(backend)).value());
    const float* want = nullptr;
    for (int p = 0; p < pos0 + T; p++) want = decode.Forward(ids[p], p);
    if (pos0 > 0) prefill.Prefill(ids.data(), pos0, 0);  // the past, also prefilled
    const float* got = prefill.Prefill(ids.data() + pos0, T, pos0);
    float scale = 0.0f, diff = 0.0f;
    for (int i = 0; i < V; i++) {
      scale = std::max(scale, std::fabs(want[i]));
      diff = std::max(diff, std::fabs(want[i] - got[i]));
    }
    const std::string what = backend + " T=" + std::to_string(T) + " pos0=" + std::to_string(pos0);
    EXPECT_EQ(std::max_element(want, want + V) - want, std::max_element(got, got + V) - got) << what;
    if (rel_tol == 0.0f) {
      EXPECT_EQ(0, std::memcmp(want, got, V * sizeof(float))) << what << ": max diff " << diff;
    } else {
      EXPECT_LE(diff, rel_tol * scale) << what;
    }
    // The cache the prefill wrote serves the next decoded position as Forward's does.
    const int next = pos0 + T;
    const float* a = decode.Forward(ids[next], next);
    std::vector<float> after(a, a + V);
    const float* b = prefill.Forward(ids[next], next);
    float d2 = 0.0f, s2 = 0.0f;
    for (int i = 0; i < V; i++) {
      s2 = std::max(s2, std::fabs(after[i]));
      d2 = std::max(d2, std::fabs(after[i] - b[i]));
    }
    EXPECT_LE(d2, rel_tol * s2) << what << " then one decoded position";
  }
}

TEST(Prefill, MatchesPerTokenForwardOnStories260K) {
  auto model = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(model.ok());
  ExpectPrefillMatchesDecode(**model, "reference", 0.0f);
  ExpectPrefillMatchesDecode(**model, "fast", 1e-5f);
}

TEST(Prefill, MatchesPerTokenForwardOnSyntheticGqaModelInEveryDtype) {
  const std::string path = test::TempDir("prefill") + "/gqa.bin";
  auto r = Shell(VerityBin() + " synth --seed 11 --out " + path +
                 " --config '{\"dim\":256,\"hidden_dim\":688,\"n_layers\":3,\"n_heads\":8,\"n_kv_heads\":2,"
                 "\"vocab_size\":1000,\"seq_len\":320,\"shared_classifier\":false}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto model = LoadModel(path, t);
    ASSERT_TRUE(model.ok()) << model.status().message();
    EXPECT_EQ((*model)->config.n_kv_heads, 2);
    if (t == kernels::DType::kF32) ExpectPrefillMatchesDecode(**model, "reference", 0.0f);
    ExpectPrefillMatchesDecode(**model, "fast", 1e-5f);
  }
}

TEST(Prefill, MatchesPerTokenForwardOnSyntheticMoeModel) {
  ModelConfig c;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 320;
  c.seq_len = 320;
  c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = RopeStyle::kHalves;
  c.n_experts = 4;
  c.n_experts_per_tok = 2;
  auto model = SyntheticModel(c, 5);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ExpectPrefillMatchesDecode(**model, "reference", 0.0f);
  ExpectPrefillMatchesDecode(**model, "fast", 1e-5f);
}

TEST(Synthetic, SameSeedSameBytes) {
  const std::string dir = test::TempDir("synthseed");
  const std::string cfg =
      "'{\"dim\":64,\"hidden_dim\":96,\"n_layers\":2,\"n_heads\":4,\"n_kv_heads\":2,"
      "\"vocab_size\":300,\"seq_len\":32,\"shared_classifier\":true}'";
  for (const char* name : {"a", "b"}) {
    auto r = Shell(VerityBin() + " synth --seed 3 --out " + dir + "/" + name + ".bin --config " + cfg);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto r = Shell(VerityBin() + " synth --seed 4 --out " + dir + "/c.bin --config " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadFile(dir + "/a.bin"), test::ReadFile(dir + "/b.bin"));
  EXPECT_NE(test::ReadFile(dir + "/a.bin"), test::ReadFile(dir + "/c.bin"));
}

TEST(Logits, TeacherForcedRowsMatchTheForwardPass) {
  const std::string out = test::TempDir("logits") + "/l.f32";
  auto r = Shell(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ids '1 403 407 261' --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string bytes = test::ReadFile(out);
  ASSERT_EQ(bytes.size(), 4u * 512u * 4u);
  auto model = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(model.ok());
  Transformer t(**model, std::move(kernels::MakeBackend("reference")).value());
  std::vector<float> want = TeacherForcedLogits(t, {1, 403, 407, 261}).value();
  EXPECT_EQ(0, std::memcmp(bytes.data(), want.data(), bytes.size()));
  // Row 0 predicts "Once"-like piece 403 as the greedy first token.
  const float* row0 = reinterpret_cast<const float*>(bytes.data());
  EXPECT_EQ(std::max_element(row0, row0 + 512) - row0, 403);
}

TEST(Bench, PrintsOneProtocolObject) {
  auto r = Shell(VerityBin() + " bench --model " + Model("stories260K.bin") + " --steps 64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"schema\":\"verity.bench/1\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"decode_tok_s\""), std::string::npos);
  EXPECT_NE(r.out.find("\"prefill_tok_s\""), std::string::npos);
  EXPECT_NE(r.out.find("\"artifact_sha256\""), std::string::npos);
}

}  // namespace
}  // namespace verity
