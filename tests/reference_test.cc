// The engine against an implementation that shares no code with it: the
// float64 NumPy forward in tests/reference/llama_ref.py. Its pinned logits for
// the shipped model must pass `verity parity --against`, a perturbed copy must
// fail naming the position, mismatched inputs are named errors, and every
// checkpoint kind the engine loads (llama2.c, HF dense, HF MoE, bf16, shards)
// matches the reference computed fresh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "verify/ref_logits.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

const char kPython[] = "/usr/bin/python3";

std::string Pinned() { return Model("stories260K.ref-logits.bin"); }
std::string RefScript() { return test::SourceDir() + "/tests/reference/llama_ref.py"; }
std::string Against(const std::string& model, const std::string& file, const std::string& extra = "") {
  return VerityBin() + " parity --model " + model + " --against " + file + " " + extra;
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// Rewrites one float of the pinned file's row for `position`.
std::string PerturbedCopy(const std::string& dir, int position, int logit, float value) {
  auto file = ReadRefLogits(Pinned());
  EXPECT_TRUE(file.ok()) << file.status().message();
  std::string bytes = test::ReadFile(Pinned());
  const size_t rows_at = bytes.size() - file->rows.size() * 4;
  const auto it = std::find(file->positions.begin(), file->positions.end(), position);
  EXPECT_NE(it, file->positions.end()) << "position " << position << " is not in the pinned file";
  const size_t row = static_cast<size_t>(it - file->positions.begin());
  std::memcpy(&bytes[rows_at + (row * file->vocab_size + logit) * 4], &value, 4);
  const std::string out = dir + "/perturbed.bin";
  test::WriteFile(out, bytes);
  return out;
}

TEST(ReferenceLogits, PinnedFilePassesOnBothBackendsWithEvidence) {
  for (const char* backend : {"fast", "reference"}) {
    auto r = Shell(Against(Model("stories260K.bin"), Pinned(), std::string("--json --backend ") + backend));
    ASSERT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["schema"], "verity.parity/1");
    EXPECT_EQ(j["candidate"], backend);
    EXPECT_EQ(j["reference"], "file:" + Pinned());
    EXPECT_EQ(j["reference_file"]["sha256"], Sha256File(Pinned()).value());
    EXPECT_EQ(j["reference_file"]["model_sha256"], Sha256File(Model("stories260K.bin")).value());
    EXPECT_NE(j["reference_file"]["generator"].get<std::string>().find("llama_ref.py"), std::string::npos);
    EXPECT_EQ(j["thresholds"]["min_top1"], 1.0);
    EXPECT_EQ(j["thresholds"]["max_mean_kl"], 1e-6);
    EXPECT_EQ(j["tokens"], 512);
    ASSERT_EQ(j["depths"].size(), 7u);
    EXPECT_EQ(j["depths"].back()["depth"], 512) << "the last depth is the end of the context";
    EXPECT_EQ(j["per_position"].size(), 56u) << "7 depths x 8 positions, each scored";
    EXPECT_EQ(j["worst"]["top1"], 1.0);
    EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6);
    EXPECT_EQ(j["ok"], true);
    EXPECT_TRUE(j["build"]["artifact_sha256"].is_string());
  }
  auto human = Shell(Against(Model("stories260K.bin"), Pinned()));
  EXPECT_NE(human.out.find("positions: 56 scored, 0 outside top-1 >= 1, KL <= 1e-06"), std::string::npos) << human.out;
  EXPECT_NE(LastLine(human.out).find("verdict=PASS"), std::string::npos) << human.out;
  // Deep mode: 14 depths x 16, all inside the file.
  auto deep = Shell("VERITY_PARITY_MODE=deep " + Against(Model("stories260K.bin"), Pinned(), "--json"));
  ASSERT_EQ(deep.exit_code, 0) << deep.err;
  EXPECT_EQ(nlohmann::json::parse(deep.out)["per_position"].size(), 224u);
  // Other dtypes are judged by the policy thresholds, against the same rows.
  auto bf16 = Shell(Against(Model("stories260K.bin"), Pinned(), "--json --dtype bf16"));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  auto jb = nlohmann::json::parse(bf16.out);
  EXPECT_EQ(jb["dtype"], "bf16");
  EXPECT_EQ(jb["thresholds"]["max_mean_kl"], 0.05);
  EXPECT_GT(jb["worst"]["mean_kl"].get<double>(), 1e-6);
}

TEST(ReferenceLogits, PinnedFileIsWhatTheScriptWrites) {
  auto pinned = ReadRefLogits(Pinned());
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned->tokens.size(), 512u);
  EXPECT_EQ(pinned->tokens[0], 1) << "BOS, then the reference's greedy choices";
  EXPECT_EQ(pinned->positions.size(), 224u);
  EXPECT_LT(test::ReadFile(Pinned()).size(), 1u << 20);
  const std::string dir = test::TempDir("regen");
  auto r = Shell(test::SourceDir() + "/scripts/make-reference-logits.sh " + dir + "/ref.bin");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("512 tokens, 224 rows of 512 logits"), std::string::npos) << r.out;
  auto fresh = ReadRefLogits(dir + "/ref.bin");
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_EQ(fresh->tokens, pinned->tokens);
  EXPECT_EQ(fresh->positions, pinned->positions);
  EXPECT_EQ(fresh->model_sha256, pinned->model_sha256);
  double worst = 0;
  for (size_t i = 0; i < fresh->rows.size(); i++)
    worst = std::max(worst, std::fabs(double(fresh->rows[i]) - pinned->rows[i]));
  EXPECT_LE(worst, 1e-5) << "the regenerated rows drifted from the pinned ones";
  std::printf("regenerated reference logits: %zu rows, max |diff| %g, %s\n", fresh->positions.size(), worst,
              test::ReadFile(dir + "/ref.bin") == test::ReadFile(Pinned()) ? "byte-identical" : "not byte-identical");
}

TEST(ReferenceLogits, APerturbedFileFailsNamingThePosition) {
  const std::string dir = test::TempDir("perturbed");
  auto pinned = ReadRefLogits(Pinned());
  ASSERT_TRUE(pinned.ok());
  // Position 437 is in depth 439's window. Its reference top-1 pushed to the bottom: top-1 and KL fail.
  const float* row = pinned->Row(437);
  ASSERT_NE(row, nullptr);
  const int top = static_cast<int>(std::max_element(row, row + 512) - row);
  const float low = *std::min_element(row, row + 512) - 10.0f;
  auto r = Shell(Against(Model("stories260K.bin"), PerturbedCopy(dir, 437, top, low)));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("position 437 (depth 439): KL "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("positions: 56 scored, 1 outside"), std::string::npos) << r.out;
  EXPECT_NE(LastLine(r.out).find("worst_position=437 verdict=FAIL"), std::string::npos) << r.out;
  // A nudge to the runner-up that keeps the top-1 but moves KL past 1e-6 fails too: the threshold bites.
  int second = top == 0 ? 1 : 0;
  for (int i = 0; i < 512; i++)
    if (i != top && row[i] > row[second]) second = i;
  const float nudge = std::min(0.5f, (row[top] - row[second]) / 2);
  auto small = Shell(Against(Model("stories260K.bin"), PerturbedCopy(dir, 437, second, row[second] + nudge), "--json"));
  EXPECT_EQ(small.exit_code, 1) << small.err;
  auto j = nlohmann::json::parse(small.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["worst"]["top1"], 1.0);
  EXPECT_GT(j["worst"]["mean_kl"].get<double>(), 1e-6);
  bool named = false;
  for (const auto& p : j["per_position"]) named |= p["position"] == 437 && p["kl"].get<double>() > 1e-6;
  EXPECT_TRUE(named) << small.out;
}

TEST(ReferenceLogits, MismatchesAreNamedErrors) {
  const std::string dir = test::TempDir("mismatch");
  auto synth = [&](const std::string& name, int vocab) {
    const std::string cfg = R"({"dim":16,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":2,"vocab_size":)" +
                            std::to_string(vocab) + R"(,"seq_len":512,"shared_classifier":true})";
    EXPECT_EQ(Shell(VerityBin() + " synth --out " + dir + "/" + name + " --config '" + cfg + "'").exit_code, 0);
    return dir + "/" + name;
  };
  auto other = Shell(Against(synth("same-vocab.bin", 512), Pinned()));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find(": model mismatch: computed from models/stories260K.bin (sha256 "), std::string::npos)
      << other.err;
  auto vocab = Shell(Against(synth("vocab300.bin", 300), Pinned()));
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("vocab mismatch: the file's rows hold vocab_size 512 logits, the model " + dir +
                           "/vocab300.bin has 300"),
            std::string::npos)
      << vocab.err;
  test::WriteFile(dir + "/ids.txt", "1 2 3");
  auto tokens = Shell(Against(Model("stories260K.bin"), Pinned(), "--tokens " + dir + "/ids.txt"));
  EXPECT_EQ(tokens.exit_code, 1);
  EXPECT_NE(tokens.err.find("--tokens: tokens mismatch with " + Pinned() + " at index 1"), std::string::npos)
      << tokens.err;
  auto missing = Shell(Against(Model("stories260K.bin"), Pinned(), "--depths 100"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("holds no reference row for position 92 (depth 100, window 8)"), std::string::npos)
      << missing.err;
  std::string bytes = test::ReadFile(Pinned());
  test::WriteFile(dir + "/short.bin", bytes.substr(0, bytes.size() - 4));
  auto truncated = Shell(Against(Model("stories260K.bin"), dir + "/short.bin"));
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.err.find("short.bin: 458748 bytes of rows, but 224 positions x vocab_size 512 f32 need 458752"),
            std::string::npos)
      << truncated.err;
}

// Every checkpoint kind the engine loads, written by verity, read by the
// reference on its own, compared by `verity parity --against`.
TEST(ReferenceLogits, EveryCheckpointKindMatchesTheIndependentForward) {
  const std::string dir = test::TempDir("kinds");
  const std::string v = VerityBin();
  ASSERT_EQ(Shell(v + " synth --out " + dir +
                  "/l2c.bin --config '{\"dim\":48,\"hidden_dim\":64,\"n_layers\":2,"
                  "\"n_heads\":6,\"n_kv_heads\":3,\"vocab_size\":256,\"seq_len\":64,\"shared_classifier\":false}'")
                .exit_code,
            0);
  ASSERT_EQ(Shell(v + " synth --shards 3 --out " + dir +
                  "/dense --config '{\"dim\":64,\"hidden_dim\":96,\"n_layers\":3,"
                  "\"n_heads\":4,\"n_kv_heads\":2,\"vocab_size\":300,\"seq_len\":96,\"shared_classifier\":true}'")
                .exit_code,
            0);
  ASSERT_EQ(Shell(v + " synth --dtype bf16 --out " + dir +
                  "/moe --config '{\"dim\":32,\"hidden_dim\":48,\"n_layers\":2,"
                  "\"n_heads\":4,\"n_kv_heads\":1,\"vocab_size\":200,\"seq_len\":64,\"shared_classifier\":false,"
                  "\"n_experts\":4,\"n_experts_per_tok\":2}'")
                .exit_code,
            0);
  ASSERT_EQ(Shell(v + " convert --model " + Model("stories260K.bin") + " --out " + dir +
                  "/stories-hf --dtype bf16 --shards 2")
                .exit_code,
            0);
  int checked = 0;
  for (const char* m : {"l2c.bin", "dense", "moe", "stories-hf"}) {
    const std::string model = dir + "/" + m, ref = dir + "/" + m + ".ref";
    auto gen = Shell(std::string(kPython) + " " + RefScript() + " " + model + " --greedy 64 --out " + ref);
    ASSERT_EQ(gen.exit_code, 0) << m << "\n" << gen.err;
    auto r = Shell(Against(model, ref, "--json"));
    ASSERT_EQ(r.exit_code, 0) << m << "\n" << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"], 64) << m;
    EXPECT_EQ(j["worst"]["top1"], 1.0) << m;
    EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6) << m;
    EXPECT_EQ(j["reference_file"]["model_sha256"], ModelSha256(model).value()) << m;
    checked++;
  }
  std::printf("reference forward: %d checkpoint kinds matched (worst mean KL <= 1e-6, top-1 1)\n", checked);
  EXPECT_EQ(checked, 4);
  // The reference refuses a key it cannot compute, naming it.
  std::string cfg = test::ReadFile(dir + "/dense/config.json");
  cfg.insert(cfg.rfind('}'), ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}");
  test::WriteFile(dir + "/dense/config.json", cfg);
  auto refused = Shell(std::string(kPython) + " " + RefScript() + " " + dir + "/dense --out " + dir + "/x.ref");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("rope_scaling type 'yarn' is not supported"), std::string::npos) << refused.err;
}

// A family's synthetic models against the NumPy forward, which reads the
// family's tensors itself, on both backends, in f32 (the family's own
// tying) and bf16 (two shards, untied, one KV head) files; then the same
// directory called `other` (a family without its tensors) is refused with
// `refusal`, so a loader that ignored the family's tensors could not pass.
// Returns the worst mean KL.
double FamilyMatchesTheIndependentForward(const std::string& family, const std::string& other,
                                          const std::string& refusal, const std::string& model_type = "",
                                          const std::string& config = "") {
  const std::string dir = test::TempDir(family);
  const std::string v = VerityBin();
  // `config`: keys added to both synths' (a JSON object's inside, "" for none).
  const std::string extra = config.empty() ? "" : "," + config;
  EXPECT_EQ(Shell(v + " synth --like " + family + " --out " + dir + "/tied --config '{" + config + "}'").exit_code, 0);
  EXPECT_EQ(Shell(v + " synth --like " + family + " --dtype bf16 --shards 2 --seed 7 --out " + dir +
                  "/untied --config '{\"shared_classifier\":false,\"n_kv_heads\":1" + extra + "}'")
                .exit_code,
            0);
  const nlohmann::json cfg = nlohmann::json::parse(test::ReadFile(dir + "/tied/config.json"));
  const std::string type = model_type.empty() ? family : model_type;
  EXPECT_EQ(cfg["model_type"], type);
  if (family.rfind("qwen", 0) == 0) EXPECT_EQ(cfg["use_sliding_window"], false);
  // Gemma's tied synths' greedy text is BOS repeated (Gemma's scaled
  // embedding makes each token its own best logit), over which attention is
  // blind; they are given 64 varied tokens instead.
  std::string tokens = " --greedy 64";
  if (family.rfind("gemma", 0) == 0) {
    std::string ids;
    for (int p = 0; p < 64; p++) ids += std::to_string((2 + 7919L * p) % 320) + " ";
    test::WriteFile(dir + "/ids", ids + "\n");
    tokens = " --tokens " + dir + "/ids";
  }
  int checked = 0;
  double worst_kl = 0;
  for (const char* m : {"tied", "untied"}) {
    const std::string model = dir + "/" + m, ref = dir + "/" + m + ".ref";
    auto gen = Shell(std::string(kPython) + " " + RefScript() + " " + model + tokens + " --out " + ref);
    EXPECT_EQ(gen.exit_code, 0) << m << "\n" << gen.err;
    for (const char* backend : {"fast", "reference"}) {
      auto r = Shell(Against(model, ref, std::string("--json --backend ") + backend));
      EXPECT_EQ(r.exit_code, 0) << m << " " << backend << "\n" << r.out << r.err;
      if (r.exit_code != 0) continue;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["tokens"], 64) << m;
      EXPECT_EQ(j["worst"]["top1"], 1.0) << m << " " << backend;
      EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6) << m << " " << backend;
      worst_kl = std::max(worst_kl, j["worst"]["mean_kl"].get<double>());
      checked++;
    }
  }
  std::printf("%s: %d model x backend pairs matched the NumPy forward: worst mean KL %.3g (<= 1e-6), top-1 1\n",
              family.c_str(), checked, worst_kl);
  EXPECT_EQ(checked, 4);
  // The family's tensors are read, not tolerated: the same files as another family are refused by name.
  std::string text = test::ReadFile(dir + "/tied/config.json");
  text.replace(text.find("\"" + type + "\""), type.size() + 2, "\"" + other + "\"");
  test::WriteFile(dir + "/tied/config.json", text);
  auto as_other = Shell(v + " parity --model " + dir + "/tied");
  EXPECT_NE(as_other.exit_code, 0);
  EXPECT_NE(as_other.err.find(refusal), std::string::npos) << as_other.err;
  return worst_kl;
}

// Qwen2 (issue 44): q/k/v biases, rope_theta 1e6, tied or untied heads.
TEST(ReferenceLogits, Qwen2MatchesTheIndependentForward) {
  FamilyMatchesTheIndependentForward("qwen2", "llama", "unexpected tensor model.layers.0.self_attn.k_proj.bias");
}

// Qwen3 (issue 44): per-head q/k RMSNorms before RoPE, head_dim 32 with a
// residual of 64 and 4 heads, no biases, tied or untied heads.
TEST(ReferenceLogits, Qwen3MatchesTheIndependentForward) {
  FamilyMatchesTheIndependentForward("qwen3", "llama", "unexpected tensor model.layers.0.self_attn.k_norm.weight");
}

// Phi-3 (issue 44): q/k/v fused in self_attn.qkv_proj and gate/up in
// mlp.gate_up_proj, split by rows; a sliding window of 192, the context;
// untied (and, in bf16, GQA with one KV head, as Phi-3-small/medium). As a
// Mistral (the same window, separate projections) the files are refused.
TEST(ReferenceLogits, Phi3MatchesTheIndependentForward) {
  FamilyMatchesTheIndependentForward("phi3", "mistral", "required tensor model.layers.0.self_attn.q_proj.weight");
}

// Gemma 2 (issue 44): the embedding scaled by sqrt(dim), four norms a layer
// stored as w for 1 + w, GeGLU, attention soft-cap 50 over scores large
// enough to bend, a final soft-cap, a window of 32 on even layers in 64
// positions, and query_pre_attn_scalar 24, not the head_dim 32 (as the 27B
// models' is not theirs), so a kernel that scaled by head_dim would fail.
// As a llama the config is refused by the first key a llama does not
// compute (its window).
TEST(ReferenceLogits, Gemma2MatchesTheIndependentForward) {
  FamilyMatchesTheIndependentForward("gemma2", "llama", "key 'sliding_window' is 32", "",
                                     R"("query_pre_attn_scalar":24)");
}

// Gemma 3's text model (issue 44): Gemma 2's layers with per-head q/k norms
// (1 + w too) and no soft-caps, one global layer in 6 (RoPE base 1e6,
// scaled linearly by 8 as Gemma 3 4B's) between windowed ones (base 10000,
// never scaled), query_pre_attn_scalar 24. As a Gemma 2 its scaling is
// refused by name.
TEST(ReferenceLogits, Gemma3MatchesTheIndependentForward) {
  FamilyMatchesTheIndependentForward(
      "gemma3", "gemma2", "rope_scaling is not part of Gemma 2", "gemma3_text",
      R"("query_pre_attn_scalar":24,"rope_scaling":{"rope_type":"linear","factor":8.0})");
}

// Mistral (issue 44): a sliding window of 128 in a context of 512. Each
// position attends to itself and the 127 before it, on both CPU backends,
// against the NumPy forward, which masks the same keys itself, over 384
// positions (most of the scored depths past the window). The same weights
// without the window (full attention) fail against those rows: the window
// is what the positions past it measure.
TEST(ReferenceLogits, MistralMatchesTheIndependentForwardPastItsWindow) {
  const std::string dir = test::TempDir("mistral");
  const std::string v = VerityBin(), model = dir + "/m", ref = dir + "/m.ref";
  ASSERT_EQ(Shell(v + " synth --like mistral --out " + model).exit_code, 0);
  const nlohmann::json cfg = nlohmann::json::parse(test::ReadFile(model + "/config.json"));
  EXPECT_EQ(cfg["model_type"], "mistral");
  EXPECT_EQ(cfg["sliding_window"], 128);
  EXPECT_EQ(cfg["max_position_embeddings"], 512);
  auto gen = Shell(std::string(kPython) + " " + RefScript() + " " + model + " --greedy 384 --out " + ref);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  for (const char* backend : {"fast", "reference"}) {
    auto r = Shell(Against(model, ref, std::string("--json --backend ") + backend + " --dump " + dir + "/" + backend));
    ASSERT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"], 384);
    EXPECT_EQ(j["worst"]["top1"], 1.0) << backend;
    EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6) << backend;
    std::printf(
        "mistral (%s): matched the windowed NumPy forward over 384 positions (window 128): worst mean KL "
        "%.3g, top-1 1\n",
        backend, j["worst"]["mean_kl"].get<double>());
  }
  // Full attention past the window is another model: the same weights with
  // no window fail against the windowed rows (verity's, = the file's).
  ASSERT_EQ(Shell("cp -r " + model + " " + dir + "/open").exit_code, 0);
  nlohmann::json open = cfg;
  open["sliding_window"] = nullptr;
  test::WriteFile(dir + "/open/config.json", open.dump(2));
  auto full = Shell(v + " parity --model " + dir + "/open --against " + dir + "/fast --depths 64,128,256,384");
  EXPECT_EQ(full.exit_code, 1) << full.out << full.err;
  EXPECT_NE(full.out.find("verdict=FAIL"), std::string::npos) << full.out;
  std::printf("mistral without its window against the windowed rows: %s\n", LastLine(full.out).c_str());
}

}  // namespace
}  // namespace verity
