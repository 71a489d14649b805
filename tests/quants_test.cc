// llama.cpp's block quantizations (formats/quants, docs/gguf.md "Block
// quantizations"): every tensor of files llama.cpp's own quantizer writes,
// dequantized by verity and by gguf-py (llama.cpp's NumPy package, extracted
// from tests/npm's source bundle), bit for bit, type by type; and the files
// verity must refuse, each refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "formats/gguf.h"
#include "formats/quants.h"
#include "formats/safetensors.h"
#include "tests/peer_test_util.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Shell;
using test::VerityBin;

// The files come from test::PeerSynthF32Gguf: rows of 256 multiples, so
// llama.cpp's k-quant files hold k-quants. Its vocabulary (512) and
// classifier are big enough for llama.cpp's rules to pick Q6_K, Q5_K, ...

// llama_peer quantize's names; together their files hold all ten block types.
const char* const kFileTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"};

std::string RunOk(const std::string& command) {
  auto r = Shell(command);
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
  return r.out;
}

std::string Quantize(const std::string& f32, const std::string& type) {
  const std::string out = f32.substr(0, f32.rfind('.')) + "." + type + ".gguf";  // synth.q4_0.gguf
  RunOk(std::string(LLAMA_PEER_BIN) + " quantize " + f32 + " " + out + " " + type);
  return out;
}

struct Parsed {
  std::string bytes;
  gguf::File file;
};

Parsed Parse(const std::string& path) {
  Parsed p;
  p.bytes = test::ReadFile(path);
  auto f = gguf::Parse(reinterpret_cast<const unsigned char*>(p.bytes.data()), p.bytes.size(), path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (f.ok()) p.file = std::move(*f);
  return p;
}

// verity's f32 values of tensor `t`: formats/quants for a block type, after
// the checks a load makes; exact widening for F32/F16/BF16.
Result<std::vector<float>> VerityValues(const Parsed& p, const gguf::TensorInfo& t, const std::string& where) {
  const auto* data = reinterpret_cast<const unsigned char*>(p.bytes.data()) + p.file.data_start + t.offset;
  std::vector<float> out(t.elements());
  const TensorDType plain = t.type == gguf::kF32   ? TensorDType::kF32
                            : t.type == gguf::kF16 ? TensorDType::kF16
                                                   : TensorDType::kBF16;
  if (t.type == gguf::kF32 || t.type == gguf::kF16 || t.type == gguf::kBF16) {
    ToF32(plain, data, static_cast<int64_t>(t.elements()), out.data());
    return out;
  }
  // Any other type goes to formats/quants, which refuses what it does not read.
  const uint64_t row = t.dims.empty() ? 1 : t.dims[0], rows = row ? t.elements() / row : 0;
  VERITY_RETURN_IF_ERROR(quants::CheckTensor(t.type, row, rows, t.bytes, where));
  const int64_t blocks = static_cast<int64_t>(t.elements()) / quants::FindLayout(t.type)->block_elems;
  VERITY_RETURN_IF_ERROR(quants::CheckScales(t.type, data, blocks, where));
  VERITY_RETURN_IF_ERROR(quants::Dequantize(t.type, data, blocks, out.data(), where));
  return out;
}

struct TypeTally {
  int tensors = 0;
  uint64_t values = 0, differing = 0;
};

// Compares one file's every tensor; adds to `tally` by type name.
void CompareFile(const std::string& path, std::map<std::string, TypeTally>* tally) {
  const std::string out = test::TempDir("gguf-py");
  RunOk(std::string("/usr/bin/python3 ") + VERITY_SOURCE_DIR "/tests/conformance/gguf_py_dequant.py " GGUF_PY_DIR " " +
        path + " " + out);
  const Parsed p = Parse(path);
  std::istringstream index(test::ReadFile(out + "/index.tsv"));
  size_t k = 0;
  for (std::string line; std::getline(index, line); k++) {
    std::string num, name, type;
    std::istringstream fields(line);
    std::getline(fields, num, '\t'), std::getline(fields, name, '\t'), std::getline(fields, type, '\t');
    ASSERT_LT(k, p.file.tensors.size()) << path << ": gguf-py lists more tensors";
    const gguf::TensorInfo& t = p.file.tensors[k];
    ASSERT_EQ(name, t.name);
    ASSERT_EQ(type, gguf::TensorTypeName(t.type)) << t.name;
    auto mine = VerityValues(p, t, path + ": tensor " + t.name);
    ASSERT_TRUE(mine.ok()) << mine.status().message();
    const std::string theirs = test::ReadFile(out + "/" + num + ".f32");
    ASSERT_EQ(theirs.size(), mine->size() * 4) << t.name;
    TypeTally& tt = (*tally)[type];
    tt.tensors++;
    tt.values += mine->size();
    for (size_t i = 0; i < mine->size(); i++) {
      uint32_t a, b;
      std::memcpy(&a, &(*mine)[i], 4);
      std::memcpy(&b, theirs.data() + 4 * i, 4);
      if (a != b && tt.differing++ < 3)
        ADD_FAILURE() << path << ": tensor " << t.name << " (" << type << ") value " << i << ": verity " << (*mine)[i]
                      << " (0x" << std::hex << a << "), gguf-py 0x" << b << std::dec;
    }
  }
  EXPECT_EQ(k, p.file.tensors.size()) << path << ": gguf-py read fewer tensors";
  std::map<std::string, int> mix;  // which types llama.cpp chose, per file
  for (const gguf::TensorInfo& t : p.file.tensors) mix[gguf::TensorTypeName(t.type)]++;
  std::string line;
  for (const auto& [type, n] : mix) line += " " + type + " x" + std::to_string(n);
  std::printf("file %s:%s\n", path.substr(path.rfind('/') + 1).c_str(), line.c_str());
}

TEST(Quants, EveryTensorOfLlamaCppsFilesIsBitIdenticalToGgufPy) {
  REQUIRE_PEER();
  const std::string f32 = test::PeerSynthF32Gguf(test::TempDir("quants"));
  std::map<std::string, TypeTally> tally;
  for (const char* type : kFileTypes) CompareFile(Quantize(f32, type), &tally);
  // stories260K's rows of 64 (172 in ffn_down) are too short for k-quants:
  // llama.cpp falls back per tensor (to Q5_0, Q8_0, F16, ...), and those
  // tensors must match too.
  const std::string stories = test::TempDir("stories") + "/stories260K.gguf";
  RunOk(VerityBin() + " convert --to gguf --model " + test::Model("stories260K.bin") + " --out " + stories +
        " --dtype f32");
  for (const char* type : {"q4_0", "q4_k_m"}) CompareFile(Quantize(stories, type), &tally);
  int tensors = 0;
  uint64_t values = 0;
  for (const auto& [type, t] : tally) {
    std::printf(
        "dequant %s: %d tensors, %llu values, %s\n", type.c_str(), t.tensors, static_cast<unsigned long long>(t.values),
        t.differing ? ("DIFFERING in " + std::to_string(t.differing) + " values").c_str() : "bit-identical to gguf-py");
    EXPECT_EQ(t.differing, 0u) << type;
    tensors += t.tensors, values += t.values;
  }
  for (const char* block : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"})
    EXPECT_GT(tally[block].tensors, 0) << block << " was not exercised by any file";
  std::printf("dequant: %zu files, %zu types, %d tensors, %llu values compared with gguf-py\n",
              std::size(kFileTypes) + 2, tally.size(), tensors, static_cast<unsigned long long>(values));
}

// Byte offset of tensor `name`'s dims[0] in the header (the u64 after its
// name and n_dims); its type follows the dims.
size_t DimsAt(const std::string& bytes, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  return at + key.size() + 4;
}

// llama.cpp's Q4_K_M file of the synth, and the tensor a load checks first
// (token_embd.weight, Q4_K there), to patch.
struct Q4KM {
  std::string dir, path;
  Parsed p;
  const gguf::TensorInfo* victim = nullptr;
};

Q4KM MakeQ4KM() {
  Q4KM q;
  q.dir = test::TempDir("q4km");
  q.path = Quantize(test::PeerSynthF32Gguf(q.dir), "q4_k_m");
  q.p = Parse(q.path);
  q.victim = q.p.file.FindTensor("token_embd.weight");
  EXPECT_TRUE(q.victim && q.victim->type == quants::kQ4_K) << "llama.cpp's Q4_K_M token_embd.weight is not Q4_K";
  return q;
}

// A copy of the Q4_K_M file with `patch` applied to its bytes.
std::string PatchedCopy(const Q4KM& q, const std::string& tag, const std::function<void(std::string&)>& patch) {
  std::string b = q.p.bytes;
  patch(b);
  const std::string out = q.dir + "/" + tag + ".gguf";
  test::WriteFile(out, b);
  return out;
}

// `verity generate` on `path` exits 1 with every needle in its error.
void ExpectLoadRefused(const std::string& path, const std::vector<std::string>& needles) {
  auto r =
      Shell(VerityBin() + " generate --model " + path + " --tokenizer " + test::Model("tok512.bin") + " --steps 2");
  EXPECT_EQ(r.exit_code, 1) << path << "\n" << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << "missing \"" << n << "\" in: " << r.err;
}

TEST(Quants, LlamaCppsQ4_K_MFileIsReadAndRunByTheEngine) {
  REQUIRE_PEER();
  const Q4KM q = MakeQ4KM();
  ASSERT_TRUE(q.victim);
  // Every tensor passes the checks a load makes and dequantizes.
  for (const gguf::TensorInfo& t : q.p.file.tensors) {
    auto v = VerityValues(q.p, t, q.path + ": tensor " + t.name);
    EXPECT_TRUE(v.ok()) << v.status().message();
  }
  // The engine runs it (its logits, and the refusals where it cannot:
  // quant_engine_test).
  auto r = Shell(VerityBin() + " generate --model " + q.path + " --tokenizer " + test::Model("tok512.bin") +
                 " --steps 4 --backend fast");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A block's NaN scale is a load error naming the file, tensor, block and
// value (quants::CheckScales at load), not NaN logits.
TEST(Quants, ANaNScaleInLlamaCppsFileIsALoadErrorNamingTheBlock) {
  REQUIRE_PEER();
  const Q4KM q = MakeQ4KM();
  ASSERT_TRUE(q.victim);
  const size_t at = q.p.file.data_start + q.victim->offset + 144;  // block 1's d
  const std::string path = PatchedCopy(q, "q4k-nan", [&](std::string& b) { b[at] = 0x00, b[at + 1] = 0x7e; });
  ExpectLoadRefused(path, {path + ": tensor token_embd.weight: type Q4_K: block 1 has a scale of NaN"});
}

// The I-quants, the ternary types and MXFP4, patched into token_embd.weight's
// type (each takes no more bytes than its Q4_K data, so the file stays whole):
// the reader parses the file, the dequantizer and a load refuse it by name.
TEST(Quants, IQuantsTernaryAndMxfp4AreRefusedByName) {
  REQUIRE_PEER();
  const Q4KM q = MakeQ4KM();
  ASSERT_TRUE(q.victim);
  const size_t type_at = DimsAt(q.p.bytes, q.victim->name) + 8 * q.victim->dims.size();
  int refused = 0;
  for (uint32_t type : {16u, 17u, 18u, 19u, 20u, 21u, 22u, 23u, 29u, 34u, 35u, 39u}) {
    const std::string name = gguf::TensorTypeName(type);
    const std::string path = PatchedCopy(q, name, [&](std::string& b) { std::memcpy(&b[type_at], &type, 4); });
    const Parsed p = Parse(path);
    const gguf::TensorInfo* t = p.file.FindTensor("token_embd.weight");
    ASSERT_TRUE(t && t->type == type) << path;
    const std::string where = path + ": tensor token_embd.weight";
    auto v = VerityValues(p, *t, where);
    ASSERT_FALSE(v.ok()) << name << " dequantized";
    EXPECT_NE(v.status().message().find(where + " has type " + name + ", "), std::string::npos) << v.status().message();
    EXPECT_NE(v.status().message().find(quants::RefusalReason(type)), std::string::npos) << v.status().message();
    ExpectLoadRefused(path,
                      {where + " has type " + name + ", which verity does not load (" + quants::RefusalReason(type)});
    refused++;
  }
  std::printf("refused by name: %d types (I-quants, TQ1_0, TQ2_0, MXFP4)\n", refused);
}

// A Q4_K row must be whole 256-weight super-blocks: token_embd.weight's row
// (256) patched to 128, with twice the rows so the byte size is unchanged.
TEST(Quants, Q4_KRowThatIsNotAMultipleOf256IsNamed) {
  REQUIRE_PEER();
  const Q4KM q = MakeQ4KM();
  ASSERT_TRUE(q.victim);
  ASSERT_EQ(q.victim->dims.size(), 2u);
  const size_t dims_at = DimsAt(q.p.bytes, q.victim->name);
  const std::string path = PatchedCopy(q, "q4k-row128", [&](std::string& b) {
    const uint64_t dims[2] = {q.victim->dims[0] / 2, q.victim->dims[1] * 2};
    std::memcpy(&b[dims_at], dims, 16);
  });
  const std::string message = path +
                              ": tensor token_embd.weight: type Q4_K stores blocks of 256 but the innermost "
                              "dimension is " +
                              std::to_string(q.victim->dims[0] / 2);
  const std::string bytes = test::ReadFile(path);
  auto f = gguf::Parse(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), message);
  ExpectLoadRefused(path, {message});
  // The dequantizer's own check says the same of such a tensor.
  const Status st = quants::CheckTensor(quants::kQ4_K, 128, 512, 512 / 2 * 144, "x.gguf: tensor t");
  EXPECT_EQ(st.message(),
            "x.gguf: tensor t: type Q4_K needs rows that are a multiple of 256 weights, but its row "
            "length (innermost dimension) is 128");
}

// A block's f16 scale that is NaN or infinite is named with the block, as
// llama.cpp's row validation refuses it; sizes that disagree are named too.
TEST(Quants, NonFiniteScalesAndWrongSizesAreNamed) {
  std::vector<unsigned char> blocks(3 * 144, 0);
  const uint16_t nan = 0x7e00, inf = 0xfc00;
  std::memcpy(&blocks[2 * 144 + 2], &nan, 2);  // block 2's dmin
  Status st = quants::CheckScales(quants::kQ4_K, blocks.data(), 3, "x.gguf: tensor t");
  EXPECT_EQ(st.message(), "x.gguf: tensor t: type Q4_K: block 2 has a min scale of NaN");
  std::vector<unsigned char> q6(2 * 210, 0);
  std::memcpy(&q6[210 + 208], &inf, 2);  // block 1's d, at the end of a Q6_K block
  st = quants::CheckScales(quants::kQ6_K, q6.data(), 2, "x.gguf: tensor t");
  EXPECT_EQ(st.message(), "x.gguf: tensor t: type Q6_K: block 1 has a scale of -inf");
  st = quants::CheckTensor(quants::kQ5_0, 64, 3, 3 * 2 * 22 + 1, "x.gguf: tensor t");
  EXPECT_EQ(st.message(), "x.gguf: tensor t: type Q5_0: 3 rows x 2 blocks x 22 bytes is not its size, 133 bytes");
  EXPECT_TRUE(quants::CheckTensor(quants::kQ5_0, 64, 3, 3 * 2 * 22, "x").ok());
}

// The layouts agree with the GGUF reader's type table, and the bits per
// weight are the published ones (4.5 for Q4_0, 4.5 for Q4_K, 6.5625 for Q6_K, ...).
TEST(Quants, LayoutsAgreeWithTheReadersTypeTable) {
  const std::map<uint32_t, double> bpw = {{2, 4.5},    {3, 5.0},     {6, 5.5},  {7, 6.0},  {8, 8.5},
                                          {10, 2.625}, {11, 3.4375}, {12, 4.5}, {13, 5.5}, {14, 6.5625}};
  for (const auto& [type, bits] : bpw) {
    const quants::Layout* l = quants::FindLayout(type);
    ASSERT_TRUE(l) << type;
    int64_t elems = 0, bytes = 0;
    ASSERT_TRUE(gguf::TypeTraits(type, &elems, &bytes));
    EXPECT_EQ(l->block_elems, elems) << l->name;
    EXPECT_EQ(l->block_bytes, bytes) << l->name;
    EXPECT_EQ(l->row_multiple, elems) << l->name;
    EXPECT_EQ(std::string(l->name), gguf::TensorTypeName(type));
    EXPECT_EQ(8.0 * static_cast<double>(bytes) / static_cast<double>(elems), bits) << l->name;
    EXPECT_EQ(quants::RefusalReason(type), "");
  }
  for (uint32_t type : {0u, 1u, 9u, 15u, 16u, 23u, 30u, 34u, 39u, 99u}) {
    EXPECT_EQ(quants::FindLayout(type), nullptr) << type;
    EXPECT_NE(quants::RefusalReason(type), "") << type;
  }
}

// Hand-built blocks read back as their layout says, so a layout error that
// gguf-py shared could not hide: Q4_0 with d = 0.5 and nibbles j (low) and
// 15 - j (high); Q4_K with sub-block scales 1..8 and mins 0.
TEST(Quants, HandBuiltBlocksReadAsTheirLayoutSays) {
  unsigned char q40[18];
  const uint16_t half = 0x3800;  // 0.5
  std::memcpy(q40, &half, 2);
  for (int j = 0; j < 16; j++) q40[2 + j] = static_cast<unsigned char>(j | ((15 - j) << 4));
  float y[256];
  ASSERT_TRUE(quants::Dequantize(quants::kQ4_0, q40, 1, y, "q40").ok());
  for (int j = 0; j < 16; j++) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j)) << j;
  }
  unsigned char q4k[144] = {};
  const uint16_t one = 0x3c00;
  std::memcpy(q4k, &one, 2);  // d = 1, dmin = 0
  // Scales 1..4 in bytes 0..3's low 6 bits; 5..8 in bytes 8..11's low nibbles.
  for (int j = 0; j < 4; j++)
    q4k[4 + j] = static_cast<unsigned char>(j + 1), q4k[12 + j] = static_cast<unsigned char>(j + 5);
  for (int i = 0; i < 128; i++) q4k[16 + i] = 0x21;  // low nibble 1, high nibble 2
  ASSERT_TRUE(quants::Dequantize(quants::kQ4_K, q4k, 1, y, "q4k").ok());
  for (int e = 0; e < 256; e++) {
    const int sub = e / 32, q = (e % 64) < 32 ? 1 : 2;
    EXPECT_EQ(y[e], static_cast<float>((sub + 1) * q)) << e;
  }
}

}  // namespace
}  // namespace verity
