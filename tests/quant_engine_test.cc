// llama.cpp's block-quantized GGUF files run by the engine (docs/gguf.md,
// "Block quantizations"): the CPU backends dequantize a few rows at a time and
// run the f32 arithmetic on them, so a model's logits with block weights must
// equal, bit for bit, its logits on an F32 file holding those weights
// dequantized up front; and on llama.cpp's own files verity's logits must lie
// as close to llama.cpp's as the types' own noise explains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "corruptions/forwarding_backend.h"
#include "engine/engine.h"
#include "engine/slots.h"
#include "formats/gguf.h"
#include "formats/quants.h"
#include "tests/peer_test_util.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Shell;
using test::VerityBin;

// quants_test's synth (test::kPeerSynthConfig): every matrix row 256 or 768
// weights, so the k-quant files hold k-quants.
constexpr const char* kSynthConfig = test::kPeerSynthConfig;
constexpr int kVocab = 512;

std::string RunOk(const std::string& command) {
  auto r = Shell(command);
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
  return r.exit_code == 0 ? r.out : std::string();
}

std::string Quantize(const std::string& f32, const std::string& type) {
  const std::string out = f32.substr(0, f32.rfind('.')) + "." + type + ".gguf";
  RunOk(std::string(LLAMA_PEER_BIN) + " quantize " + f32 + " " + out + " " + type);
  return out;
}

// The same file type written by verity's own quantizer (formats/quantize.h).
std::string VerityQuantize(const std::string& f32, const std::string& type) {
  const std::string out = f32.substr(0, f32.rfind('.')) + ".verity." + type + ".gguf";
  RunOk(VerityBin() + " convert --to gguf --model " + f32 + " --out " + out + " --dtype " + type);
  return out;
}

// The same file with every block-quantized tensor replaced by its F32
// dequantization (formats/quants, bit-exact to gguf-py: quants_test), written
// here with the GGUF writer and no engine code: the "dequantized up front" model.
// Returns the block types it dequantized.
std::set<std::string> DequantizedCopy(const std::string& path, const std::string& out) {
  const std::string bytes = test::ReadFile(path);
  const auto* base = reinterpret_cast<const unsigned char*>(bytes.data());
  auto f = gguf::Parse(base, bytes.size(), path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return {};
  std::vector<gguf::TensorSpec> specs;
  std::set<std::string> types;
  for (const gguf::TensorInfo& t : f->tensors) {
    gguf::TensorSpec s;
    s.name = t.name;
    s.dims = t.dims;
    s.type = quants::FindLayout(t.type) ? static_cast<uint32_t>(gguf::kF32) : t.type;
    if (quants::FindLayout(t.type)) types.insert(gguf::TensorTypeName(t.type));
    specs.push_back(s);
  }
  const Status st = gguf::Write(out, f->metadata, specs, [&](size_t k, std::string* o) -> Status {
    const gguf::TensorInfo& t = f->tensors[k];
    const unsigned char* data = base + f->data_start + t.offset;
    const quants::Layout* l = quants::FindLayout(t.type);
    if (!l) {
      o->append(reinterpret_cast<const char*>(data), t.bytes);
      return OkStatus();
    }
    std::vector<float> v(t.elements());
    VERITY_RETURN_IF_ERROR(
        quants::Dequantize(t.type, data, static_cast<int64_t>(v.size()) / l->block_elems, v.data(), t.name));
    o->append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return types;
}

// Token ids for teacher forcing: BOS, then a fixed pseudo-random walk over the vocabulary.
std::vector<int> Ids(int n) {
  std::vector<int> ids = {1};
  uint32_t s = 12345;
  while (static_cast<int>(ids.size()) < n) {
    s = s * 1664525u + 1013904223u;
    ids.push_back(static_cast<int>((s >> 8) % kVocab));
  }
  return ids;
}

// Every logit the model gives along `ids` on `backend`: a prefill of the
// first half (MatmulShared / MatmulBatch, whose last row's logits are kept),
// then one position at a time (Matmul), then the same ids again as two
// independent sequences' steps (SlotDecoder: MatmulRows).
std::vector<float> EngineLogits(const Model& m, const std::string& backend, const std::vector<int>& ids) {
  std::vector<float> out;
  auto kern = kernels::MakeBackend(backend);
  EXPECT_TRUE(kern.ok());
  auto t = Transformer::Create(m, std::move(*kern));
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return out;
  const int half = static_cast<int>(ids.size()) / 2;
  const float* l = (*t)->Prefill(ids.data(), half, 0);
  out.insert(out.end(), l, l + kVocab);
  for (int p = half; p < static_cast<int>(ids.size()); p++) {
    l = (*t)->Forward(ids[p], p);
    out.insert(out.end(), l, l + kVocab);
  }
  auto kern2 = kernels::MakeBackend(backend);
  auto slots = SlotDecoder::Create(m, std::move(*kern2), 2);
  EXPECT_TRUE(slots.ok()) << slots.status().message();
  if (!slots.ok()) return out;
  std::vector<float> rows(2 * kVocab);
  for (int p = 0; p < 8; p++) {
    const int slot[2] = {0, 1}, token[2] = {ids[p], ids[p + 8]}, pos[2] = {p, p};
    (*slots)->Step(slot, token, pos, 2, rows.data());
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

// Top-1 agreement and KL(p || q) of the softmaxes, row by row.
struct Agreement {
  int rows = 0, top1 = 0;
  double mean_kl = 0, worst_kl = 0;
};

Agreement Compare(const std::vector<float>& p, const std::vector<float>& q) {
  Agreement a;
  EXPECT_EQ(p.size(), q.size());
  for (size_t r = 0; r + kVocab <= std::min(p.size(), q.size()); r += kVocab) {
    auto soft = [&](const float* x, std::vector<double>* out) {
      const double mx = *std::max_element(x, x + kVocab);
      double z = 0;
      for (int i = 0; i < kVocab; i++) z += std::exp(x[i] - mx);
      for (int i = 0; i < kVocab; i++) (*out)[i] = x[i] - mx - std::log(z);  // log-probabilities
    };
    std::vector<double> lp(kVocab), lq(kVocab);
    soft(&p[r], &lp), soft(&q[r], &lq);
    double kl = 0;
    for (int i = 0; i < kVocab; i++) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    a.rows++;
    a.top1 += std::max_element(&p[r], &p[r] + kVocab) - &p[r] == std::max_element(&q[r], &q[r] + kVocab) - &q[r];
    a.mean_kl += kl, a.worst_kl = std::max(a.worst_kl, kl);
  }
  if (a.rows) a.mean_kl /= a.rows;
  return a;
}

std::string Describe(const Agreement& a) {
  char s[160];
  std::snprintf(s, sizeof s, "top-1 %d/%d, KL mean %.3g worst %.3g", a.top1, a.rows, a.mean_kl, a.worst_kl);
  return s;
}

// verity on llama.cpp's `type` file of `f32` gives the logits it gives on
// the F32 file of the same weights dequantized up front: bit for bit on the
// reference backend; on the fast one (integer dots against x rounded to
// int16, kernels/cpu/block_dot.h) within x's rounding: the same top-1 at
// every position and KL below kFastKl. Adds the file's block types to `seen`.
void ExpectSameBits(const std::string& f32, const std::string& type, const std::vector<int>& ids,
                    std::set<std::string>* seen) {
  const std::string q = Quantize(f32, type), deq = f32.substr(0, f32.rfind('.')) + ".deq." + type + ".gguf";
  const std::set<std::string> types = DequantizedCopy(q, deq);
  seen->insert(types.begin(), types.end());
  auto mq = LoadModel(q);
  auto md = LoadModel(deq);
  ASSERT_TRUE(mq.ok()) << mq.status().message();
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_FALSE((*mq)->first_block_tensor.empty()) << q << " loaded without block weights";
  EXPECT_TRUE((*md)->first_block_tensor.empty());
  // x rounded to int16 per 256 values moves a logit by ~1e-5 of its
  // magnitude; the parity gate measures such runs at mean KL ~3e-9. 1e-6
  // is 300 times that and 100 times below the q8_0 weights' own noise.
  constexpr double kFastKl = 1e-6;
  std::string line;
  for (const char* backend : {"reference", "fast"}) {
    const std::vector<float> a = EngineLogits(**mq, backend, ids), b = EngineLogits(**md, backend, ids);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    size_t differing = 0;
    for (size_t i = 0; i < a.size(); i++) differing += std::memcmp(&a[i], &b[i], 4) != 0;
    const Agreement ag = Compare(a, b);
    if (std::string(backend) == "reference") {
      EXPECT_EQ(differing, 0u) << q << " on " << backend << ": " << differing << " of " << a.size() << " logits differ";
    } else {
      EXPECT_EQ(ag.top1, ag.rows) << q << " on fast: " << Describe(ag);
      EXPECT_LE(ag.worst_kl, kFastKl) << q << " on fast: " << Describe(ag);
    }
    line += std::string(" ") + backend + " " + (differing ? "differs" : "identical") + " (" +
            std::to_string(differing) + " of " + std::to_string(a.size()) + " logits differ; " + Describe(ag) + ")";
  }
  std::string mix;
  for (const std::string& t : types) mix += " " + t;
  std::printf("bits %s [%s ]:%s\n", q.substr(q.rfind('/') + 1).c_str(), mix.c_str(), line.c_str());
}

// For each of the nine file types, a model with a tied classifier (its
// block-quantized token_embd is the classifier too) and an MoE (experts
// sliced from stacked block tensors): verity on llama.cpp's
// block-quantized file gives the logits verity gives on the F32 file of the
// same weights dequantized up front, bit for bit on the reference backend
// (the blocks add no arithmetic of their own there, so the dequantization,
// quants_test's gguf-py bit for bit, is all that lies between them) and
// within x's int16 rounding on the fast one (ExpectSameBits).
TEST(QuantEngine, BlockWeightsGiveTheLogitsOfTheirF32Dequantization) {
  REQUIRE_PEER();
  const std::string dir = test::TempDir("qe-bits");
  const std::string f32 = test::PeerSynthF32Gguf(dir);
  const std::vector<int> ids = Ids(32);
  std::set<std::string> seen;
  for (const char* type : {"q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"})
    ExpectSameBits(f32, type, ids, &seen);
  for (const char* block : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"})
    EXPECT_TRUE(seen.count(block)) << block << " was not exercised by any file";
  std::string tied = kSynthConfig;
  const std::string unshared = "\"shared_classifier\":false";
  tied.replace(tied.find(unshared), unshared.size(), "\"shared_classifier\":true");
  RunOk(VerityBin() + " synth --out " + dir + "/tied.bin --config '" + tied + "'");
  RunOk(VerityBin() + " convert --to gguf --model " + dir + "/tied.bin --out " + dir + "/tied.gguf --dtype f32");
  ExpectSameBits(dir + "/tied.gguf", "q4_k_m", ids, &seen);
  // A Mixtral-style MoE: each expert a slice of a stacked block tensor.
  RunOk(VerityBin() + " synth --out " + dir + "/moe --config '" +
        R"({"dim":256,"hidden_dim":512,"n_layers":2,"n_heads":8,"n_kv_heads":4,"vocab_size":512,"seq_len":256,)" +
        R"("shared_classifier":false,"n_experts":4,"n_experts_per_tok":2})" + "'");
  RunOk(VerityBin() + " convert --to gguf --model " + dir + "/moe --out " + dir + "/moe.gguf --dtype f32");
  ExpectSameBits(dir + "/moe.gguf", "q4_k_m", ids, &seen);
}

// The parity gate on block files: the fast backend against the reference
// backend on the same (block) weights, as for any dtype.
TEST(QuantEngine, TheParityGatePassesOnBlockFiles) {
  REQUIRE_PEER();
  const std::string f32 = test::PeerSynthF32Gguf(test::TempDir("qe-parity"));
  for (const char* type : {"q4_0", "q2_k", "q4_k_m", "q6_k"}) {
    const std::string out = RunOk(VerityBin() + " parity --model " + Quantize(f32, type) +
                                  " --reference-dtype same --depths 1,32,96 --window 4 2>&1");
    const size_t at = out.find("parity: worst_top1=");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string summary = out.substr(at, out.find('\n', at) - at);
    std::printf("parity gate %s: %s\n", type, summary.c_str());
    EXPECT_NE(summary.find("verdict=PASS"), std::string::npos) << summary;
  }
}

// A backend with block kernels for one type at most (0: none), named
// "no-blocks" or, as CUDA takes Q4_K and Q6_K and no other, "q4_k-only".
class SomeBlockKernels final : public corruptions::ForwardingBackend {
 public:
  explicit SomeBlockKernels(uint32_t takes = 0)
      : ForwardingBackend(kernels::MakeBackend("reference").value()), takes_(takes) {}
  const char* name() const override { return takes_ == 0 ? "no-blocks" : "q4_k-only"; }
  bool runs_block_type(uint32_t t) const override { return t == takes_; }

 private:
  uint32_t takes_;
};

// What cannot run the block types refuses them by name, before running:
// a backend without their kernels (CUDA), tensor parallelism, and writing
// the two types verity does not write.
TEST(QuantEngine, WhatCannotRunBlockTypesRefusesThemByName) {
  REQUIRE_PEER();
  const std::string dir = test::TempDir("qe-refuse");
  const std::string q = Quantize(test::PeerSynthF32Gguf(dir), "q4_k_m");
  auto m = LoadModel(q);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->first_block_tensor, "token_embd.weight (Q4_K)");
  const std::string why = q +
                          ": tensor token_embd.weight (Q4_K) is a llama.cpp block quantization, and the no-blocks "
                          "backend has no kernel for Q4_K (use --backend fast or reference)";
  auto t = Transformer::Create(**m, std::make_unique<SomeBlockKernels>());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(why), std::string::npos) << t.status().message();
  auto s = SlotDecoder::Create(**m, std::make_unique<SomeBlockKernels>(), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(why), std::string::npos) << s.status().message();
  // A backend that takes Q4_K and not Q6_K names the first Q6_K matrix.
  ASSERT_EQ((*m)->first_of_each_block_type.size(), 2u);
  const Model::BlockTensor& q6 = (*m)->first_of_each_block_type[1];
  EXPECT_EQ(q6.type, "Q6_K");
  auto partial = Transformer::Create(**m, std::make_unique<SomeBlockKernels>(12));  // Q4_K
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find(q + ": tensor " + q6.tensor +
                                            " (Q6_K) is a llama.cpp block quantization, "
                                            "and the q4_k-only backend has no kernel for Q6_K"),
            std::string::npos)
      << partial.status().message();
  EXPECT_FALSE(Transformer::Create(**m, std::make_unique<SomeBlockKernels>(14)).ok());  // Q6_K only: Q4_K refused
  auto tp = Shell(VerityBin() + " logits --model " + q + " --ids '1 2 3' --out " + dir + "/tp.bin --tp 2");
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.err.find("--tp: " + q +
                        ": tensor token_embd.weight (Q4_K) is a llama.cpp block quantization; tensor "
                        "parallelism does not shard block-quantized matrices yet"),
            std::string::npos)
      << tp.err;
  // verity writes the 4-, 5-, 6- and 8-bit types (quantize_test), not Q2_K or Q3_K.
  auto conv =
      Shell(VerityBin() + " convert --to gguf --model " + dir + "/synth.bin --out " + dir + "/x.gguf --dtype q3_k_m");
  EXPECT_NE(conv.exit_code, 0);
  EXPECT_NE(conv.err.find("--dtype q3_k_m: not a block file type verity writes (q4_0, q4_1, q5_0, q5_1, q8_0, q4_k_s, "
                          "q4_k_m, q5_k_s, q5_k_m, q6_k); Q2_K and Q3_K files are read but not written"),
            std::string::npos)
      << conv.err;
  std::printf(
      "refused by name: a backend without block kernels (Transformer, SlotDecoder), one without Q6_K's (%s), "
      "--tp 2, convert --dtype q3_k_m\n",
      q6.tensor.c_str());
}

std::vector<float> ReadFloats(const std::string& path) {
  const std::string b = test::ReadFile(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

std::string Join(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

std::vector<float> PeerLogits(const std::string& gguf, const std::vector<int>& ids, int threads) {
  const std::string out = test::TempDir("qe-pl") + "/l.bin";
  RunOk(std::string(LLAMA_PEER_BIN) + " logits " + gguf + " --threads " + std::to_string(threads) + " --ids '" +
        Join(ids) + "' --out " + out);
  return ReadFloats(out);
}

std::vector<float> VerityLogits(const std::string& gguf, const std::vector<int>& ids) {
  const std::string out = test::TempDir("qe-vl") + "/l.bin";
  RunOk(VerityBin() + " logits --backend fast --model " + gguf + " --ids '" + Join(ids) + "' --out " + out);
  return ReadFloats(out);
}

// Teacher-forced logits on llama.cpp's own files, verity (fast backend)
// against llama.cpp (1 thread), 64 positions of the synth. verity's weights
// are llama.cpp's, dequantized bit for bit; the arithmetic differs in one
// way: llama.cpp rounds each matmul's activations to 8 bits (Q8_K for the
// k-quants, Q8_0 for the others) for its integer dots, verity keeps them f32.
// The size of an 8-bit rounding at every matmul input is what llama.cpp's own
// Q8_0 file shows against its F32 file (8-bit weights, measured in this run),
// so each type's KL from llama.cpp must stay within twice that (twice: the
// k-quants' Q8_K rounding is not Q8_0's, and 64 positions are a small
// sample). Measured on the synth (docs/gguf.md): verity vs llama.cpp mean KL 0.9e-4 ..
// 2.0e-4 against a bound of 3.0e-4, worst 1.3e-4 .. 3.2e-4 against 4.9e-4.
// Each type's own noise against F32 (printed beside it) is 3x (Q6_K) to 50x
// (Q4_0) the bound; the bit-identity test is what pins a misread layout. The
// floors printed too: llama.cpp against itself at 2 threads. On the synth
// top-1 is printed, not bounded: its logits are near-flat (its two best often
// 1e-3 apart), so an argmax flips at the slightest rounding; stories260K (a
// trained model, rows of 64: Q4_0 but no k-quants) bounds it.
// Each of `types`, quantized from `f32` by llama.cpp, teacher-forced along
// `ids`: verity against llama.cpp, bounded by twice the 8-bit rounding
// llama.cpp's own Q8_0 file of the same model shows (q8_0 must come first).
// With `trained` (a model whose argmax means something), top-1 is bounded
// too: verity may flip no more argmaxes than llama.cpp's own 8-bit rounding
// does (its Q8_0 file against its F32), plus 2 near-ties.
// `quantize` writes each file (llama.cpp's quantizer, or verity's).
void ExpectWithinNoise(const std::string& label, const std::string& f32, const std::vector<const char*>& types,
                       const std::vector<int>& ids, bool trained,
                       std::string (*quantize)(const std::string&, const std::string&) = Quantize) {
  const std::vector<float> peer_f32 = PeerLogits(f32, ids, 1);
  Agreement eight_bit;  // llama.cpp's Q8_0 file against its F32 one: the 8-bit rounding
  for (const char* type : types) {
    const std::string q = quantize(f32, type);
    const std::vector<float> peer1 = PeerLogits(q, ids, 1), peer2 = PeerLogits(q, ids, 2), mine = VerityLogits(q, ids);
    const Agreement vs = Compare(peer1, mine), threads = Compare(peer1, peer2), noise = Compare(peer_f32, peer1);
    if (std::string(type) == "q8_0") eight_bit = noise;
    ASSERT_GT(eight_bit.rows, 0) << "q8_0 must come first";
    const double mean_bound = 2 * eight_bit.mean_kl, worst_bound = 2 * eight_bit.worst_kl;
    std::printf(
        "peer %s %s: verity vs llama.cpp %s (bounds %.3g, %.3g) | llama.cpp 1 vs 2 threads %s | llama.cpp %s "
        "vs its F32 %s\n",
        label.c_str(), type, Describe(vs).c_str(), mean_bound, worst_bound, Describe(threads).c_str(), type,
        Describe(noise).c_str());
    EXPECT_EQ(vs.rows, static_cast<int>(ids.size())) << type;
    EXPECT_LE(vs.mean_kl, mean_bound) << label << " " << type;
    EXPECT_LE(vs.worst_kl, worst_bound) << label << " " << type;
    if (trained) {
      EXPECT_GE(vs.top1, eight_bit.top1 - 2) << label << " " << type;
    }
  }
}

TEST(QuantEngine, LlamaCppsQuantizedFilesAgreeWithLlamaCppWithinTheirOwnNoise) {
  REQUIRE_PEER();
  const std::string dir = test::TempDir("qe-peer");
  ExpectWithinNoise("synth", test::PeerSynthF32Gguf(dir), {"q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"}, Ids(64), false);
  // stories260K, a trained model, where top-1 means something: along
  // llama.cpp's own greedy text (F32). Its rows of 64 hold Q4_0 but no
  // k-quant: llama.cpp's q4_k_m falls back to Q5_0 and Q8_0.
  const std::string stories = dir + "/stories260K.gguf";
  RunOk(VerityBin() + " convert --to gguf --model " + test::Model("stories260K.bin") + " --out " + stories +
        " --dtype f32");
  std::vector<int> ids = {1};  // BOS, then the 63 ids llama.cpp generates after it
  std::istringstream greedy(RunOk(std::string(LLAMA_PEER_BIN) + " greedy " + stories + " --prompt 1 --steps 63"));
  for (int id; greedy >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 64u);
  ExpectWithinNoise("stories260K", stories, {"q8_0", "q4_0", "q4_k_m"}, ids, true);
}

// Issue 44's families as llama.cpp's own block files: a 4-layer synth of
// each (rows of 256, untied but Gemma, vocabulary 512), quantized by llama.cpp to Q8_0
// and Q4_K_M, run by verity's fast backend (q/k biases, q/k norms, fused
// attn_qkv and ffn_up row views of block tensors) and by llama.cpp, within
// the same noise bounds as the llama synth's.
TEST(QuantEngine, FamilyFilesQuantizedByLlamaCppAgreeWithLlamaCppWithinTheirOwnNoise) {
  REQUIRE_PEER();
  for (const std::string family : {"qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
    const std::string dir = test::TempDir("qe-" + family);
    // Gemma is tied (llama.cpp's gemma2 reads no output.weight), its
    // attention scale the head_dim llama.cpp infers.
    const bool gemma = family.rfind("gemma", 0) == 0;
    RunOk(VerityBin() + " synth --like " + family + " --out " + dir + "/hf --config " +
          R"('{"dim":256,"hidden_dim":512,"n_layers":4,"n_heads":4,"n_kv_heads":2,"head_dim":64,"vocab_size":512,)" +
          (gemma ? R"("shared_classifier":true,"query_pre_attn_scalar":64,)" : R"("shared_classifier":false,)") +
          R"("bos_token_id":1,"eos_token_id":2}')");
    RunOk(VerityBin() + " convert --to gguf --model " + dir + "/hf --out " + dir + "/f32.gguf --dtype f32");
    ExpectWithinNoise(family, dir + "/f32.gguf", {"q8_0", "q4_k_m"}, Ids(64), false);
  }
}

// verity's own block files (verity convert --dtype): llama.cpp loads them
// and its logits agree with verity's on them within the same bounds as on
// its own files (the 8-bit rounding of its activations, measured on the
// Q8_0 file verity wrote).
TEST(QuantEngine, VerityWrittenFilesAgreeWithLlamaCpp) {
  REQUIRE_PEER();
  const std::string dir = test::TempDir("qe-written");
  ExpectWithinNoise("verity-written synth", test::PeerSynthF32Gguf(dir),
                    {"q8_0", "q4_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k"}, Ids(64), false, VerityQuantize);
}

}  // namespace
}  // namespace verity
