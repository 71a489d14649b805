// GGUF: stories260K round trips through a GGUF file bit for bit; every dtype
// loads as documented; every malformed file is a named error; and an
// independent parser (@huggingface/gguf) reads our files exactly as we do.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "formats/safetensors.h"
#include "formats/gguf.h"
#include "tests/test_util.h"

namespace verity {
namespace {
namespace fs = std::filesystem;
using test::Model;
using test::Shell;
using test::VerityBin;

std::string Convert(const std::string& in, const std::string& out, const std::string& flags = "") {
  auto r = Shell(VerityBin() + " convert --to gguf --model " + in + " --out " + out + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

std::string Logits(const std::string& model, const std::string& flags = "") {
  const std::string out = test::TempDir("logits") + "/l.bin";
  auto r = Shell(VerityBin() + " logits --model " + model + " --ids '1 403 407 261 135 2 9 77 300' --out " + out + " " +
                 flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return test::ReadFile(out);
}

TEST(Gguf, Stories260KRoundTripsBitForBitAndGeneratesTheGoldenText) {
  const std::string g =
      Convert(Model("stories260K.bin"), test::TempDir("rt") + "/s.gguf", "--tokenizer " + Model("tok512.bin"));
  for (const char* backend : {"reference", "fast"}) {
    const std::string a = Logits(Model("stories260K.bin"), std::string("--backend ") + backend);
    const std::string b = Logits(g, std::string("--backend ") + backend);
    ASSERT_EQ(a.size(), 9u * 512 * 4);
    EXPECT_TRUE(a == b) << backend << ": GGUF f32 logits differ from the llama2.c file's";
  }
  auto gen = Shell(VerityBin() + " generate --model " + g + " --tokenizer " + Model("tok512.bin") +
                   " --steps 200 --temperature 0");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(gen.out, test::ReadFile(Model("stories260K.greedy200.txt")));
  // f32 tensors are used in place, from the mapping (no copy, no note).
  auto m = LoadModel(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE((*m)->notes.empty());
  const auto* base = (*m)->mappings.at(0)->data();
  const auto* wq = static_cast<const unsigned char*>((*m)->layers[0].wq.data);
  EXPECT_TRUE(wq > base && wq < base + (*m)->mappings[0]->size()) << "wq was copied, not mapped";
  EXPECT_EQ((*m)->config.rope_style, RopeStyle::kInterleaved);
  EXPECT_TRUE((*m)->config.shared_classifier);
}

TEST(Gguf, HuggingFaceInputIsPermutedBackToTheInterleavedLayout) {
  // llama2.c -> HF (q/k rows into halves) -> GGUF (rows back to pairs) must
  // give the very rows of llama2.c -> GGUF, hence the same logits, bit for bit.
  const std::string dir = test::TempDir("hf");
  ASSERT_EQ(Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir + "/hf").exit_code, 0);
  const std::string via_hf = Convert(dir + "/hf", dir + "/via-hf.gguf");
  const std::string direct = Convert(Model("stories260K.bin"), dir + "/direct.gguf");
  EXPECT_TRUE(Logits(via_hf) == Logits(direct));
  EXPECT_TRUE(Logits(direct) == Logits(Model("stories260K.bin")));
  // GGUF -> GGUF keeps every tensor byte.
  const std::string again = Convert(direct, dir + "/again.gguf");
  auto a = test::ReadFile(direct), b = test::ReadFile(again);
  auto pa = gguf::Parse(reinterpret_cast<const unsigned char*>(a.data()), a.size(), "a");
  auto pb = gguf::Parse(reinterpret_cast<const unsigned char*>(b.data()), b.size(), "b");
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(a.substr(pa->data_start), b.substr(pb->data_start));
}

// Decodes every matrix of a model into f32 rows (padding included).
std::vector<float> AllRows(const verity::Model& m) {
  std::vector<float> out, row;
  auto add = [&](const kernels::Weights& w) {
    row.resize(static_cast<size_t>(w.cols));
    for (int r = 0; r < w.rows; r++) {
      kernels::DecodeRow(w, r, row.data());
      out.insert(out.end(), row.begin(), row.end());
    }
  };
  for (const auto& l : m.layers)
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo}) add(*w);
  return out;
}

TEST(Gguf, Q8_0BlocksRepackExactlyAndEveryDtypeLoads) {
  const std::string dir = test::TempDir("dt");
  const std::string q8 = Convert(Model("stories260K.bin"), dir + "/q8.gguf", "--dtype q8_0");
  // GGUF Q8_0 (f16 scale, 34-byte blocks) -> verity q8_0 (f32 scale, 36 bytes)
  // is exact: the q8_0 model's weights decode to exactly the dequantized f32 ones.
  auto as_q8 = LoadModel(q8, kernels::DType::kQ8_0);
  auto as_f32 = LoadModel(q8, kernels::DType::kF32);
  ASSERT_TRUE(as_q8.ok() && as_f32.ok()) << as_q8.status().message() << as_f32.status().message();
  const auto rq = AllRows(**as_q8), rf = AllRows(**as_f32);
  ASSERT_EQ(rq.size(), rf.size());
  size_t diff = 0;
  for (size_t i = 0; i < rq.size(); i++) diff += rq[i] != rf[i];
  EXPECT_EQ(diff, 0u) << "of " << rq.size() << " attention weights";
  // ... and differ from the original f32 weights by at most half a step.
  auto orig = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(orig.ok());
  const auto ro = AllRows(**orig);
  double worst = 0;
  for (size_t i = 0; i < ro.size(); i++) worst = std::max(worst, std::fabs(static_cast<double>(ro[i]) - rf[i]));
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 0.02);
  // The FFN down matrix (172 columns, not whole blocks) was written F16, as
  // llama.cpp's quantizer falls back (quantize_test).
  auto info = Shell(VerityBin() + " gguf-info " + q8);
  EXPECT_NE(info.out.find("tensor blk.0.ffn_down.weight [172, 64] F16"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("tensor blk.0.attn_q.weight [64, 64] Q8_0"), std::string::npos) << info.out;
  // Every dtype keeps parity on every load dtype it is meant for.
  for (const std::string dt : {"f16", "bf16", "q8_0"}) {
    const std::string f =
        dt == "q8_0" ? q8 : Convert(Model("stories260K.bin"), dir + "/" + dt + ".gguf", "--dtype " + dt);
    for (const std::string load : {"f32", "bf16"}) {
      auto p = Shell(VerityBin() + " parity --model " + f + " --dtype " + load);
      EXPECT_EQ(p.exit_code, 0) << dt << " as " << load << ": " << p.out << p.err;
    }
    auto g = Shell(VerityBin() + " generate --model " + f + " --tokenizer " + Model("tok512.bin") +
                   " --steps 40 --temperature 0 --dtype " + (dt == "f16" ? std::string("f32") : dt));
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << dt << ": " << g.out;
  }
  // BF16 tensors are used in place for --dtype bf16.
  auto bf = LoadModel(dir + "/bf16.gguf", kernels::DType::kBF16);
  ASSERT_TRUE(bf.ok()) << bf.status().message();
  const auto* base = (*bf)->mappings.at(0)->data();
  const auto* wq = static_cast<const unsigned char*>((*bf)->layers[0].wq.data);
  EXPECT_TRUE(wq > base && wq < base + (*bf)->mappings[0]->size()) << "bf16 wq was copied, not mapped";
}

TEST(Gguf, MixtralStyleExpertsStackAndMatchTheHuggingFaceDirectory) {
  ModelConfig c;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 80, c.seq_len = 32;
  c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f, c.norm_eps = 1e-5f, c.rope_style = RopeStyle::kHalves, c.n_experts = 4,
  c.n_experts_per_tok = 2;
  auto m = SyntheticModel(c, 7);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string dir = test::TempDir("moe");
  ASSERT_TRUE(WriteHfCheckpoint(**m, dir + "/hf", 1, "f32").ok());
  ASSERT_TRUE(WriteGgufCheckpoint(**m, dir + "/m.gguf", "f32", "").ok());
  auto info = Shell(VerityBin() + " gguf-info " + dir + "/m.gguf");
  EXPECT_NE(info.out.find("tensor blk.1.ffn_gate_exps.weight [64, 96, 4] F32"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("tensor blk.1.ffn_down_exps.weight [96, 64, 4] F32"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("tensor blk.0.ffn_gate_inp.weight [64, 4] F32"), std::string::npos) << info.out;
  auto hf = LoadModel(dir + "/hf"), gg = LoadModel(dir + "/m.gguf");
  ASSERT_TRUE(hf.ok() && gg.ok()) << hf.status().message() << gg.status().message();
  EXPECT_EQ((*gg)->config.n_experts, 4);
  EXPECT_EQ((*gg)->config.rope_style, RopeStyle::kInterleaved);
  auto run = [](const verity::Model& model) {
    Transformer t(model, std::move(kernels::MakeBackend("reference").value()));
    return TeacherForcedLogits(t, {1, 5, 9, 33, 70, 2, 11, 12}).value();
  };
  const auto a = run(**hf), b = run(**gg);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  // Halves vs pairs: the same rotations, summed in another order.
  EXPECT_LT(worst, 1e-4) << "GGUF experts or the q/k permutation disagree with the HF directory";
}

// ---- malformed files, each made by mutating a small valid one ----

struct Small {
  std::string path, bytes;
  gguf::File file;
};

ModelConfig SmallConfig() {
  ModelConfig c;
  c.dim = 64, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 64, c.seq_len = 32;
  c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 10000.0f, c.norm_eps = 1e-5f;
  return c;
}

Small MakeSmall(const ModelConfig& c = SmallConfig()) {
  Small s;
  s.path = test::TempDir("small") + "/small.gguf";
  auto m = SyntheticModel(c, 3);
  EXPECT_TRUE(m.ok());
  EXPECT_TRUE(WriteGgufCheckpoint(**m, s.path, "f32", "").ok());
  s.bytes = test::ReadFile(s.path);
  auto f = gguf::Parse(reinterpret_cast<const unsigned char*>(s.bytes.data()), s.bytes.size(), s.path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  s.file = f.value();
  EXPECT_TRUE(LoadModel(s.path).ok());
  return s;
}

// Rewrites `s` with edited metadata and tensor specs (tensor bytes copied by name).
std::string Rewrite(const Small& s, const std::string& name,
                    const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&,
                                             std::vector<gguf::TensorSpec>&)>& edit) {
  auto kv = s.file.metadata;
  std::vector<gguf::TensorSpec> specs;
  for (const auto& t : s.file.tensors) specs.push_back({t.name, t.dims, t.type});
  edit(kv, specs);
  const std::string out = test::TempDir("bad") + "/" + name + ".gguf";
  Status st = gguf::Write(out, kv, specs, [&](size_t i, std::string* bytes) {
    const gguf::TensorInfo* t = s.file.FindTensor(specs[i].name);
    int64_t block = 1, block_bytes = 4;
    gguf::TypeTraits(specs[i].type, &block, &block_bytes);
    uint64_t n = 1;
    for (uint64_t d : specs[i].dims) n *= d;
    const size_t size = n / block * block_bytes;
    *bytes = s.bytes.substr(s.file.data_start + (t ? t->offset : 0), size);
    bytes->resize(size, '\0');
    return OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

std::string Patched(const Small& s, const std::string& name, const std::function<void(std::string&)>& patch) {
  std::string b = s.bytes;
  patch(b);
  const std::string out = test::TempDir("bad") + "/" + name + ".gguf";
  test::WriteFile(out, b);
  return out;
}

// Byte offset of a tensor info's `field` ("type" or "offset") in the header.
size_t InfoField(const Small& s, const std::string& tensor, const std::string& field) {
  const gguf::TensorInfo* t = s.file.FindTensor(tensor);
  std::string key;
  const uint64_t len = tensor.size();
  key.append(reinterpret_cast<const char*>(&len), 8);
  key += tensor;
  const size_t at = s.bytes.find(key);
  EXPECT_NE(at, std::string::npos);
  const size_t type_at = at + key.size() + 4 + 8 * t->dims.size();
  return field == "type" ? type_at : type_at + 4;
}

void ExpectRefused(const std::string& path, const std::vector<std::string>& needles, int* cases) {
  auto m = LoadModel(path);
  ASSERT_FALSE(m.ok()) << path << " loaded";
  for (const auto& n : needles) EXPECT_NE(m.status().message().find(n), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(path), std::string::npos)
      << "the error must name the file: " << m.status().message();
  // The command line exits 1 with the same message, never a crash.
  auto r = Shell(VerityBin() + " generate --model " + path + " --tokenizer " + Model("tok512.bin") + " --steps 4");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needles[0]), std::string::npos) << r.err;
  ++*cases;
}

// Sets tokenizer.ggml.model (a file written without a tokenizer already says "no_vocab").
void SetModel(std::vector<std::pair<std::string, gguf::Value>>* kv, const std::string& model) {
  std::erase_if(*kv, [](const auto& e) { return e.first == "tokenizer.ggml.model"; });
  kv->emplace_back("tokenizer.ggml.model", gguf::Value::String(model));
}

TEST(Gguf, EveryMalformedFileIsANamedError) {
  const Small s = MakeSmall();
  int cases = 0;
  ExpectRefused(Patched(s, "trunc-header", [](std::string& b) { b.resize(10); }), {"truncated", "tensor_count"},
                &cases);
  ExpectRefused(Patched(s, "tiny", [](std::string& b) { b.resize(3); }), {"truncated header"}, &cases);
  ExpectRefused(Patched(s, "magic", [](std::string& b) { b[3] = 'X'; }), {"bad magic \"GGUX\""}, &cases);
  ExpectRefused(Patched(s, "v1", [](std::string& b) { b[4] = 1; }), {"GGUF version 1 is not supported"}, &cases);
  ExpectRefused(Patched(s, "v9", [](std::string& b) { b[4] = 9; }), {"GGUF version 9 is not supported"}, &cases);
  const std::string last = s.file.tensors.back().name;
  ExpectRefused(Patched(s, "past-end", [](std::string& b) { b.resize(b.size() - 40); }),
                {"tensor " + last + ": data", "runs past the end of the file"}, &cases);
  ExpectRefused(
      Patched(s, "misaligned", [&](std::string& b) { b[InfoField(s, "blk.0.attn_k.weight", "offset")] += 4; }),
      {"tensor blk.0.attn_k.weight: data offset", "is not a multiple of the alignment 32"}, &cases);
  ExpectRefused(
      Patched(s, "unknown-type", [&](std::string& b) { b[InfoField(s, "blk.1.attn_v.weight", "type")] = 99; }),
      {"tensor blk.1.attn_v.weight: unknown tensor type 99"}, &cases);
  ExpectRefused(Patched(s, "huge-kv", [](std::string& b) { b[16 + 7] = 0x10; }), {"metadata_kv_count"}, &cases);
  ExpectRefused(Rewrite(s, "dup-tensor", [](auto&, auto& t) { t.push_back(t[3]); }),
                {"duplicate tensor " + s.file.tensors[3].name}, &cases);
  ExpectRefused(Rewrite(s, "dup-key", [](auto& kv, auto&) { kv.push_back(kv[5]); }),
                {"duplicate key " + s.file.metadata[5].first}, &cases);
  ExpectRefused(Rewrite(s, "q4k",
                        [](auto&, auto& t) {
                          for (auto& x : t)
                            if (x.name == "blk.0.attn_q.weight") x.dims = {256, 16}, x.type = 12;
                        }),
                {"tensor blk.0.attn_q.weight has dims [256, 16]"}, &cases);
  // A block-quantized matrix loads (quant_engine_test); a norm in one is refused (llama.cpp keeps norms F32).
  ExpectRefused(Rewrite(s, "q4_0-norm",
                        [](auto&, auto& t) {
                          for (auto& x : t)
                            if (x.name == "blk.0.attn_norm.weight") x.type = 2;
                        }),
                {"tensor blk.0.attn_norm.weight is Q4_0; verity reads this vector only in F32, F16 or BF16"}, &cases);
  auto drop = [](const std::string& key) {
    return [key](std::vector<std::pair<std::string, gguf::Value>>& kv, std::vector<gguf::TensorSpec>&) {
      std::erase_if(kv, [&](const auto& e) { return e.first == key; });
    };
  };
  ExpectRefused(Rewrite(s, "no-blocks", drop("llama.block_count")), {"required key llama.block_count is missing"},
                &cases);
  ExpectRefused(Rewrite(s, "no-eps", drop("llama.attention.layer_norm_rms_epsilon")),
                {"required key llama.attention.layer_norm_rms_epsilon is missing"}, &cases);
  ExpectRefused(Rewrite(s, "no-arch", drop("general.architecture")), {"required key general.architecture is missing"},
                &cases);
  ExpectRefused(Rewrite(s, "gpt2",
                        [](auto& kv, auto&) {
                          for (auto& e : kv)
                            if (e.first == "general.architecture") e.second = gguf::Value::String("gpt2");
                        }),
                {"general.architecture is \"gpt2\"; verity loads only \"llama\""}, &cases);
  ExpectRefused(Rewrite(s, "rope-dims",
                        [](auto& kv, auto&) {
                          for (auto& e : kv)
                            if (e.first == "llama.rope.dimension_count") e.second = gguf::Value::Uint32(8);
                        }),
                {"key llama.rope.dimension_count is 8, but verity needs the head size 16"}, &cases);
  ExpectRefused(
      Rewrite(s, "yarn",
              [](auto& kv, auto&) { kv.emplace_back("llama.rope.scaling.type", gguf::Value::String("yarn")); }),
      {"key llama.rope.scaling.type is \"yarn\""}, &cases);
  ExpectRefused(
      Rewrite(s, "no-attn-k",
              [](auto&, auto& t) { std::erase_if(t, [](const auto& x) { return x.name == "blk.1.attn_k.weight"; }); }),
      {"required tensor blk.1.attn_k.weight (attention) is missing"}, &cases);
  ExpectRefused(Rewrite(s, "extra",
                        [](auto&, auto& t) {
                          t.push_back({"blk.0.attn_q.bias", {64}, gguf::kF32});
                        }),
                {"unexpected tensor blk.0.attn_q.bias"}, &cases);
  ExpectRefused(Rewrite(s, "rope-freqs-size",
                        [](auto&, auto& t) {
                          t.push_back({"rope_freqs.weight", {5}, gguf::kF32});
                        }),
                {"tensor rope_freqs.weight is F32 [5]; verity needs F32 [8] (head_dim / 2)"}, &cases);
  ExpectRefused(Rewrite(s, "rope-freqs-zero",
                        [](auto&, auto& t) {
                          t.push_back({"rope_freqs.weight", {8}, gguf::kF32});
                        }),
                {"rope_freqs.weight: a RoPE frequency factor is not positive"}, &cases);
  ExpectRefused(Rewrite(s, "align3",
                        [](auto& kv, auto&) {
                          for (auto& e : kv)
                            if (e.first == "general.alignment") e.second = gguf::Value::Uint64(32);
                        }),
                {"key general.alignment must be UINT32"}, &cases);
  ExpectRefused(Rewrite(s, "bad-vocab",
                        [](auto& kv, auto&) {
                          SetModel(&kv, "llama");
                          kv.emplace_back("tokenizer.ggml.tokens",
                                          gguf::Value::Array(gguf::ValueType::kString, {gguf::Value::String("a")}));
                        }),
                {"tokenizer.ggml.tokens has 1 tokens but llama.vocab_size is 64"}, &cases);
  ExpectRefused(Rewrite(s, "bos",
                        [](auto& kv, auto&) {
                          std::vector<gguf::Value> toks(64, gguf::Value::String("t"));
                          SetModel(&kv, "llama");
                          kv.emplace_back("tokenizer.ggml.tokens", gguf::Value::Array(gguf::ValueType::kString, toks));
                          kv.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::Uint32(64));
                        }),
                {"key tokenizer.ggml.bos_token_id is 64, outside [0, 63]"}, &cases);
  ExpectRefused(Rewrite(s, "layers",
                        [](auto& kv, auto&) {
                          for (auto& e : kv)
                            if (e.first == "llama.block_count") e.second = gguf::Value::Uint32(1u << 30);
                        }),
                {"llama.block_count is 1073741824 but the file holds only 21 tensors"}, &cases);
  ExpectRefused(Rewrite(s, "experts",
                        [](auto& kv, auto&) {
                          kv.emplace_back("llama.expert_count", gguf::Value::Uint32(1u << 30));
                          kv.emplace_back("llama.expert_used_count", gguf::Value::Uint32(2));
                        }),
                {"required tensor blk.0.ffn_gate_exps.weight (expert) is missing"}, &cases);
  std::printf("gguf malformed: %d cases refused with named errors\n", cases);
  EXPECT_EQ(cases, 28);
}

// A small Gemma: gemma2's soft-caps and alternate windows, or gemma3's q/k
// norms, one global layer in 2 and a local RoPE base; NEOX halves.
ModelConfig SmallGemma(bool gemma3) {
  ModelConfig c = SmallConfig();
  c.gemma = true, c.qk_norm = gemma3, c.shared_classifier = true, c.rope_style = RopeStyle::kHalves;
  c.query_pre_attn_scalar = static_cast<float>(c.head_dim);
  c.attn_softcap = gemma3 ? 0.0f : 50.0f, c.final_softcap = gemma3 ? 0.0f : 30.0f;
  c.sliding_window = 8, c.window_pattern = 2, c.rope_local_theta = gemma3 ? 10000.0f : 0.0f;
  return c;
}

using KeyValues = std::vector<std::pair<std::string, gguf::Value>>;
void SetKey(KeyValues& kv, const std::string& key, gguf::Value v) {
  std::erase_if(kv, [&](const auto& e) { return e.first == key; });
  kv.emplace_back(key, std::move(v));
}
void DropKey(KeyValues& kv, const std::string& key) {
  std::erase_if(kv, [&](const auto& e) { return e.first == key; });
}

// gemma2 and gemma3 files: each key llama.cpp defaults is read with its
// default where absent (said in a note), a layer pattern of flags read when
// periodic, and what llama.cpp's graphs cannot run, or run otherwise than
// verity would, refused by name; verity writes no file llama.cpp would read
// otherwise.
TEST(Gguf, GemmaKeysTakeLlamaCppsDefaultsOrAreRefusedByName) {
  const Small g2 = MakeSmall(SmallGemma(false)), g3 = MakeSmall(SmallGemma(true));
  auto loaded = [](const std::string& path) {
    auto m = LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? (*m)->config : ModelConfig{};
  };
  const std::string g2_defaults = Rewrite(g2, "g2-defaults", [](auto& kv, auto&) {
    for (const char* k : {"gemma2.attention.sliding_window", "gemma2.attn_logit_softcapping",
                          "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window_pattern"})
      DropKey(kv, k);
  });
  const ModelConfig defaults = loaded(g2_defaults);
  EXPECT_EQ(defaults.sliding_window, 4096);
  EXPECT_EQ(defaults.window_pattern, 2);
  EXPECT_EQ(defaults.attn_softcap, 50.0f);
  EXPECT_EQ(defaults.final_softcap, 30.0f);
  EXPECT_EQ(defaults.query_pre_attn_scalar, 16.0f) << "head_dim, as llama.cpp infers it";
  {  // each default said in a note
    auto m = LoadModel(g2_defaults);
    ASSERT_TRUE(m.ok());
    std::string notes;
    for (const std::string& n : (*m)->notes) notes += n + "\n";
    for (const char* said : {"gemma2.attention.sliding_window absent: 4096", "gemma2.attn_logit_softcapping absent: 50",
                             "gemma2.final_logit_softcapping absent: 30",
                             "gemma2.attention.sliding_window_pattern absent: one global layer in 2",
                             "query_pre_attn_scalar 16, as llama.cpp takes it"})
      EXPECT_NE(notes.find(said), std::string::npos) << said << " in\n" << notes;
  }
  EXPECT_EQ(loaded(Rewrite(g3, "g3-defaults", [](auto& kv, auto&) { DropKey(kv, "gemma3.rope.freq_base_swa"); }))
                .rope_local_theta,
            10000.0f);
  auto flags = [](std::vector<bool> windowed) {
    std::vector<gguf::Value> v;
    for (bool b : windowed) v.push_back(gguf::Value::Bool(b));
    return gguf::Value::Array(gguf::ValueType::kBool, std::move(v));
  };
  EXPECT_EQ(loaded(Rewrite(g2, "g2-flags",
                           [&](auto& kv, auto&) {
                             SetKey(kv, "gemma2.attention.sliding_window_pattern", flags({true, false}));
                           }))
                .window_pattern,
            2);
  int cases = 0;
  ExpectRefused(Rewrite(g2, "g2-odd-flags",
                        [&](auto& kv, auto&) {
                          SetKey(kv, "gemma2.attention.sliding_window_pattern", flags({false, true}));
                        }),
                {"gemma2.attention.sliding_window_pattern is not a global layer every Nth"}, &cases);
  ExpectRefused(Rewrite(g3, "g3-no-window", [](auto& kv, auto&) { DropKey(kv, "gemma3.attention.sliding_window"); }),
                {"gemma3.attention.sliding_window is absent; verity runs gemma3 files with their sliding window"},
                &cases);
  ExpectRefused(
      Rewrite(g3, "g3-attn-cap",
              [](auto& kv, auto&) { SetKey(kv, "gemma3.attn_logit_softcapping", gguf::Value::Float32(50.0f)); }),
      {"gemma3.attn_logit_softcapping: llama.cpp applies no attention soft-cap to gemma3"}, &cases);
  ExpectRefused(
      Rewrite(g2, "g2-cap-0",
              [](auto& kv, auto&) { SetKey(kv, "gemma2.final_logit_softcapping", gguf::Value::Float32(0.0f)); }),
      {"gemma2 soft-caps of 0"}, &cases);
  ExpectRefused(Rewrite(g2, "g2-swa-base",
                        [](auto& kv, auto&) { SetKey(kv, "gemma2.rope.freq_base_swa", gguf::Value::Float32(500.0f)); }),
                {"gemma2.rope.freq_base_swa differs from gemma2.rope.freq_base"}, &cases);
  ExpectRefused(Rewrite(g2, "llama-cap",
                        [](auto& kv, auto&) {
                          SetKey(kv, "general.architecture", gguf::Value::String("llama"));
                          for (auto& [k, v] : kv)
                            if (k.rfind("gemma2.", 0) == 0) k = "llama." + k.substr(7);
                        }),
                {"llama.attn_logit_softcapping changes the math and verity does not compute it"}, &cases);
  ExpectRefused(Rewrite(g2, "g2-short-flags",
                        [&](auto& kv, auto&) { SetKey(kv, "gemma2.attention.sliding_window_pattern", flags({})); }),
                {"gemma2.attention.sliding_window_pattern holds 0 flags for 2 layers"}, &cases);
  ExpectRefused(Rewrite(g2, "g2-output",
                        [](auto&, auto& t) {
                          for (const auto& x : std::vector<gguf::TensorSpec>(t))
                            if (x.name == "token_embd.weight") t.push_back({"output.weight", x.dims, x.type});
                        }),
                {"tensor output.weight: llama.cpp's gemma2 classifies with token_embd.weight"}, &cases);
  EXPECT_EQ(cases, 8);
  // What verity would write and llama.cpp would run otherwise is refused at writing.
  for (const auto& [edit, needle] : std::vector<std::pair<std::function<void(ModelConfig&)>, std::string>>{
           {[](ModelConfig& c) { c.shared_classifier = false; }, "an untied gemma2"},
           {[](ModelConfig& c) { c.attn_softcap = 0; }, "a gemma2 without both soft-caps"},
           {[](ModelConfig& c) { c.query_pre_attn_scalar = 24; }, "query_pre_attn_scalar 24"},
           {[](ModelConfig& c) { c.qk_norm = true, c.rope_local_theta = 1e4f; },
            "a gemma3 with an attention soft-cap"}}) {
    ModelConfig c = SmallGemma(false);
    edit(c);
    auto m = SyntheticModel(c, 3);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Status st = WriteGgufCheckpoint(**m, test::TempDir("gw") + "/x.gguf", "f32", "");
    EXPECT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  }
}

TEST(Gguf, VocabularyIsReadAsData) {
  const std::string g =
      Convert(Model("stories260K.bin"), test::TempDir("voc") + "/s.gguf", "--tokenizer " + Model("tok512.bin"));
  const std::string b = test::ReadFile(g);
  auto f = gguf::Parse(reinterpret_cast<const unsigned char*>(b.data()), b.size(), g);
  ASSERT_TRUE(f.ok());
  auto v = gguf::ReadVocab(*f, g);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_TRUE(v->has_value());
  const gguf::Vocab& voc = **v;
  EXPECT_EQ(voc.model, "llama");
  ASSERT_EQ(voc.tokens.size(), 512u);
  EXPECT_EQ(voc.tokens[1], "<s>");
  EXPECT_EQ(voc.tokens[2], "</s>");
  EXPECT_EQ(voc.tokens[259], "\xe2\x96\x81t");  // llama2.c's " t", SentencePiece's "▁t"
  EXPECT_EQ(voc.token_types[0], 2);
  EXPECT_EQ(voc.token_types[1], 3);
  EXPECT_EQ(voc.token_types[3], 6);
  EXPECT_EQ(voc.token_types[259], 1);
  EXPECT_EQ(voc.scores[260], -1.0f);
  EXPECT_EQ(voc.bos, 1);
  EXPECT_EQ(voc.eos, 2);
  EXPECT_EQ(voc.unk, 0);
}

// Without --tokenizer the file says "no vocabulary" as llama.cpp's converter
// does (llama.cpp refuses a file without tokenizer.ggml.model; its loading is
// tests/llama_peer_test.cc), and verity reads it back as such and loads it.
TEST(Gguf, AFileWithoutTokenizerSaysNoVocab) {
  const std::string g = Convert(Model("stories260K.bin"), test::TempDir("novoc") + "/s.gguf");
  const std::string b = test::ReadFile(g);
  auto f = gguf::Parse(reinterpret_cast<const unsigned char*>(b.data()), b.size(), g);
  ASSERT_TRUE(f.ok());
  auto v = gguf::ReadVocab(*f, g);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_TRUE(v->has_value());
  EXPECT_EQ((*v)->model, "no_vocab");
  EXPECT_TRUE((*v)->tokens.empty());
  EXPECT_EQ(f->Find("tokenizer.ggml.tokens"), nullptr);
  auto m = LoadModel(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config.vocab_size, 512);
  EXPECT_EQ((*m)->config.bos_id, 1);  // the model's own BOS, still written
}

// ---- the independent parser ----

std::string NodeModules() { return test::SourceDir() + "/tests/npm/node_modules/@huggingface/gguf"; }

// Compares verity's view of `file` with @huggingface/gguf's view of `other`
// (the same file, except to prove the comparison can fail); returns the
// number of differences, each also reported as a failure when `report`.
int CrossCheck(const std::string& file, int* keys, int* tensors, const std::string& other = "", bool report = true) {
  auto ours = Shell(VerityBin() + " gguf-info --json " + file);
  auto theirs =
      Shell("node " + test::SourceDir() + "/tests/conformance/gguf_check.mjs " + (other.empty() ? file : other));
  EXPECT_EQ(ours.exit_code, 0) << ours.err;
  EXPECT_EQ(theirs.exit_code, 0) << theirs.err;
  if (ours.exit_code != 0 || theirs.exit_code != 0) return 1;
  const auto a = nlohmann::json::parse(ours.out), b = nlohmann::json::parse(theirs.out);
  int diffs = 0;
  auto expect_eq = [&](const nlohmann::json& x, const nlohmann::json& y, const std::string& what) {
    if (x != y) {
      ++diffs;
      if (report)
        ADD_FAILURE() << file << ": " << what << ": verity " << x.dump().substr(0, 200) << " vs @huggingface/gguf "
                      << y.dump().substr(0, 200);
    }
  };
  for (const char* k : {"version", "alignment", "data_start"}) expect_eq(a[k], b[k], k);
  expect_eq(a["metadata"].size(), b["kv_count"], "kv_count");
  expect_eq(a["tensors"].size(), b["tensor_count"], "tensor_count");
  expect_eq(a["metadata"].size(), b["metadata"].size(), "number of keys");
  for (const auto& [key, v] : a["metadata"].items()) {
    if (!b["metadata"].contains(key)) {
      expect_eq(key, nullptr, "key present");
      continue;
    }
    const auto& w = b["metadata"][key];
    expect_eq(v["type"], w["type"], key + " type");
    expect_eq(v.value("subType", -1), w.value("subType", -1), key + " array type");
    expect_eq(v["value"], w["value"], key + " value");
  }
  expect_eq(a["tensors"].size(), b["tensors"].size(), "number of tensors");
  for (size_t i = 0; i < std::min(a["tensors"].size(), b["tensors"].size()); i++) {
    const auto &t = a["tensors"][i], u = b["tensors"][i];
    const std::string at = "tensor " + std::to_string(i) + " (" + t["name"].get<std::string>() + ")";
    for (const char* f : {"name", "shape", "type", "offset"}) expect_eq(t[f], u[f], at + " " + f);
  }
  *keys += static_cast<int>(a["metadata"].size());
  *tensors += static_cast<int>(a["tensors"].size());
  return diffs;
}

TEST(Gguf, IndependentParserReadsOurFilesIdentically) {
  ASSERT_TRUE(fs::exists(NodeModules())) << NodeModules()
                                         << " is missing: run scripts/setup.sh (npm ci --prefix tests/npm)";
  const std::string dir = test::TempDir("xc");
  std::vector<std::string> files = {
      Convert(Model("stories260K.bin"), dir + "/f32.gguf", "--tokenizer " + Model("tok512.bin")),
      Convert(Model("stories260K.bin"), dir + "/q8.gguf", "--dtype q8_0 --tokenizer " + Model("tok512.bin")),
      Convert(Model("stories260K.bin"), dir + "/bf16.gguf", "--dtype bf16"),
      Convert(Model("stories260K.bin"), dir + "/f16.gguf", "--dtype f16")};
  ModelConfig c;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.vocab_size = 40, c.seq_len = 16;
  c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
  c.rope_theta = 500000.0f, c.norm_eps = 1e-6f, c.n_experts = 3, c.n_experts_per_tok = 2;
  auto moe = SyntheticModel(c, 9);
  ASSERT_TRUE(moe.ok());
  ASSERT_TRUE(WriteGgufCheckpoint(**moe, dir + "/moe.gguf", "q8_0", "").ok());
  files.push_back(dir + "/moe.gguf");
  int keys = 0, tensors = 0, diffs = 0;
  for (const auto& f : files) diffs += CrossCheck(f, &keys, &tensors);
  std::printf("gguf cross-check: %d keys, %d tensors, %d differences\n", keys, tensors, diffs);
  EXPECT_EQ(diffs, 0);
  EXPECT_GE(keys, 80);
  EXPECT_GE(tensors, 4 * 47);
  // The comparison can fail: bf16 vs f16 differ in general.file_type and every matrix's type.
  int k2 = 0, t2 = 0;
  EXPECT_EQ(CrossCheck(files[2], &k2, &t2, files[3], /*report=*/false), 1 + 36);
}

}  // namespace
}  // namespace verity
