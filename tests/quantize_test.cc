// Writing llama.cpp's block types (formats/quantize.h): blocks that read back
// within the type's step, bad input refused by name, and whole files checked
// against llama.cpp's own quantizer on the same F32 file: the same type for
// every tensor, and an error against the f32 weights no worse than its
// (docs/gguf.md, "Writing block files").
#include "formats/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include <cstring>

#include "base/half.h"
#include "formats/gguf.h"
#include "formats/quants.h"
#include "tests/peer_test_util.h"
#include "tests/test_util.h"

namespace verity {
namespace {

// Gaussian weights with a few outliers, as trained matrices have.
std::vector<float> Weights(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  for (int64_t i = 0; i < n; i += 97) x[static_cast<size_t>(i)] *= 6.0f;
  return x;
}

// Relative RMS error of x written as `type` and read back.
double RoundTripError(uint32_t type, const std::vector<float>& x) {
  std::string blocks;
  const Status s = quants::Quantize(type, x.data(), static_cast<int64_t>(x.size()), &blocks, "test");
  EXPECT_TRUE(s.ok()) << s.message();
  const quants::Layout* l = quants::FindLayout(type);
  EXPECT_EQ(blocks.size(), x.size() / l->block_elems * l->block_bytes);
  std::vector<float> y(x.size());
  EXPECT_TRUE(quants::Dequantize(type, reinterpret_cast<const unsigned char*>(blocks.data()),
                                 static_cast<int64_t>(x.size()) / l->block_elems, y.data(), "test")
                  .ok());
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); i++) err += std::pow(x[i] - y[i], 2), ref += std::pow(x[i], 2);
  return std::sqrt(err / ref);
}

// Each type's error on the test's weights is near what its bits allow; the
// bounds are ~1.25x the measured values (printed), so a misplaced field (a
// code in the wrong nibble, a scale on the wrong sub-block) fails them.
TEST(Quantize, EveryWrittenTypeReadsBackWithinItsStep) {
  const std::vector<float> x = Weights(256 * 64, 7);
  const std::map<uint32_t, double> bound = {{quants::kQ4_0, 0.16},  {quants::kQ4_1, 0.115}, {quants::kQ5_0, 0.08},
                                            {quants::kQ5_1, 0.056}, {quants::kQ8_0, 0.010}, {quants::kQ4_K, 0.108},
                                            {quants::kQ5_K, 0.054}, {quants::kQ6_K, 0.029}};
  for (const auto& [type, max] : bound) {
    ASSERT_TRUE(quants::CanQuantize(type));
    const double e = RoundTripError(type, x);
    std::printf("round trip %s: relative rms error %.5f (bound %.3f)\n", gguf::TensorTypeName(type).c_str(), e, max);
    EXPECT_LE(e, max) << gguf::TensorTypeName(type);
  }
  // All-zero and constant blocks are exact.
  for (const auto& [type, max] : bound) {
    for (float c : {0.0f, -0.5f}) {
      const std::vector<float> flat(256, c);
      std::string b;
      ASSERT_TRUE(quants::Quantize(type, flat.data(), 256, &b, "flat").ok());
      std::vector<float> y(256);
      ASSERT_TRUE(quants::Dequantize(type, reinterpret_cast<const unsigned char*>(b.data()),
                                     256 / quants::FindLayout(type)->block_elems, y.data(), "flat")
                      .ok());
      for (float v : y) EXPECT_NEAR(v, c, 1e-3) << gguf::TensorTypeName(type) << " on a block of " << c;
    }
  }
}

TEST(Quantize, BadInputIsRefusedByName) {
  std::vector<float> x(256, 0.1f);
  std::string out;
  Status s = quants::Quantize(quants::kQ3_K, x.data(), 256, &out, "f.gguf: tensor w");
  EXPECT_EQ(s.message(),
            "f.gguf: tensor w: verity does not write Q3_K (it writes Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, "
            "Q5_K and Q6_K)");
  s = quants::Quantize(quants::kQ4_K, x.data(), 128, &out, "w");
  EXPECT_EQ(s.message(), "w: 128 weights are not whole Q4_K blocks of 256");
  x[5] = NAN;
  s = quants::Quantize(quants::kQ4_0, x.data(), 256, &out, "w");
  EXPECT_NE(s.message().find("w: weight 5 is nan"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
  auto ft = quants::FindFileType("q4_k_x");
  ASSERT_FALSE(ft.ok());
  EXPECT_NE(ft.status().message().find("--dtype q4_k_x: not a block file type verity writes (q4_0,"),
            std::string::npos);
}

// Tensor name -> (type, f32 values) of a GGUF file, block types dequantized.
struct Read {
  uint32_t type;
  std::vector<float> values;
};
std::map<std::string, Read> ReadAll(const std::string& path) {
  const std::string bytes = test::ReadFile(path);
  const auto* base = reinterpret_cast<const unsigned char*>(bytes.data());
  auto f = gguf::Parse(base, bytes.size(), path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  std::map<std::string, Read> out;
  if (!f.ok()) return out;
  for (const gguf::TensorInfo& t : f->tensors) {
    if (t.dims.size() < 2) continue;  // vectors stay F32 in both writers
    Read r{t.type, std::vector<float>(t.elements())};
    const unsigned char* data = base + f->data_start + t.offset;
    if (const quants::Layout* l = quants::FindLayout(t.type)) {
      EXPECT_TRUE(quants::Dequantize(t.type, data, static_cast<int64_t>(r.values.size()) / l->block_elems,
                                     r.values.data(), t.name)
                      .ok());
    } else if (t.type == gguf::kF32) {
      std::memcpy(r.values.data(), data, r.values.size() * 4);
    } else if (t.type == gguf::kF16) {  // the fallback for rows that are not whole blocks
      for (size_t i = 0; i < r.values.size(); i++)
        r.values[i] = F16ToF32(static_cast<uint16_t>(data[2 * i] | data[2 * i + 1] << 8));
    } else {
      ADD_FAILURE() << path << ": " << t.name << " has type " << gguf::TensorTypeName(t.type);
    }
    out[t.name] = std::move(r);
  }
  return out;
}

// Per block type: squared error against the f32 weights, and their squares.
using Errors = std::map<uint32_t, std::pair<double, double>>;
void AddErrors(const Read& f32, const Read& q, Errors* e) {
  auto& [err, ref] = (*e)[q.type];
  for (size_t i = 0; i < f32.values.size(); i++)
    err += std::pow(double{f32.values[i]} - q.values[i], 2), ref += std::pow(double{f32.values[i]}, 2);
}

// On a 16-layer synth (so the *_M files' layer choice shows), a 16-layer
// Phi-3 synth (its fused attn_qkv takes attn_v's rules), an 8-expert
// Mixtral-style synth (the rules llama.cpp keeps for 8 experts: attn_k and
// attn_v Q8_0, attn_output Q5_K in Q4_K files) and stories260K's rows of 64
// (llama.cpp's fallbacks): verity's file and
// llama.cpp's, from the same F32 file, hold every tensor in the same type,
// and per type verity's relative rms error is at most 1.03x llama.cpp's.
TEST(Quantize, FilesHoldLlamaCppsTypesAtItsError) {
  REQUIRE_PEER();
  const std::string dir = test::TempDir("quantize");
  auto run = [](const std::string& cmd) {
    auto r = test::Shell(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  };
  run(test::VerityBin() + " synth --out " + dir + "/s16.bin --config " +
      R"('{"dim":256,"hidden_dim":768,"n_layers":16,"n_heads":8,"n_kv_heads":4,"vocab_size":512,"seq_len":256,"shared_classifier":false}')");
  run(test::VerityBin() + " convert --to gguf --model " + dir + "/s16.bin --out " + dir + "/s16.gguf --dtype f32");
  run(test::VerityBin() + " synth --out " + dir + "/moe8 --config " +
      R"('{"dim":256,"hidden_dim":512,"n_layers":4,"n_heads":8,"n_kv_heads":4,"vocab_size":512,"seq_len":256,)" +
      R"("shared_classifier":false,"n_experts":8,"n_experts_per_tok":2}')");
  run(test::VerityBin() + " convert --to gguf --model " + dir + "/moe8 --out " + dir + "/moe8.gguf --dtype f32");
  run(test::VerityBin() + " convert --to gguf --model " + test::Model("stories260K.bin") + " --out " + dir +
      "/stories.gguf --dtype f32");
  // Phi-3's fused attn_qkv and double-height ffn_up, 16 layers.
  run(test::VerityBin() + " synth --like phi3 --out " + dir + "/p16 --config " +
      R"('{"dim":256,"hidden_dim":768,"n_layers":16,"n_heads":8,"n_kv_heads":8,"vocab_size":512}')");
  run(test::VerityBin() + " convert --to gguf --model " + dir + "/p16 --out " + dir + "/p16.gguf --dtype f32");
  for (const char* model : {"s16", "moe8", "stories", "p16"}) {
    const std::map<std::string, Read> f32 = ReadAll(dir + "/" + model + ".gguf");
    for (const char* ft : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"}) {
      const std::string theirs = dir + "/" + model + ".llama." + ft + ".gguf",
                        mine = dir + "/" + model + ".verity." + ft + ".gguf";
      run(std::string(LLAMA_PEER_BIN) + " quantize " + dir + "/" + model + ".gguf " + theirs + " " + ft);
      run(test::VerityBin() + " convert --to gguf --model " + dir + "/" + model + ".gguf --out " + mine + " --dtype " +
          ft);
      const std::map<std::string, Read> a = ReadAll(theirs), b = ReadAll(mine);
      ASSERT_EQ(a.size(), f32.size());
      ASSERT_EQ(b.size(), f32.size());
      Errors ea, eb;
      int same = 0;
      for (const auto& [name, ref] : f32) {
        const Read& x = a.at(name);
        const Read& y = b.at(name);
        EXPECT_EQ(gguf::TensorTypeName(y.type), gguf::TensorTypeName(x.type)) << model << " " << ft << " " << name;
        same += x.type == y.type;
        if (x.type != y.type) continue;
        AddErrors(ref, x, &ea);
        AddErrors(ref, y, &eb);
      }
      std::string line;
      for (const auto& [type, e] : eb) {
        const double mine_rel = std::sqrt(e.first / e.second), theirs_rel = std::sqrt(ea[type].first / ea[type].second);
        char buf[160];
        std::snprintf(buf, sizeof buf, " %s %.5f vs %.5f (x%.3f)", gguf::TensorTypeName(type).c_str(), mine_rel,
                      theirs_rel, theirs_rel > 0 ? mine_rel / theirs_rel : 1.0);
        line += buf;
        if (type != gguf::kF32) EXPECT_LE(mine_rel, 1.03 * theirs_rel) << model << " " << ft << " " << buf;
      }
      std::printf("quantize %s %s: %d/%zu tensors of llama.cpp's type; relative rms error verity vs llama.cpp:%s\n",
                  model, ft, same, f32.size(), line.c_str());
    }
  }
}

}  // namespace
}  // namespace verity
