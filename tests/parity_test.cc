// verity parity speaks the protocol, proves bit identity by bytes, accepts a
// logits file from another implementation as the reference, and deepens on demand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace verity {
namespace {
using test::Model;
using test::Shell;
using test::VerityBin;

std::string Parity(const std::string& extra) { return VerityBin() + " parity --model " + Model("stories260K.bin") + " " + extra; }

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
  auto human = Shell(Parity(""));
  EXPECT_EQ(LastLine(human.out).rfind("parity: worst_top1=1.0000 worst_mean_kl=", 0), 0u) << human.out;
  EXPECT_NE(LastLine(human.out).find("verdict=PASS"), std::string::npos);
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
  auto ids = Shell(VerityBin() + " generate --model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin") +
                   " --steps 128 --temperature 0 --format ids --backend reference");
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

TEST(Parity, DeepModeAddsDepthsAndWindows) {
  auto r = Shell("VERITY_PARITY_MODE=deep " + Parity("--json"));
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["depths"].size(), 7u);
  EXPECT_EQ(j["depths"][0]["depth"], 1);
  EXPECT_EQ(j["depths"].back()["positions"], 16);
  auto bad = Shell(Parity("--depths 0,5"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--depths: 0 is below 1"), std::string::npos);
  auto beyond = Shell(Parity("--depths 600"));
  EXPECT_NE(beyond.err.find("--depths: 600 is outside [1, 512]"), std::string::npos) << beyond.err;
}

TEST(Sweep, ANormalBuildStaysAtZeroAcrossEveryStructuralParameter) {
  const std::string dir = test::TempDir("sweep");
  for (const char* args : {"--param layers --values 1,2,3,4,5,6", "--param heads --values 1,2,4", "--param kv_heads --values 1,2,4,8",
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
