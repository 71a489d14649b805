// Typed weights and memory-mapped checkpoints: bf16 and q8_0 keep parity with
// the f32 reference on the shipped model, every loaded model names its dtype
// and its footprint, f32 weights are used where the file maps them, and what
// cannot be used in place is copied once, with a note naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/zeroed_buffer.h"
#include "verify/parity.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using kernels::DType;
using test::Model;
using test::Shell;
using test::VerityBin;

bool InMapping(const class Model& m, const void* p) {
  for (const auto& f : m.mappings)
    if (p >= f->data() && p < f->data() + f->size()) return true;
  return false;
}

// Every matrix view of a model, in a fixed order.
std::vector<const kernels::Weights*> Matrices(const class Model& m) {
  std::vector<const kernels::Weights*> v;
  for (const auto& l : m.layers)
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) v.push_back(w);
  v.push_back(&m.classifier);
  return v;
}

TEST(DType, Bf16AndQ8KeepParityWithTheF32ReferenceOnStories260K) {
  auto f32 = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  for (DType t : {DType::kBF16, DType::kQ8_0}) {
    auto m = LoadModel(Model("stories260K.bin"), t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ParityOptions opt;  // fast candidate, 7 depths x 8 positions over the reference's greedy text
    auto rep = RunParity(**f32, **m, opt);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    std::printf("parity %s vs f32 reference on stories260K: worst top-1 %.4f, worst mean KL %.3g (%d tokens)\n",
                DTypeName(t), rep->worst_top1, rep->worst_mean_kl, rep->tokens);
    EXPECT_EQ(rep->dtype, DTypeName(t));
    EXPECT_GE(rep->worst_top1, 0.95) << DTypeName(t);
    EXPECT_LE(rep->worst_mean_kl, 0.05) << DTypeName(t);
    EXPECT_GT(rep->worst_mean_kl, 0.0) << DTypeName(t) << " is not the f32 model";
    EXPECT_TRUE(rep->ok);
    // The reference backend runs the same weights too (dequantizing as it goes).
    opt.backend = "reference";
    auto slow = RunParity(**f32, **m, opt);
    ASSERT_TRUE(slow.ok());
    EXPECT_TRUE(slow->ok) << DTypeName(t) << " on the reference backend: KL " << slow->worst_mean_kl;
  }
}

TEST(DType, EveryMatrixIsStoredInTheModelsDtypeAndTheFootprintSaysSo) {
  auto base = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(base.ok());
  const ModelConfig& c = (*base)->config;
  size_t per_token[3] = {};
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
    auto m = LoadModel(Model("stories260K.bin"), t);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->dtype, t);
    for (const auto* w : Matrices(**m)) EXPECT_EQ(w->dtype, t);
    // stories260K's hidden_dim 172 is padded to 192 for q8_0 (zero weights), kept otherwise.
    const int ffn = t == DType::kQ8_0 ? 192 : 172;
    EXPECT_EQ((*m)->ffn_dim, ffn);
    EXPECT_EQ((*m)->layers[0].w1.rows, ffn);
    EXPECT_EQ((*m)->layers[0].w2.cols, ffn);
    // f32: llama2.c's 28-byte header leaves every matrix unaligned for the
    // kernels, so each is copied once, said in a note; bf16 and q8_0 convert.
    bool copied = false, padded = false;
    for (const auto& n : (*m)->notes) {
      copied = copied || n.find("32-byte aligned in the file; copied once") != std::string::npos;
      padded = padded || n.find("padded with zero weights") != std::string::npos;
    }
    EXPECT_EQ(copied, t == DType::kF32) << DTypeName(t);
    EXPECT_EQ(padded, t == DType::kQ8_0) << DTypeName(t);
    const Footprint f = FootprintOf(**m);
    // Matrices per token: 5 layers x (wq, wo: 64x64; wk, wv: 32x64; w1, w3: ffn x 64; w2: 64 x ffn) + classifier
    // 512x64.
    const size_t elems = 5 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * static_cast<size_t>(ffn) * 64) + 512 * 64;
    const size_t matrix_bytes = t == DType::kF32 ? elems * 4 : t == DType::kBF16 ? elems * 2 : elems / 32 * 36;
    const size_t norms = (2 * 5 + 1) * 64 * 4, embedding_row = 64 * 4;
    EXPECT_EQ(f.weight_bytes_per_token, matrix_bytes + norms + embedding_row) << DTypeName(t);
    // Resident: the f32 embedding table, plus for f32 nothing more (the classifier is that table).
    const size_t embedding = 512 * 64 * 4;
    EXPECT_EQ(f.resident_weight_bytes, matrix_bytes + norms + embedding - (t == DType::kF32 ? 512 * 64 * 4 : 0))
        << DTypeName(t);
    EXPECT_EQ(f.kv_cache_bytes, 2u * c.n_layers * c.seq_len * c.kv_dim() * 4);
    EXPECT_EQ(FootprintOf(**m, 100).kv_cache_bytes, 2u * c.n_layers * 100 * c.kv_dim() * 4);
    per_token[static_cast<int>(t)] = f.weight_bytes_per_token;
  }
  EXPECT_LT(per_token[1], per_token[0] * 6 / 10);
  EXPECT_LT(per_token[2], per_token[1] * 8 / 10);
}

// A large model's matrices under 16 MB share 64 MB huge-page slabs (2 MB
// aligned, packed at 64-byte steps, zeroed); bigger ones get their own
// buffers; without the arena every buffer is its own.
// The VmFlags line of the mapping in /proc/self/smaps that holds `p` ("" if none).
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// The KV cache (and the weights) ask for transparent huge pages: the smaps
// flags of the mapping say "hg" (MADV_HUGEPAGE) once the buffer spans 2 MB.
TEST(Mmap, ZeroedFloatsAskForHugePagesWhenTheySpanOne) {
  verity::ZeroedFloats big(size_t{3} << 20);  // 12 MB
  ASSERT_EQ(big.size(), size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (uintptr_t{2} << 20), 0u);
  for (size_t i = 0; i < big.size(); i += 4093) ASSERT_EQ(big.data()[i], 0.0f) << i;
  const std::string flags = VmFlagsOf(big.data());
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the buffer";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  verity::ZeroedFloats small(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  for (size_t i = 0; i < small.size(); i++) ASSERT_EQ(small.data()[i], 0.0f) << i;
  // The activations' vectors start on a cache line whatever their size.
  for (size_t n : {1u, 3u, 17u, 768u, 100000u}) {
    verity::AlignedVector<float> v(n, 1.0f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << n;
    v.resize(n * 3);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << "after growing " << n;
  }
}

// A large buffer is zeroed on the load's threads (engine/zeroed_buffer.cc):
// every byte of a dirty buffer, whatever the split (sizes under, at and past
// the 8 MB where it splits, and not a multiple of 2 MB), and no byte beside it.
TEST(Mmap, LargeBuffersAreZeroedWholeOnSeveralThreads) {
  const char* saved = std::getenv("VERITY_THREADS");
  const std::string before = saved ? saved : "";
  setenv("VERITY_THREADS", "3", 1);
  long checked = 0;
  for (size_t bytes : {size_t{3} << 20, size_t{8} << 20, (size_t{9} << 20) + 64, size_t{24} << 20}) {
    std::vector<unsigned char> dirty(bytes + 64, 0xAB);
    verity::ZeroOnLoadThreads(dirty.data() + 32, bytes);
    ASSERT_EQ(std::count(dirty.begin() + 32, dirty.end() - 32, 0), static_cast<std::ptrdiff_t>(bytes)) << bytes;
    ASSERT_EQ(std::count(dirty.begin(), dirty.end(), 0xAB), 64) << "only the bytes asked for: " << bytes;
    checked += static_cast<long>(bytes);
  }
  saved ? setenv("VERITY_THREADS", before.c_str(), 1) : unsetenv("VERITY_THREADS");
  std::printf("zeroed buffers: %ld bytes read back as zeros on 3 threads\n", checked);
}

TEST(Mmap, SmallMatricesOfALargeModelSharePackedSlabs) {
  constexpr uintptr_t k2MB = uintptr_t{2} << 20;
  verity::Model m;
  m.UseWeightArena();
  auto* a = static_cast<unsigned char*>(m.Allocate(1000));
  auto* b = static_cast<unsigned char*>(m.Allocate(5000));
  auto* big = static_cast<unsigned char*>(m.Allocate(size_t{20} << 20));
  auto* c = static_cast<unsigned char*>(m.Allocate(64));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % k2MB, 0u) << "a slab starts on a huge page";
  EXPECT_EQ(b - a, 1024) << "packed at 64-byte steps";
  EXPECT_EQ(c - b, 5056) << "the big buffer went elsewhere";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % k2MB, 0u);
  for (int i = 0; i < 5000; i++) ASSERT_EQ(b[i], 0) << i;
  // A slab that cannot take the next buffer is left for a fresh one.
  unsigned char* last = c;
  for (int i = 0; i < 8; i++) last = static_cast<unsigned char*>(m.Allocate(size_t{15} << 20));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(last) % 64, 0u);
  verity::Model plain;
  auto* x = static_cast<unsigned char*>(plain.Allocate(1000));
  auto* y = static_cast<unsigned char*>(plain.Allocate(1000));
  EXPECT_NE(y - x, 1024) << "without the arena buffers are separate allocations";
}

TEST(Mmap, Llama2cMatricesAreCopiedAlignedAndTheNormsStayMapped) {
  // llama2.c's 28-byte header leaves every matrix at 28 mod 64: each is
  // copied once into 64-byte aligned storage (said in the notes); the norms
  // stay in the mapping, and the copied shared classifier serves lookups.
  auto m = LoadModel(Model("stories260K.bin"));
  ASSERT_TRUE(m.ok());
  ASSERT_EQ((*m)->mappings.size(), 1u);
  EXPECT_EQ((*m)->mappings[0]->size(), 1056540u);
  EXPECT_TRUE(InMapping(**m, (*m)->rms_final));
  for (const auto* w : Matrices(**m)) {
    EXPECT_FALSE(InMapping(**m, w->data)) << "an unaligned matrix was used in place";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 64, 0u);
  }
  EXPECT_EQ((*m)->classifier.data, (*m)->token_embedding) << "one resident table";
  ASSERT_FALSE((*m)->notes.empty());
  EXPECT_NE((*m)->notes[0].find("is not 32-byte aligned in the file; copied once"), std::string::npos)
      << (*m)->notes[0];
  // Converted dtypes own their matrices; the norms and the embedding stay in the file.
  auto q = LoadModel(Model("stories260K.bin"), DType::kQ8_0);
  ASSERT_TRUE(q.ok());
  for (const auto* w : Matrices(**q)) EXPECT_FALSE(InMapping(**q, w->data));
  EXPECT_TRUE(InMapping(**q, (*q)->token_embedding));
  EXPECT_TRUE(InMapping(**q, (*q)->layers[2].rms_ffn));
}

TEST(Mmap, AlignedF32MatricesPointIntoTheMapping) {
  // The same weights written by verity convert (a header padded to 64 bytes):
  // every matrix is 32-byte aligned in the file and used where it lies.
  const std::string dir = test::TempDir("aligned") + "/hf";
  auto c = Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (const auto* w : Matrices(**m)) EXPECT_TRUE(InMapping(**m, w->data)) << "a matrix was copied";
  EXPECT_TRUE((*m)->notes.empty());
}

TEST(Mmap, Bf16SafetensorsAreUsedInPlaceForBf16) {
  const std::string dir = test::TempDir("bf16") + "/hf";
  auto c = Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir + " --dtype bf16");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto m = LoadModel(dir, DType::kBF16);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (const auto* w : Matrices(**m))
    if (w != &(*m)->classifier) {
      EXPECT_TRUE(InMapping(**m, w->data)) << "a bf16 matrix was converted";
    }
  EXPECT_FALSE(InMapping(**m, (*m)->token_embedding)) << "bf16 norms and embedding become f32 copies";
  EXPECT_TRUE((*m)->notes.empty());
}

// Rewrites DIR/model.safetensors with its JSON header one byte longer, so
// every tensor's data starts one byte later: nothing is 4-byte aligned.
void MisalignSafetensors(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  std::string bytes = test::ReadFile(path);
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  std::string out = bytes.substr(0, 8) + bytes.substr(8, len) + " " + bytes.substr(8 + len);
  len += 1;
  for (int i = 0; i < 8; i++) out[i] = static_cast<char>(len >> (8 * i));
  test::WriteFile(path, out);
}

TEST(Mmap, UnalignedSafetensorsTensorsAreCopiedOnceWithANote) {
  const std::string dir = test::TempDir("unaligned") + "/hf";
  auto c = Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  {
    auto aligned = LoadModel(dir);
    ASSERT_TRUE(aligned.ok());
    EXPECT_TRUE((*aligned)->notes.empty());
    EXPECT_TRUE(InMapping(**aligned, (*aligned)->layers[0].wq.data));
  }
  MisalignSafetensors(dir);
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_FALSE((*m)->notes.empty());
  EXPECT_NE((*m)->notes[0].find("tensor model.embed_tokens.weight is not 4-byte aligned in the file; copied once"),
            std::string::npos)
      << (*m)->notes[0];
  EXPECT_FALSE(InMapping(**m, (*m)->layers[0].wq.data));
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*m)->layers[0].wq.data) % 4, 0u);
  // Same text as ever, with the note on stderr (stdout stays the text).
  auto g = Shell(VerityBin() + " generate --model " + dir + " --tokenizer " + Model("tok512.bin") +
                 " --steps 200 --temperature 0");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, test::ReadFile(Model("stories260K.greedy200.txt")));
  // Two lines however many tensors: the first named, the rest counted.
  EXPECT_NE(g.err.find("verity: note: " + dir + ": tensor model.embed_tokens.weight is not 4-byte aligned"),
            std::string::npos)
      << g.err;
  EXPECT_NE(g.err.find("verity: note: " + dir + ": 46 more unaligned tensors copied once (47 in all)\n"),
            std::string::npos)
      << g.err;
}

// A load converts a matrix's rows over the load's threads (base/host_parallel.h;
// VERITY_THREADS): the same bytes whatever the split. Matrices of 512 to 3000
// rows split into several ranges at 3 threads: f32 and bf16 sources, each
// converted dtype, an FFN width q8_0 pads (1000 -> 1024), and a llama2.c file
// whose unaligned f32 matrices are copied.
TEST(DType, ConvertedMatricesAreTheSameBytesOnOneThreadOrSeveral) {
  const std::string dir = test::TempDir("load-threads");
  const std::string config =
      R"({"dim":512,"hidden_dim":1000,"n_layers":2,"n_heads":8,"n_kv_heads":4,"vocab_size":3000,)"
      R"("seq_len":64,"shared_classifier":false})";
  for (const char* dtype : {"f32", "bf16"}) {
    auto r =
        Shell(VerityBin() + " synth --out " + dir + "/" + dtype + " --dtype " + dtype + " --config '" + config + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto r = Shell(VerityBin() + " synth --out " + dir + "/m.bin --config '" + config + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const char* saved = std::getenv("VERITY_THREADS");
  const std::string before = saved ? saved : "";
  auto load = [&](const std::string& path, DType t, const char* threads) {
    setenv("VERITY_THREADS", threads, 1);
    auto m = LoadModel(path, t);
    saved ? setenv("VERITY_THREADS", before.c_str(), 1) : unsetenv("VERITY_THREADS");
    return m;
  };
  int compared = 0;
  for (const std::string src : {"f32", "bf16", "m.bin"}) {
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
      auto one = load(dir + "/" + src, t, "1");
      auto three = load(dir + "/" + src, t, "3");
      ASSERT_TRUE(one.ok() && three.ok()) << src << " " << DTypeName(t);
      const auto a = Matrices(**one), b = Matrices(**three);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); i++, compared++) {
        ASSERT_EQ(a[i]->dtype, t);
        ASSERT_EQ(a[i]->bytes(), b[i]->bytes());
        ASSERT_EQ(std::memcmp(a[i]->data, b[i]->data, a[i]->bytes()), 0)
            << src << " as " << DTypeName(t) << ", matrix " << i << " (" << a[i]->rows << "x" << a[i]->cols << ")";
      }
      if (t == DType::kQ8_0) {
        EXPECT_EQ((*one)->layers[0].w1.rows, 1024) << "q8_0 pads the FFN width";
      }
    }
  }
  std::printf("load threads: %d matrices the same bytes loaded on 1 thread and on 3\n", compared);
}

TEST(DType, GenerateAndLogitsNameTheDtype) {
  for (const char* d : {"f32", "bf16", "q8_0"}) {
    auto g = Shell(VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " +
                   Model("tok512.bin") + " --steps 40 --temperature 0 --dtype " + d);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << d << ": " << g.out;
    EXPECT_NE(g.err.find(std::string("fast backend, ") + d + " weights"), std::string::npos) << g.err;
    const std::string out = test::TempDir("logits") + "/l.f32";
    auto l = Shell(VerityBin() + " logits --model " + Model("stories260K.bin") + " --ids '1 403' --out " + out +
                   " --dtype " + d);
    ASSERT_EQ(l.exit_code, 0) << l.err;
    EXPECT_NE(l.err.find(std::string(d) + " weights"), std::string::npos) << l.err;
    EXPECT_EQ(test::ReadFile(out).size(), 2u * 512 * 4);
  }
}

// How bf16 and q8_0 decode prefetch their weights (non-temporally, prefetcht0,
// or not) is a per-CPU speed choice (simd::StreamPrefetch); every way the
// logits are the same bits. A value that is none of nta, t0, off is named and
// ignored.
TEST(DType, StreamPrefetchChangesNoBit) {
  for (const char* d : {"bf16", "q8_0"}) {
    std::string logits[3];
    int k = 0;
    for (const char* mode : {"nta", "t0", "off"}) {
      const std::string out = test::TempDir("prefetch") + "/l.f32";
      auto l = Shell(std::string("VERITY_STREAM_PREFETCH=") + mode + " " + VerityBin() + " logits --model " +
                     Model("stories260K.bin") + " --ids '1 403 407 261 378 105 217 350' --out " + out +
                     " --backend fast --dtype " + d);
      ASSERT_EQ(l.exit_code, 0) << d << " " << mode << ": " << l.err;
      logits[k++] = test::ReadFile(out);
    }
    ASSERT_EQ(logits[0].size(), 8u * 512 * 4) << d;
    EXPECT_NE(logits[0].find_first_not_of('\0'), std::string::npos) << d;
    EXPECT_TRUE(logits[0] == logits[1]) << d << ": prefetcht0 changed the logits";
    EXPECT_TRUE(logits[0] == logits[2]) << d << ": prefetching changed the logits";
  }
  auto bad = Shell("VERITY_STREAM_PREFETCH=maybe " + VerityBin() + " logits --model " + Model("stories260K.bin") +
                   " --ids '1 403' --out " + test::TempDir("prefetch-bad") + "/l.f32 --backend fast --dtype q8_0");
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("VERITY_STREAM_PREFETCH=maybe is none of nta, t0, off: ignored"), std::string::npos)
      << bad.err;
}

// --reference-dtype same runs the reference backend on the candidate's own
// converted weights: q8_0 then differs from its reference only by the fast
// kernels' int16 rounding of x (mean KL ~1e-8 on stories260K, where against
// the f32 reference it is ~3e-4), so a KL below 1e-6 proves the reference
// really ran on the q8_0 weights. Both dtypes are named in the JSON.
TEST(DType, ReferenceDtypeSameJudgesTheKernelsAlone) {
  const std::string base = VerityBin() + " parity --model " + Model("stories260K.bin") + " --json --dtype q8_0";
  auto against_f32 = Shell(base);
  ASSERT_EQ(against_f32.exit_code, 0) << against_f32.err;
  auto f = nlohmann::json::parse(against_f32.out);
  EXPECT_EQ(f["dtype"], "q8_0");
  EXPECT_EQ(f["reference_dtype"], "f32");
  EXPECT_GT(f["worst"]["mean_kl"].get<double>(), 1e-5);
  auto same = Shell(base + " --reference-dtype same");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  auto j = nlohmann::json::parse(same.out);
  EXPECT_EQ(j["dtype"], "q8_0");
  EXPECT_EQ(j["reference_dtype"], "q8_0");
  EXPECT_EQ(j["worst"]["top1"].get<double>(), 1.0);
  EXPECT_LT(j["worst"]["mean_kl"].get<double>(), 1e-6) << same.out;
  EXPECT_GT(j["worst"]["mean_kl"].get<double>(), 0.0) << "int16 x: not bit-identical to the reference";

  auto bad = Shell(base + " --reference-dtype q4");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--reference-dtype q4: expected f32 or same"), std::string::npos) << bad.err;
  auto file = Shell(base + " --reference-dtype same --against " + Model("stories260K.ref-logits.bin"));
  EXPECT_NE(file.exit_code, 0);
  EXPECT_NE(file.err.find("cannot be combined with --against"), std::string::npos) << file.err;
}

}  // namespace
}  // namespace verity
