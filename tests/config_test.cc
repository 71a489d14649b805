// Every config key that changes the math is read or refused by name; the
// context is the user's choice; config dimensions that disagree with the
// tensors, or a context larger than memory, are named errors (exit 1), never
// an abort. Llama 3- and Llama 2-style checkpoints written by `verity synth`
// match the independent NumPy reference (tests/reference/llama_ref.py), as
// Hugging Face directories and as GGUF.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

const char kPython[] = "/usr/bin/python3";
std::string RefScript() { return test::SourceDir() + "/tests/reference/llama_ref.py"; }

// stories260K as a Hugging Face directory, then `edit` applied to its config.json.
std::string StoriesDir(const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = test::TempDir(tag) + "/hf";
  auto r = Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(test::ReadFile(dir + "/config.json"));
  edit(j);
  test::WriteFile(dir + "/config.json", j.dump(2));
  return dir;
}

test::CommandResult Generate(const std::string& model, const std::string& extra = "") {
  return Shell(VerityBin() + " generate --model " + model + " --tokenizer " + Model("tok512.bin") +
               " --temperature 0 --steps 16 " + extra);
}

// The command exits 1 (not a signal) and its error names every needle.
void ExpectNamedError(const test::CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "no '" << n << "' in: " << r.err;
}

TEST(Config, DimensionsDisagreeingWithTheTensorsAreNamedBeforeAnyAllocation) {
  // Once std::bad_alloc (signal 6); now the key, the tensor and exit 1.
  const std::string ffn = StoriesDir("ffn", [](auto& j) { j["intermediate_size"] = 400000000; });
  ExpectNamedError(Generate(ffn), {"config.json: intermediate_size is 400000000 but tensor "
                                   "model.layers.0.mlp.gate_proj.weight has shape [172x64]"});
  auto audit = Shell(VerityBin() + " audit " + ffn);
  EXPECT_EQ(audit.exit_code, 1);
  EXPECT_NE(audit.out.find("intermediate_size is 400000000"), std::string::npos) << audit.out;
  const std::string layers = StoriesDir("layers", [](auto& j) { j["num_hidden_layers"] = 100000000; });
  ExpectNamedError(Generate(layers), {"num_hidden_layers is 100000000 but the checkpoint does not hold "
                                      "model.layers.99999999.input_layernorm.weight"});
  const std::string vocab = StoriesDir("vocab", [](auto& j) { j["vocab_size"] = 2000000000; });
  ExpectNamedError(Generate(vocab), {"vocab_size is 2000000000 but tensor model.embed_tokens.weight"});
  const std::string heads = StoriesDir("headdim", [](auto& j) { j["head_dim"] = 4096; });
  ExpectNamedError(Generate(heads), {"num_attention_heads x head_dim (8 x 4096) is 32768 but tensor "
                                     "model.layers.0.self_attn.q_proj.weight has shape [64x64]"});
}

TEST(Config, TheContextIsTheUsersChoice) {
  // max_position_embeddings 100000000 once allocated a 3 GB cache and aborted;
  // the default context is min(max_position_embeddings, 4096).
  const std::string dir = StoriesDir("ctx", [](auto& j) { j["max_position_embeddings"] = 100000000; });
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config.seq_len, kDefaultContext);
  EXPECT_EQ((*m)->config.max_positions, 100000000);
  auto ok = Generate(dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("Once upon a time", 0), 0u) << ok.out;
  // A context that cannot fit in memory is refused before it is allocated.
  ExpectNamedError(Generate(dir, "--ctx 100000000"),
                   {"a context of 100000000 positions needs a", "KV cache", "choose a smaller --ctx"});
  ExpectNamedError(Generate(dir, "--ctx 0"), {"--ctx 0 is outside [1, 100000000]"});
  // Past the model's own positions: refused, naming --ctx.
  ExpectNamedError(Generate(Model("stories260K.bin"), "--ctx 513"), {"--ctx 513 is outside [1, 512]"});
  // Prompt plus steps beyond the context: named errors on every command.
  ExpectNamedError(Generate(Model("stories260K.bin"), "--ctx 8"), {"--steps 16 is outside [1, seq_len=8]", "--ctx"});
  ExpectNamedError(
      Shell(VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin") +
            " --ctx 12 --steps 12 --prompt 'Once upon a time, there was a "
            "little girl named Lily who'"),
      {"tokens do not fit the context seq_len=12 (--ctx)"});
  const std::string out = test::TempDir("ctxl") + "/l.bin";
  ExpectNamedError(
      Shell(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ctx 2 --ids '1 2 3' --out " + out),
      {"--ids: 3 ids exceed the context seq_len=2 (--ctx)"});
  ExpectNamedError(Shell(VerityBin() + " bench --model " + Model("stories260K.bin") + " --ctx 16 --steps 32"),
                   {"--steps 32 = 32 positions exceed the model's context (seq_len 16) set by --ctx"});
  // A smaller context changes nothing the model computes within it.
  auto full = Shell(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ids '1 403 407' --out " + out);
  auto small = Shell(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ctx 3 --ids '1 403 407' --out " +
                     out + "3");
  ASSERT_EQ(full.exit_code, 0);
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(test::ReadFile(out), test::ReadFile(out + "3"));
  auto parity = Shell(VerityBin() + " parity --model " + Model("stories260K.bin") + " --ctx 64");
  EXPECT_EQ(parity.exit_code, 0) << parity.err;
  EXPECT_NE(parity.out.find(" 64 tokens"), std::string::npos) << parity.out;
}

TEST(Config, EveryKeyThatChangesTheMathIsReadOrRefusedByName) {
  struct Case {
    std::string tag;
    std::function<void(nlohmann::json&)> edit;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"attn-bias", [](auto& j) { j["attention_bias"] = true; },
       "key 'attention_bias' is true; verity computes only false"},
      {"mlp-bias", [](auto& j) { j["mlp_bias"] = true; }, "key 'mlp_bias' is true; verity computes only false"},
      {"act", [](auto& j) { j["hidden_act"] = "gelu"; }, "hidden_act \"gelu\" is not supported"},
      {"yarn",
       [](auto& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       "rope_scaling type \"yarn\" is not supported (verity computes linear and llama3)"},
      {"dynamic",
       [](auto& j) {
         j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
       },
       "rope_scaling type \"dynamic\" is not supported"},
      {"llama3-part",
       [](auto& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
       },
       "rope_scaling (llama3) needs a number 'low_freq_factor'"},
      {"llama3-order",
       [](auto& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 4.0},
                              {"high_freq_factor", 1.0},
                              {"original_max_position_embeddings", 64}};
       },
       "rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor"},
      {"linear-extra",
       [](auto& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"beta_fast", 32}};
       },
       "rope_scaling key 'beta_fast' is not part of linear scaling"},
      {"window", [](auto& j) { j["sliding_window"] = 4096; },
       "key 'sliding_window' is 4096; verity computes only null"},
      {"partial", [](auto& j) { j["partial_rotary_factor"] = 0.5; }, "key 'partial_rotary_factor' is 0.5"},
      {"quant",
       [](auto& j) {
         j["quantization_config"] = {{"quant_method", "gptq"}};
       },
       "key 'quantization_config'"},
      {"theta", [](auto& j) { j.erase("rope_theta"); }, "required key 'rope_theta' is missing"},
      {"eps", [](auto& j) { j.erase("rms_norm_eps"); }, "required key 'rms_norm_eps' is missing"},
      {"tie", [](auto& j) { j["tie_word_embeddings"] = "yes"; }, "key 'tie_word_embeddings' must be true or false"},
      {"bos", [](auto& j) { j["bos_token_id"] = 512; }, "bos_token_id 512 is outside the vocabulary [0, 512)"},
      {"eos",
       [](auto& j) {
         j["eos_token_id"] = nlohmann::json::array({2, "x"});
       },
       "key 'eos_token_id' must be a token id or a list of them"},
      {"head-dim", [](auto& j) { j["head_dim"] = 7; }, "head_dim 7 is odd"},
  };
  int refused = 0;
  for (const Case& c : cases) {
    const std::string dir = StoriesDir(c.tag, c.edit);
    std::remove((dir + "/generation_config.json").c_str());  // BOS/EOS from config.json alone here
    auto r = Generate(dir);
    ExpectNamedError(r, {c.needle, dir + "/config.json"});
    refused += r.exit_code == 1 && r.err.find(c.needle) != std::string::npos;
  }
  // generation_config.json: malformed is named; its ids win over config.json's.
  const std::string gen = StoriesDir("gen", [](auto& j) { j["bos_token_id"] = 1, j["eos_token_id"] = 2; });
  test::WriteFile(gen + "/generation_config.json", "{\"eos_token_id\": [");
  ExpectNamedError(Generate(gen), {gen + "/generation_config.json: not valid JSON"});
  refused += 1;
  test::WriteFile(gen + "/generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [2, 13, 400]})");
  auto m = LoadModel(gen);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config.bos_id, 1);
  EXPECT_EQ((*m)->config.eos_ids, (std::vector<int>{2, 13, 400}));
  // Neutral values and unknown keys load (the unknown one with a note).
  const std::string neutral = StoriesDir("neutral", [](auto& j) {
    j["attention_bias"] = false, j["mlp_bias"] = false, j["rope_scaling"] = nullptr, j["sliding_window"] = nullptr;
    j["pretraining_tp"] = 1, j["head_dim"] = 8, j["some_future_key"] = 3;
  });
  auto n = Generate(neutral);
  EXPECT_EQ(n.exit_code, 0) << n.err;
  EXPECT_NE(n.err.find("key 'some_future_key' is not one verity knows; ignored"), std::string::npos) << n.err;
  std::printf("config keys: %d refusals checked, each named (of %zu cases)\n", refused, cases.size() + 1);
  EXPECT_EQ(refused, static_cast<int>(cases.size()) + 1);
}

// A copy of `root`/base whose config.json is `base` edited, run through
// `verity logits` (with `flags`): how the loader takes the edit.
test::CommandResult WithEditedConfig(const std::string& root, const nlohmann::json& base, const std::string& tag,
                                     const std::function<void(nlohmann::json&)>& edit, const std::string& flags = "") {
  const std::string dir = root + "/" + tag;
  EXPECT_EQ(Shell("cp -r " + root + "/base " + dir).exit_code, 0);
  nlohmann::json j = base;
  edit(j);
  test::WriteFile(dir + "/config.json", j.dump(2));
  return Shell(VerityBin() + " logits --model " + dir + " --ids '1 2 3' --out " + dir + "/logits.bin " + flags);
}

// Qwen2's keys (docs/config-keys.md, "Qwen2"): the window is refused only
// when it is on, the stated window and Qwen2's attention_bias are inert, a
// layer schedule other than full attention is refused by name.
TEST(Config, Qwen2WindowKeysAreReadOrRefusedByName) {
  const std::string root = test::TempDir("qwen2-keys");
  ASSERT_EQ(Shell(VerityBin() + " synth --like qwen2 --out " + root + "/base").exit_code, 0);
  const nlohmann::json base = nlohmann::json::parse(test::ReadFile(root + "/base/config.json"));
  auto with = [&](const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
    return WithEditedConfig(root, base, tag, edit);
  };
  auto on = with("on", [](auto& j) { j["use_sliding_window"] = true, j["sliding_window"] = 64; });
  ExpectNamedError(on, {"key 'use_sliding_window' is true; verity computes only false"});
  auto types = with("types", [](auto& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; });
  ExpectNamedError(types, {"key 'layer_types' holds \"sliding_attention\""});
  auto yarn = with("yarn", [](auto& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  ExpectNamedError(yarn, {"rope_scaling type \"yarn\" is not supported"});
  // What Qwen2.5's own config.json states loads, without a note.
  auto stated = with("stated", [](auto& j) {
    j["sliding_window"] = 32768, j["max_window_layers"] = 21, j["attention_bias"] = true;
    j["layer_types"] = {"full_attention", "full_attention"};
  });
  EXPECT_EQ(stated.exit_code, 0) << stated.err;
  EXPECT_EQ(stated.err.find("not one verity knows"), std::string::npos) << stated.err;
  // A llama has no window switch to turn off: its stated window is refused.
  auto llama = with("llama-window", [](auto& j) { j["model_type"] = "llama", j["sliding_window"] = 4096; });
  EXPECT_EQ(llama.exit_code, 1) << llama.err;
  EXPECT_NE(llama.err.find("key 'sliding_window' is 4096"), std::string::npos) << llama.err;
}

// Qwen3's keys (docs/config-keys.md, "Qwen3"): head_dim is required (its
// config class defaults it to 128, not hidden_size / heads), attention_bias
// is read (true: biases on q, k, v and o, refused by name), the window keys
// as Qwen2's; the q/k norm tensors are required.
TEST(Config, Qwen3KeysAreReadOrRefusedByName) {
  const std::string root = test::TempDir("qwen3-keys");
  ASSERT_EQ(Shell(VerityBin() + " synth --like qwen3 --out " + root + "/base").exit_code, 0);
  const nlohmann::json base = nlohmann::json::parse(test::ReadFile(root + "/base/config.json"));
  EXPECT_EQ(base["model_type"], "qwen3");
  EXPECT_EQ(base["head_dim"], 32);
  auto with = [&](const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
    return WithEditedConfig(root, base, tag, edit);
  };
  ExpectNamedError(with("no-head-dim", [](auto& j) { j.erase("head_dim"); }),
                   {"model_type qwen3 needs key 'head_dim'"});
  ExpectNamedError(with("bias", [](auto& j) { j["attention_bias"] = true; }),
                   {"key 'attention_bias' is true; verity computes only false"});
  ExpectNamedError(with("on", [](auto& j) { j["use_sliding_window"] = true; }), {"key 'use_sliding_window' is true"});
  // What Qwen3-0.6B's own config.json states loads, without a note.
  auto stated = with("stated", [](auto& j) {
    j["sliding_window"] = nullptr, j["max_window_layers"] = 28, j["attention_bias"] = false;
    j["layer_types"] = {"full_attention", "full_attention"}, j["attention_dropout"] = 0.0;
  });
  EXPECT_EQ(stated.exit_code, 0) << stated.err;
  EXPECT_EQ(stated.err.find("not one verity knows"), std::string::npos) << stated.err;
  // The norms are read, not tolerated: without one the model is refused by name.
  const std::string gone = root + "/no-norm";
  ASSERT_EQ(Shell(VerityBin() + " synth --like qwen3 --config '{\"qk_norm\":false}' --out " + gone).exit_code, 0);
  test::WriteFile(gone + "/config.json", base.dump(2));
  ExpectNamedError(Shell(VerityBin() + " logits --model " + gone + " --ids '1 2 3' --out " + gone + "/l.bin"),
                   {"model.layers.0.self_attn.q_norm.weight"});
}

// Phi-3's keys (docs/config-keys.md, "Phi-3"): the fused tensors are
// required (split by rows), the window is read (a context past it runs), longrope and a
// partial rotary factor are refused by name, and what Phi-3-mini-4k's own
// config.json states loads without a note; `verity audit` counts the fused
// tensors once.
TEST(Config, Phi3KeysAreReadOrRefusedByName) {
  const std::string root = test::TempDir("phi3-keys");
  ASSERT_EQ(Shell(VerityBin() + " synth --like phi3 --out " + root + "/base").exit_code, 0);
  const nlohmann::json base = nlohmann::json::parse(test::ReadFile(root + "/base/config.json"));
  EXPECT_EQ(base["model_type"], "phi3");
  EXPECT_EQ(base["sliding_window"], 192);
  const std::string st = test::ReadFile(root + "/base/model.safetensors");
  EXPECT_NE(st.find("model.layers.0.self_attn.qkv_proj.weight"), std::string::npos);
  EXPECT_NE(st.find("model.layers.0.mlp.gate_up_proj.weight"), std::string::npos);
  EXPECT_EQ(st.find("q_proj"), std::string::npos);
  auto with = [&](const std::string& tag, const std::function<void(nlohmann::json&)>& edit,
                  const std::string& flags = "") { return WithEditedConfig(root, base, tag, edit, flags); };
  ExpectNamedError(with("longrope",
                        [](auto& j) {
                          j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {2.0}}};
                        }),
                   {"rope_scaling type \"longrope\" is not supported"});
  ExpectNamedError(with("partial", [](auto& j) { j["partial_rotary_factor"] = 0.75; }),
                   {"key 'partial_rotary_factor' is 0.75"});
  // Past the window: the window attended within, the cache the whole context.
  auto past = with(
      "past-window", [](auto&) {}, "--ctx 256");
  EXPECT_EQ(past.exit_code, 0) << past.err;
  auto stated = with("stated", [](auto& j) {
    j["embd_pdrop"] = 0.0, j["resid_pdrop"] = 0.0, j["attention_dropout"] = 0.0, j["attention_bias"] = false;
    j["original_max_position_embeddings"] = 256, j["rope_scaling"] = nullptr, j["pad_token_id"] = 3;
  });
  EXPECT_EQ(stated.exit_code, 0) << stated.err;
  EXPECT_EQ(stated.err.find("not one verity knows"), std::string::npos) << stated.err;
  auto audit = Shell(VerityBin() + " audit " + root + "/base");
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("audit: tensors=15 "), std::string::npos) << audit.out;
  // As a llama the fused files are refused, naming the first split tensor.
  ExpectNamedError(with("as-llama", [](auto& j) { j["model_type"] = "llama", j.erase("sliding_window"); }),
                   {"required tensor model.layers.0.self_attn.q_proj.weight (attention) is missing"});
}

// Gemma's keys (docs/config-keys.md, "Gemma 2", "Gemma 3"): what Gemma 2
// 2B's and Gemma 3 1B's own config.json state loads without a note (their
// tie_word_embeddings left out: true); the keys their classes default are
// required; a layer schedule verity does not compute, another activation,
// Gemma 2 with rope scaling and the multimodal gemma3 are refused by name.
TEST(Config, GemmaKeysAreReadOrRefusedByName) {
  for (const std::string like : {"gemma2", "gemma3"}) {
    const std::string root = test::TempDir(like + "-keys");
    ASSERT_EQ(Shell(VerityBin() + " synth --like " + like + " --out " + root + "/base").exit_code, 0);
    const nlohmann::json base = nlohmann::json::parse(test::ReadFile(root + "/base/config.json"));
    const bool g3 = like == "gemma3";
    EXPECT_EQ(base["model_type"], g3 ? "gemma3_text" : "gemma2");
    auto with = [&](const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
      return WithEditedConfig(root, base, tag, edit);
    };
    auto stated = with("stated", [&](auto& j) {
      j.erase("tie_word_embeddings");
      j["cache_implementation"] = "hybrid", j["hidden_act"] = "gelu_pytorch_tanh", j["pad_token_id"] = 0;
      j["attention_dropout"] = 0.0, j["initializer_range"] = 0.02, j["use_cache"] = true;
    });
    EXPECT_EQ(stated.exit_code, 0) << stated.err;
    EXPECT_EQ(stated.err.find("not one verity knows"), std::string::npos) << stated.err;
    for (const char* key : {"query_pre_attn_scalar", "hidden_activation", "sliding_window"})
      ExpectNamedError(with(std::string("no-") + key, [&](auto& j) { j.erase(key); }),
                       {std::string("required key '") + key + "' is missing"});
    ExpectNamedError(with("act", [](auto& j) { j["hidden_activation"] = "gelu"; }),
                     {"hidden_activation \"gelu\" is not supported"});
    ExpectNamedError(with("types",
                          [](auto& j) {
                            j["layer_types"] = nlohmann::json::array();
                            for (int l = 0, n = j["num_hidden_layers"]; l < n; l++)
                              j["layer_types"].push_back(l == 1 ? "full_attention" : "sliding_attention");
                          }),
                     {"key 'layer_types' holds"});
    if (!g3)  // the windowed layers' own base is Gemma 3's: a Gemma 2 with one is refused, never written without it
      ExpectNamedError(
          Shell(VerityBin() + " synth --like gemma2 --config '{\"rope_local_theta\":5000}' --out " + root + "/local"),
          {"rope_local_base_freq is Gemma 3's; a Gemma 2 has one RoPE base"});
    if (g3) {
      ExpectNamedError(with("no-local", [](auto& j) { j.erase("rope_local_base_freq"); }),
                       {"required key 'rope_local_base_freq' is missing"});
      ExpectNamedError(with("multimodal", [](auto& j) { j["model_type"] = "gemma3"; }),
                       {"model_type \"gemma3\" is Gemma 3 with its vision tower"});
      // Gemma 3 4B's global layers' scaling is read (the windowed ones' base is never scaled).
      auto linear = with("linear", [](auto& j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}}; });
      EXPECT_EQ(linear.exit_code, 0) << linear.err;
    } else {
      ExpectNamedError(with("no-cap", [](auto& j) { j.erase("attn_logit_softcapping"); }),
                       {"required key 'attn_logit_softcapping' is missing"});
      ExpectNamedError(with("scaled",
                            [](auto& j) {
                              j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
                            }),
                       {"rope_scaling is not part of Gemma 2"});
      // Gemma 2's alternation stated as layer_types (newer transformers) reads the same.
      auto types = with("types-stated", [](auto& j) {
        j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
      });
      EXPECT_EQ(types.exit_code, 0) << types.err;
      EXPECT_EQ(test::ReadFile(root + "/types-stated/logits.bin"), test::ReadFile(root + "/stated/logits.bin"));
    }
    ExpectNamedError(with("short-types",
                          [](auto& j) {
                            j["layer_types"] = {"sliding_attention", "full_attention"};
                          }),
                     {"key 'layer_types' holds 2 kinds for"});
    ExpectNamedError(with("rope-parameters",
                          [](auto& j) {
                            j["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}}};
                          }),
                     {"key 'rope_parameters' is"});
    // Absent BOS/EOS are Gemma's class defaults (2 and 1), not Llama's.
    const std::string ids_dir = root + "/no-ids";
    ASSERT_EQ(Shell("cp -r " + root + "/base " + ids_dir + " && rm " + ids_dir + "/generation_config.json").exit_code,
              0);
    nlohmann::json no_ids = base;
    no_ids.erase("bos_token_id"), no_ids.erase("eos_token_id");
    test::WriteFile(ids_dir + "/config.json", no_ids.dump(2));
    auto loaded = LoadModel(ids_dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ((*loaded)->config.bos_id, 2);
    EXPECT_EQ((*loaded)->config.eos_ids, std::vector<int>{1});
    // A llama never reads Gemma's keys: they are refused there by name.
    ExpectNamedError(with("as-llama", [](auto& j) { j["model_type"] = "llama", j.erase("sliding_window"); }),
                     {"key 'query_pre_attn_scalar' is 32; verity computes only absent"});
  }
}

TEST(Config, GenerationStopsAtTheModelsEos) {
  // stories260K greedy from BOS emits token 13 ('.'?) among its first ids;
  // declaring it an EOS ends generation right there.
  auto ids = Shell(VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " +
                   Model("tok512.bin") + " --temperature 0 --steps 40 --format ids");
  ASSERT_EQ(ids.exit_code, 0);
  auto list = ParseIntList(ids.out, "ids", 0);
  ASSERT_TRUE(list.ok() && list->size() > 5);
  const int stop = (*list)[4];
  const std::string dir = StoriesDir("stop", [](auto&) {});
  test::WriteFile(dir + "/generation_config.json",
                  "{\"bos_token_id\": 1, \"eos_token_id\": [" + std::to_string(stop) + "]}");
  auto cut = Shell(VerityBin() + " generate --model " + dir + " --tokenizer " + Model("tok512.bin") +
                   " --temperature 0 --steps 40 --format ids");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  auto got = ParseIntList(cut.out, "ids", 0);
  ASSERT_TRUE(got.ok());
  const size_t first = static_cast<size_t>(std::find(list->begin(), list->end(), stop) - list->begin());
  EXPECT_EQ(got->size(), first) << "generation must stop before the first EOS " << stop << ": " << cut.out;
}

TEST(Config, RopeTableFollowsTheScalingSpec) {
  ModelConfig c;
  c.head_dim = 32, c.rope_theta = 500000.0f;
  std::vector<float> base(16);
  kernels::RopeBaseInverseFrequencies(c.rope_theta, c.head_dim, base.data());
  EXPECT_EQ(RopeInverseFrequencies(c), base) << "unscaled: exactly run.c's float table";
  c.rope_scaling = {RopeScalingType::kLinear, 4.0, 0, 0, 0};
  auto lin = RopeInverseFrequencies(c);
  for (int i = 0; i < 16; i++) EXPECT_EQ(lin[i], static_cast<float>(double(base[i]) / 4.0));
  c.rope_scaling = {RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 64.0};
  auto l3 = RopeInverseFrequencies(c);
  int kept = 0, slowed = 0, between = 0;
  for (int i = 0; i < 16; i++) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < 16.0) {
      kept++;
      EXPECT_EQ(l3[i], base[i]) << i;
    } else if (wavelen > 64.0) {
      slowed++;
      EXPECT_EQ(l3[i], static_cast<float>(double(base[i]) / 8.0)) << i;
    } else {
      between++;
      EXPECT_TRUE(l3[i] < base[i] && l3[i] > base[i] / 8.0f) << i;
    }
  }
  std::printf("llama3 rope table: %d pairs kept, %d between, %d slowed 8x\n", kept, between, slowed);
  EXPECT_GT(kept, 0);
  EXPECT_GT(between, 0);
  EXPECT_GT(slowed, 0);
}

// Llama 3- and Llama 2-style directories against the independent reference,
// then the same models as GGUF (read by the reference's own GGUF reader).
TEST(Config, Llama3AndLlama2StyleModelsMatchTheIndependentReference) {
  const std::string dir = test::TempDir("styles");
  const std::string v = VerityBin();
  int matched = 0;
  const std::vector<std::pair<std::string, std::string>> styles = {
      {"llama3", "--like llama3"},
      {"llama2", "--like llama2"},
      {"linear", "--like llama2 --config '{\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":4.0}}'"}};
  for (const auto& [like, args] : styles) {
    const std::string hf = dir + "/" + like, gguf = dir + "/" + like + ".gguf";
    ASSERT_EQ(Shell(v + " synth " + args + " --out " + hf).exit_code, 0);
    auto cfg = nlohmann::json::parse(test::ReadFile(hf + "/config.json"));
    if (like == "llama3") {
      EXPECT_EQ(cfg["head_dim"], 32);
      EXPECT_NE(cfg["hidden_size"].get<int>() / cfg["num_attention_heads"].get<int>(), 32)
          << "head_dim != hidden/heads";
      EXPECT_EQ(cfg["rope_theta"], 500000.0);
      EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "llama3");
      EXPECT_EQ(cfg["tie_word_embeddings"], true);
      EXPECT_EQ(cfg["eos_token_id"], nlohmann::json::array({257, 258}));
    } else if (like == "llama2") {
      EXPECT_EQ(cfg["tie_word_embeddings"], false);
      EXPECT_TRUE(cfg["rope_scaling"].is_null());
    } else {
      EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "linear");
    }
    ASSERT_EQ(Shell(v + " convert --model " + hf + " --to gguf --out " + gguf).exit_code, 0);
    for (const std::string& model : {hf, gguf}) {
      const std::string ref = model + ".ref";
      auto gen = Shell(std::string(kPython) + " " + RefScript() + " " + model + " --greedy 96 --out " + ref);
      ASSERT_EQ(gen.exit_code, 0) << model << "\n" << gen.err;
      for (const char* backend : {"fast", "reference"}) {
        auto r = Shell(v + " parity --model " + model + " --against " + ref + " --json --backend " + backend);
        ASSERT_EQ(r.exit_code, 0) << model << "\n" << r.out << r.err;
        auto j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["tokens"], 96) << model;
        EXPECT_EQ(j["worst"]["top1"], 1.0) << model;
        EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6) << model;
        std::printf("%s (%s): worst mean KL %.3g, top-1 %g\n", model.c_str(), backend,
                    j["worst"]["mean_kl"].get<double>(), j["worst"]["top1"].get<double>());
        matched++;
      }
    }
  }
  std::printf("styles: %d model/backend pairs matched the reference (worst mean KL <= 1e-6, top-1 1)\n", matched);
  EXPECT_EQ(matched, 12);
  // The match could fail: dropping the llama3 scaling, or the head_dim, moves the logits.
  const std::string ids = "256 17 99 3 250 18 7 77 123 200 31 64 65 66 67 68 69 70 71 72";
  auto logits = [&](const std::string& model) {
    const std::string out = model + ".logits";
    auto r = Shell(v + " logits --model " + model + " --ids '" + ids + "' --out " + out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return test::ReadFile(out);
  };
  const std::string scaled = logits(dir + "/llama3");
  Shell("cp -r " + dir + "/llama3 " + dir + "/unscaled");
  auto cfg = nlohmann::json::parse(test::ReadFile(dir + "/unscaled/config.json"));
  cfg["rope_scaling"] = nullptr;
  test::WriteFile(dir + "/unscaled/config.json", cfg.dump());
  const std::string unscaled = logits(dir + "/unscaled");
  ASSERT_EQ(scaled.size(), unscaled.size());
  double worst = 0;
  for (size_t i = 0; i + 4 <= scaled.size(); i += 4) {
    float a, b;
    std::memcpy(&a, scaled.data() + i, 4);
    std::memcpy(&b, unscaled.data() + i, 4);
    worst = std::max(worst, std::fabs(double(a) - b));
  }
  std::printf("llama3 scaling moves the logits by up to %g over %zu positions\n", worst, scaled.size() / 4 / 320);
  EXPECT_GT(worst, 1e-3);
}

}  // namespace
}  // namespace verity
