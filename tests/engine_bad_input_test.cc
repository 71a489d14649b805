// Every bad input gets a clear error naming the file and field, and a non-zero
// exit: never a crash, never garbage output.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>

#include "engine/engine.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

// Asserts the command failed cleanly (exit 1, nothing on stdout) naming `needle`.
void ExpectFails(const std::string& cmd, const std::string& needle) {
  auto r = Shell(cmd);
  EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << "stdout must stay empty on error: " << r.out;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr lacks '" << needle << "': " << r.err;
}

std::string Gen(const std::string& model, const std::string& tok, const std::string& extra = "") {
  return VerityBin() + " generate --model " + model + " --tokenizer " + tok + " --temperature 0 " + extra;
}

std::string Stories() { return test::ReadFile(Model("stories260K.bin")); }

std::string WithHeaderField(std::string bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
  return bytes;
}

TEST(BadInput, MissingAndUnreadableFiles) {
  ExpectFails(Gen("/nonexistent/m.bin", Model("tok512.bin")), "/nonexistent/m.bin: model file does not exist");
  ExpectFails(Gen(Model("stories260K.bin"), "/nonexistent/t.bin"), "/nonexistent/t.bin: tokenizer file does not exist");
  const std::string dir = test::TempDir("dir");
  ExpectFails(Gen(dir, Model("tok512.bin")), dir + "/config.json: missing");
}

TEST(BadInput, TruncatedAndOverlongCheckpoint) {
  const std::string dir = test::TempDir("trunc");
  std::string bytes = Stories();
  test::WriteFile(dir + "/short.bin", bytes.substr(0, bytes.size() - 4));
  ExpectFails(Gen(dir + "/short.bin", Model("tok512.bin")), "(truncated)");
  test::WriteFile(dir + "/long.bin", bytes + "junk");
  ExpectFails(Gen(dir + "/long.bin", Model("tok512.bin")), "(trailing bytes)");
  test::WriteFile(dir + "/header.bin", bytes.substr(0, 10));
  ExpectFails(Gen(dir + "/header.bin", Model("tok512.bin")), "truncated header");
}

TEST(BadInput, InconsistentHeader) {
  const std::string dir = test::TempDir("hdr");
  const std::string bytes = Stories();
  test::WriteFile(dir + "/heads.bin", WithHeaderField(bytes, 3, 7));  // 64 % 7 != 0
  ExpectFails(Gen(dir + "/heads.bin", Model("tok512.bin")), "dim (64) is not divisible by n_heads (7)");
  test::WriteFile(dir + "/kv.bin", WithHeaderField(bytes, 4, 3));  // 8 % 3 != 0
  ExpectFails(Gen(dir + "/kv.bin", Model("tok512.bin")), "n_heads (8) is not divisible by n_kv_heads (3)");
  test::WriteFile(dir + "/zero.bin", WithHeaderField(bytes, 2, 0));
  ExpectFails(Gen(dir + "/zero.bin", Model("tok512.bin")), "n_layers must be positive, got 0");
  test::WriteFile(dir + "/neg.bin", WithHeaderField(bytes, 0, -64));
  ExpectFails(Gen(dir + "/neg.bin", Model("tok512.bin")), "dim must be positive, got -64");
  // A negative vocab declares an unshared classifier the file does not hold.
  test::WriteFile(dir + "/unshared.bin", WithHeaderField(bytes, 5, -512));
  ExpectFails(Gen(dir + "/unshared.bin", Model("tok512.bin")), "vocab_size=-512");
}

// Header fields whose tensor sizes overflow int64. The first is the input the
// llama2c fuzz target found (UBSan: signed overflow); the second wraps to
// exactly its own 4,124 bytes, which the loader once accepted and then read
// far past the mapping (SIGBUS).
TEST(BadInput, HeaderSizesThatOverflowAreNamed) {
  const std::string dir = test::TempDir("overflow");
  auto header = [](std::initializer_list<int32_t> fields, size_t body) {
    std::string b(28 + body, '\0');
    std::memcpy(b.data(), std::data(fields), 28);
    return b;
  };
  test::WriteFile(dir + "/found.bin", header({1073741856, 32, 8388609, 2, 1, 16, 4104}, 52));
  ExpectFails(Gen(dir + "/found.bin", Model("tok512.bin")),
              "file is 80 bytes but the header (dim=1073741856 hidden_dim=32 n_layers=8388609 n_heads=2 n_kv_heads=1 "
              "vocab_size=16 seq_len=4104) implies more than 2^63 (truncated)");
  // dim 2^30, 17 layers: each layer matrix is 17 * 2^60 floats, 2^60 after wrapping, and the rest adds up.
  test::WriteFile(dir + "/wraps.bin", header({1 << 30, 1 << 30, 17, 1 << 20, 1 << 20, (1 << 30) - 35, 1}, 4096));
  ExpectFails(Gen(dir + "/wraps.bin", Model("tok512.bin")), "file is 4124 bytes but the header (dim=1073741824");
  ExpectFails(Gen(dir + "/wraps.bin", Model("tok512.bin")), "implies more than 2^63 (truncated)");
}

TEST(BadInput, TokenizerVocabularyDiffersFromModel) {
  const std::string dir = test::TempDir("tok");
  std::string tok = test::ReadFile(Model("tok512.bin"));
  // Append one more entry: score 0, length 1, "x".
  std::string extra(9, '\0');
  int32_t len = 1;
  std::memcpy(extra.data() + 4, &len, 4);
  extra[8] = 'x';
  test::WriteFile(dir + "/513.bin", tok + extra);
  ExpectFails(Gen(Model("stories260K.bin"), dir + "/513.bin"),
              "tokenizer vocabulary size 513 differs from the model's vocab_size 512");
  test::WriteFile(dir + "/cut.bin", tok.substr(0, tok.size() - 2));
  ExpectFails(Gen(Model("stories260K.bin"), dir + "/cut.bin"), "truncated tokenizer entry 511");
}

// Found by the tokenizer_bin fuzz target: with fewer than 259 entries, byte
// fallback emitted ids past the vocabulary and Encode read past its end.
TEST(BadInput, SmallTokenizerVocabularyStaysInRange) {
  auto file = [](std::initializer_list<std::string> pieces) {
    std::string b(4, '\0');
    b[0] = 8;  // max_token_length
    for (const std::string& p : pieces) {
      const float score = 0;
      const int32_t len = static_cast<int32_t>(p.size());
      b.append(reinterpret_cast<const char*>(&score), 4).append(reinterpret_cast<const char*>(&len), 4).append(p);
    }
    return b;
  };
  auto t = Tokenizer::Parse(file({"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "c", "ab"}), "tok8.bin");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // "x" and the two bytes of "\xC3\xA9" are not pieces, and ids 3 + byte would be past the 8 entries: <unk>.
  EXPECT_EQ(t->Encode("abx\xC3\xA9"
                      "c",
                      true, true),
            (std::vector<int>{1, 3, 7, 0, 0, 0, 6, 2}));
  auto two = Tokenizer::Parse(file({"<unk>", "<s>"}), "tok2.bin");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().message(),
            "tok2.bin: tokenizer holds 2 entries; the llama2.c format needs at least 3 (<unk>, <s>, </s>)");
}

TEST(BadInput, PromptAndStepsBeyondContext) {
  std::string long_prompt;
  for (int i = 0; i < 200; i++) long_prompt += "Once upon a time ";
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--steps 512 --prompt '" + long_prompt + "'"),
              "do not fit the context seq_len=512");
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--steps 513"),
              "--steps 513 is outside [1, seq_len=512]");
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--steps 0"), "--steps 0 is outside");
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--steps 3 --prompt 'Once upon a time'"),
              "exceed --steps 3");
}

TEST(BadInput, MalformedAndOutOfRangeIds) {
  const std::string out = test::TempDir("ids") + "/l.f32";
  auto logits = [&](const std::string& ids) {
    return VerityBin() + " logits --model " + Model("stories260K.bin") + " --ids '" + ids + "' --out " + out;
  };
  ExpectFails(logits("1 4x3 407"), "--ids: '4x3' is not an integer");
  ExpectFails(logits("1 99999999999"), "'99999999999' is not an integer");
  ExpectFails(logits("1 512"), "id 512 at index 1 is outside the vocabulary [0, 512)");
  ExpectFails(logits("1 -3"), "id -3 at index 1 is outside the vocabulary");
  ExpectFails(logits("  "), "--ids: no values given");
  std::string many;
  for (int i = 0; i < 513; i++) many += "1 ";
  ExpectFails(logits(many), "513 ids exceed the context seq_len=512");
}

TEST(BadInput, UnknownBackendAndSynthConfig) {
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--backend turbo"), "unknown backend 'turbo'");
  const std::string out = test::TempDir("syn") + "/x.bin";
  ExpectFails(VerityBin() + " synth --out " + out + " --config '{\"dim\":64}'", "required key 'hidden_dim'");
  ExpectFails(VerityBin() + " synth --out " + out +
                  " --config '{\"dim\":64,\"hidden_dim\":8,\"n_layers\":1,\"n_heads\":5,\"n_kv_heads\":1,"
                  "\"vocab_size\":9,\"seq_len\":4,\"shared_classifier\":true}'",
              "dim (64) is not divisible by n_heads (5)");
}

TEST(BadInput, UnknownDtypeIsNamed) {
  const std::string want = "--dtype: dtype 'fp16' is not one of f32, bf16, q8_0";
  ExpectFails(Gen(Model("stories260K.bin"), Model("tok512.bin"), "--dtype fp16"), want);
  ExpectFails(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ids 1 --out " + test::TempDir("dt") +
                  "/l.f32 --dtype fp16",
              want);
  ExpectFails(VerityBin() + " parity --model " + Model("stories260K.bin") + " --dtype fp16", want);
}

TEST(BadInput, Q8NeedsColumnsInWholeBlocksAndNamesTheTensor) {
  // dim 48: every matrix reading the residual has 48 columns, not a multiple of 32.
  const std::string cfg =
      "'{\"dim\":48,\"hidden_dim\":64,\"n_layers\":2,\"n_heads\":4,\"n_kv_heads\":2,"
      "\"vocab_size\":512,\"seq_len\":32,\"shared_classifier\":true}'";
  const std::string dir = test::TempDir("q8");
  ASSERT_EQ(Shell(VerityBin() + " synth --out " + dir + "/m.bin --config " + cfg).exit_code, 0);
  ASSERT_EQ(Shell(VerityBin() + " synth --out " + dir + "/hf --config " + cfg).exit_code, 0);
  ExpectFails(Gen(dir + "/m.bin", Model("tok512.bin"), "--dtype q8_0"),
              dir +
                  "/m.bin: dtype q8_0 needs every matrix's columns to be a multiple of 32, but tensor "
                  "wq[layer 0] has 48 (use f32 or bf16)");
  ExpectFails(Gen(dir + "/hf", Model("tok512.bin"), "--dtype q8_0"),
              "tensor model.layers.0.self_attn.q_proj.weight has 48");
  // The same models run in the other dtypes.
  for (const char* d : {"f32", "bf16"}) {
    auto r = Shell(Gen(dir + "/m.bin", Model("tok512.bin"), std::string("--steps 8 --dtype ") + d));
    EXPECT_EQ(r.exit_code, 0) << d << ": " << r.err;
  }
}

}  // namespace
}  // namespace verity
