// verity parity speaks the protocol, proves bit identity by bytes, accepts a
// logits file from another implementation as the reference, and deepens on demand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "verify/parity.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

std::string Parity(const std::string& extra) {
  return VerityBin() + " parity --model " + Model("stories260K.bin") + " " + extra;
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

TEST(Parity, FastVsReferenceOnStoriesSpeaksTheProtocol) {
  auto r = Shell(Parity("--json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "verity.parity/1");
  ASSERT_EQ(j["depths"].size(), 7u);
  EXPECT_EQ(j["depths"].back()["depth"], 512) << "the last depth is the end of the context";
  EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6);
  EXPECT_EQ(j["worst"]["top1"].get<double>(), 1.0);
  EXPECT_EQ(j["logits_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["ok"], true);
  EXPECT_NE(r.err.find("parity: worst_top1=1.0000"), std::string::npos) << "summary line on stderr in --json mode";
  EXPECT_EQ(j["mode"], "standard");
  EXPECT_EQ(j["window"], 8);
  EXPECT_EQ(j["tokens"], 512);
  for (const auto& d : j["depths"]) EXPECT_GE(d["positions"].get<int>(), 8) << d.dump();
  EXPECT_EQ(j["all_rows_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["nonfinite"], nlohmann::json::array());
  auto human = Shell(Parity(""));
  EXPECT_EQ(LastLine(human.out).rfind("parity: worst_top1=1.0000 worst_mean_kl=", 0), 0u) << human.out;
  EXPECT_NE(LastLine(human.out).find("verdict=PASS"), std::string::npos);
}

// --dtype D: the fast path on the D weights against the reference on the f32
// ones; the JSON names the dtype (f32 when not asked) and keeps every field.
TEST(Parity, DtypeIsNamedAndJudgedAgainstTheF32Reference) {
  auto plain = Shell(Parity("--json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto f32 = nlohmann::json::parse(plain.out);
  EXPECT_EQ(f32["dtype"], "f32");
  for (const char* d : {"bf16", "q8_0"}) {
    auto r = Shell(Parity(std::string("--json --dtype ") + d));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["dtype"], d);
    EXPECT_EQ(j["reference"], "reference-cpu");
    EXPECT_EQ(j["candidate"], "fast");
    for (const auto& [key, value] : f32.items()) EXPECT_TRUE(j.contains(key)) << d << " lacks " << key;
    EXPECT_EQ(j["tokens"], 512);
    EXPECT_GE(j["worst"]["top1"].get<double>(), 0.95) << d;
    EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 0.05) << d;
    EXPECT_GT(j["worst"]["mean_kl"].get<double>(), 1e-6) << d << ": the candidate ran on converted weights";
    EXPECT_EQ(j["ok"], true);
    EXPECT_NE(j["all_rows_sha256"], f32["all_rows_sha256"]);
    auto human = Shell(Parity(std::string("--dtype ") + d));
    EXPECT_NE(human.out.find(std::string("candidate fast (") + d + " weights) vs reference-cpu"), std::string::npos)
        << human.out;
  }
}

TEST(Parity, BitIdentityIsProvedByBytes) {
  const std::string dir = test::TempDir("bits");
  ASSERT_EQ(Shell(Parity("--dump " + dir + "/fast.f32")).exit_code, 0);
  auto same = Shell(Parity("--bit-identical-to " + dir + "/fast.f32"));
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_NE(same.out.find("bit identity: PROVED (byte-identical over 512 positions)"), std::string::npos) << same.out;
  // The reference path rounds differently from the fast one: close, but not the same bits.
  auto differ = Shell(Parity("--backend reference --bit-identical-to " + dir + "/fast.f32"));
  EXPECT_EQ(differ.exit_code, 1);
  EXPECT_NE(differ.out.find("bit identity: FAILED"), std::string::npos) << differ.out;
  EXPECT_NE(LastLine(differ.out).find("verdict=FAIL"), std::string::npos);
}

TEST(Parity, ALogitsFileFromAnotherImplementationIsTheReference) {
  const std::string dir = test::TempDir("against");
  // The reference's greedy ids, then its logits written by `verity logits` as another tool would.
  auto ids = Shell(VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " +
                   Model("tok512.bin") + " --steps 128 --temperature 0 --format ids --backend reference");
  ASSERT_EQ(ids.exit_code, 0);
  std::string all = "1 " + ids.out;
  all.pop_back();
  auto lg = Shell(VerityBin() + " logits --backend reference --model " + Model("stories260K.bin") + " --ids '" + all +
                  "' --out " + dir + "/ref.f32");
  ASSERT_EQ(lg.exit_code, 0) << lg.err;
  auto r = Shell(Parity("--against " + dir + "/ref.f32 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reference"], "file:" + dir + "/ref.f32");
  EXPECT_EQ(j["tokens"], 129);  // BOS + 128 generated: one row each
  EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6);
  // A truncated file is an error naming it.
  test::WriteFile(dir + "/bad.f32", "abc");
  auto bad = Shell(Parity("--against " + dir + "/bad.f32"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(dir + "/bad.f32: 3 bytes is not a whole number of rows"), std::string::npos) << bad.err;
}

// The evidence the ledger checks: the binary is the one `verity bench` names.
TEST(Parity, EvidenceNamesTheBuildAsBenchDoes) {
  auto r = Shell(Parity("--json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto b = Shell(VerityBin() + " bench --model " + Model("stories260K.bin") + " --steps 8");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto j = nlohmann::json::parse(r.out), bench = nlohmann::json::parse(b.out);
  ASSERT_TRUE(j["build"].is_object()) << r.out;
  EXPECT_EQ(j["build"]["id"], bench["build"]["id"]);
  EXPECT_EQ(j["build"]["artifact_sha256"], bench["build"]["artifact_sha256"]);
  EXPECT_EQ(j["build"]["artifact_sha256"].get<std::string>().size(), 64u);
}

// Deep is never thinner than standard (7 depths x 8): 14 depths x 16 at least,
// every one a full window, the deepest at the end of the context.
void ExpectDeep(const std::string& args, int window) {
  auto r = Shell("VERITY_PARITY_MODE=deep " + Parity("--json " + args));
  ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["mode"], "deep") << args;
  EXPECT_EQ(j["window"], window) << args;
  EXPECT_GE(j["depths"].size(), 14u) << args;
  EXPECT_EQ(j["depths"].back()["depth"], 512) << args;
  for (const auto& d : j["depths"])
    EXPECT_EQ(d["positions"].get<int>(), std::min(window, d["depth"].get<int>())) << args << " " << d.dump();
}

TEST(Parity, DeepModeAddsDepthsAndWindows) {
  ExpectDeep("", 16);
  auto r = Shell("VERITY_PARITY_MODE=deep " + Parity("--json"));
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["depths"][0]["positions"], 16) << "no default depth scores a partial window";
  auto bad = Shell(Parity("--depths 0,5"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--depths: 0 is below 1"), std::string::npos);
  auto beyond = Shell(Parity("--depths 600"));
  EXPECT_NE(beyond.err.find("--depths: 600 is outside [1, 512]"), std::string::npos) << beyond.err;
}

TEST(Parity, ExplicitFlagsCannotThinDeepMode) {
  ExpectDeep("--depths 64 --window 4", 16);
  ExpectDeep("--window 12", 24);
  auto r = Shell("VERITY_PARITY_MODE=deep " + Parity("--json --depths 64 --window 4"));
  auto j = nlohmann::json::parse(r.out);
  bool has64 = false;
  for (const auto& d : j["depths"]) has64 |= d["depth"] == 64;
  EXPECT_TRUE(has64) << "the user's depth is kept: " << r.out;
  // Standard mode keeps exactly what was asked for.
  auto s = nlohmann::json::parse(Shell(Parity("--json --depths 64 --window 4")).out);
  EXPECT_EQ(s["mode"], "standard");
  EXPECT_EQ(s["depths"].size(), 1u);
  EXPECT_EQ(s["window"], 4);
}

// all_rows_sha256 is the hash of every candidate row (what --dump writes), so
// a row no depth scores still changes it; logits_sha256 covers only the windows.
TEST(Parity, AllRowsHashCoversEveryRow) {
  const std::string dir = test::TempDir("allrows");
  std::string ids = "1";
  for (int i = 1; i < 31; i++) ids.append(" ").append(std::to_string(i * 37 % 500 + 2));
  test::WriteFile(dir + "/a.txt", ids + " 2");
  test::WriteFile(dir + "/b.txt", ids + " 3");  // only the last token (the last row) differs
  auto a = Shell(Parity("--json --depths 8 --tokens " + dir + "/a.txt --dump " + dir + "/a.f32"));
  auto b = Shell(Parity("--json --depths 8 --tokens " + dir + "/b.txt"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["tokens"], 32);
  auto dumped = Sha256File(dir + "/a.f32");
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(ja["all_rows_sha256"], dumped.value()) << "the all-rows hash is the hash of the dumped rows";
  EXPECT_EQ(ja["logits_sha256"], jb["logits_sha256"]) << "rows 0-7 are the same in both runs";
  EXPECT_NE(ja["all_rows_sha256"], jb["all_rows_sha256"]) << "row 31 differs and must change the all-rows hash";
}

// Rows of V logits with a clear winner each, for CompareLogits.
std::vector<float> Rows(int T, int V) {
  std::vector<float> r(static_cast<size_t>(T) * V);
  for (size_t i = 0; i < r.size(); i++) r[i] = static_cast<float>((i * 7919) % 13) * 0.25f;
  return r;
}

TEST(Parity, ANanLogitInTheCandidateFailsAndIsNamed) {
  const int T = 16, V = 8;
  std::vector<float> ref = Rows(T, V), got = ref;
  got[15 * V + 3] = std::nanf("");
  ParityOptions opt;
  opt.depths = {16};
  auto rep = CompareLogits(ref, got, V, opt);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_FALSE(rep->ok) << "std::max dropped the NaN KL";
  EXPECT_TRUE(std::isnan(rep->worst_mean_kl));
  const std::vector<std::string> want = {"depth 16: mean_kl", "depth 16: max_kl", "candidate logits: position 15"};
  EXPECT_EQ(rep->nonfinite, want);
  auto j = nlohmann::json::parse(rep->ToJson().dump());  // as printed: NaN is null, never a number
  EXPECT_TRUE(j["worst"]["mean_kl"].is_null()) << j.dump();
  EXPECT_TRUE(j["depths"][0]["mean_kl"].is_null());
  EXPECT_EQ(j["nonfinite"].size(), 3u);
  EXPECT_EQ(j["ok"], false);
}

TEST(Parity, ANonFiniteRowNoDepthScoresStillFails) {
  const int T = 16, V = 8;
  std::vector<float> ref = Rows(T, V), got = ref;
  got[2 * V] = INFINITY;  // row 2: outside the window [8, 16)
  ref[3 * V + 1] = std::nanf("");
  ParityOptions opt;
  opt.depths = {16};
  auto rep = CompareLogits(ref, got, V, opt);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->worst_mean_kl, 0.0) << "the scored window is clean";
  EXPECT_EQ(rep->nonfinite, (std::vector<std::string>{"candidate logits: position 2", "reference logits: position 3"}));
  EXPECT_FALSE(rep->ok);
}

// End to end: a reference logits file holding a NaN in the last window.
TEST(Parity, ANanInTheReferenceFileFailsTheCommand) {
  const std::string dir = test::TempDir("nanref");
  ASSERT_EQ(Shell(Parity("--dump " + dir + "/ref.f32")).exit_code, 0);
  std::string bytes = test::ReadFile(dir + "/ref.f32");
  const float nan = std::nanf("");
  std::memcpy(&bytes[(510 * 512 + 5) * 4], &nan, 4);  // row 510, not its argmax
  test::WriteFile(dir + "/ref.f32", bytes);
  auto r = Shell(Parity("--json --against " + dir + "/ref.f32"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_TRUE(j["worst"]["mean_kl"].is_null()) << r.out;
  EXPECT_EQ(j["nonfinite"][0], "depth 512: mean_kl") << r.out;
  auto human = Shell(Parity("--against " + dir + "/ref.f32"));
  EXPECT_NE(human.out.find("non-finite: depth 512: mean_kl"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("non-finite: reference logits: position 510"), std::string::npos) << human.out;
  EXPECT_NE(LastLine(human.out).find("verdict=FAIL"), std::string::npos) << human.out;
}

TEST(Sweep, ANormalBuildStaysAtZeroAcrossEveryStructuralParameter) {
  const std::string dir = test::TempDir("sweep");
  for (const char* args :
       {"--param layers --values 1,2,3,4,5,6", "--param heads --values 1,2,4", "--param kv_heads --values 1,2,4,8",
        "--param context --values 16,64,128", "--param experts --values 1,2,4"}) {
    auto r = Shell(VerityBin() + " sweep --dir " + dir + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out << r.err;
    EXPECT_NE(LastLine(r.out).find("threshold=none"), std::string::npos) << r.out;
    EXPECT_NE(LastLine(r.out).find("verdict=PASS"), std::string::npos);
  }
  auto tp = Shell(VerityBin() + " sweep --param tp --values 1,2");
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.err.find("not available in this build"), std::string::npos);
  auto wrong = Shell(VerityBin() + " sweep --param layers --values 1,2 --corruption kv-stride-masked");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("this verity is built without corruptions"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace verity
