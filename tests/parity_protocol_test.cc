// measure::ParseParity reads the evidence the ledger checks (build, mode,
// window, positions, all-rows hash) and never lets a NaN, infinity or null
// number through as a pass: it is named in `nonfinite` instead.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "measure/measure.h"
#include "tests/test_util.h"

namespace verity::measure {
namespace {

// A well-formed evidence object with every field the ledger checks.
nlohmann::json Full() {
  return nlohmann::json::parse(R"({"schema": "verity.parity/1", "reference": "reference-cpu", "mode": "standard",
    "tokens": 512, "window": 8,
    "depths": [{"depth": 256, "positions": 8, "top1": 1.0, "mean_kl": 0.001, "max_kl": 0.002},
               {"depth": 512, "positions": 8, "top1": 0.975, "mean_kl": 0.004, "max_kl": 0.03}],
    "worst": {"top1": 0.975, "mean_kl": 0.004},
    "logits_sha256": ")" + std::string(64, 'b') +
                               R"(", "all_rows_sha256": ")" + std::string(64, 'c') + R"(",
    "nonfinite": [], "build": {"id": "abc123", "artifact_sha256": ")" +
                               std::string(64, 'a') + R"("}, "ok": true})");
}

Result<ParityEvidence> Parse(const std::string& out, int exit_code = 0) {
  CommandOutput run;
  run.exit_code = exit_code;
  run.out = out;
  return ParseParity(run, "head parity command");
}

TEST(ParityProtocol, ReadsBuildModeWindowPositionsAndAllRowsHash) {
  auto p = Parse(Full().dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->build_id, "abc123");
  EXPECT_EQ(p->artifact_sha256, std::string(64, 'a'));
  EXPECT_EQ(p->mode, "standard");
  EXPECT_EQ(p->window, 8);
  EXPECT_EQ(p->tokens, 512);
  EXPECT_EQ(p->all_rows_sha256, std::string(64, 'c'));
  EXPECT_EQ(p->logits_sha256, std::string(64, 'b'));
  ASSERT_EQ(p->depths.size(), 2u);
  EXPECT_EQ(p->depths[1].depth, 512);
  EXPECT_EQ(p->depths[1].positions, 8);
  EXPECT_EQ(p->depths[1].max_kl, 0.03);
  EXPECT_EQ(p->worst_top1, 0.975);
  EXPECT_EQ(p->worst_mean_kl, 0.004);
  EXPECT_TRUE(p->nonfinite.empty());
  EXPECT_TRUE(p->ok);
}

TEST(ParityProtocol, MissingOptionalEvidenceIsEmptyNotAnError) {
  auto j = Full();
  for (const char* k : {"build", "mode", "window", "tokens", "all_rows_sha256", "nonfinite"}) j.erase(k);
  for (auto& d : j["depths"]) d.erase("positions");
  auto p = Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->build_id, "");
  EXPECT_EQ(p->artifact_sha256, "");
  EXPECT_EQ(p->mode, "");
  EXPECT_EQ(p->window, 0);
  EXPECT_EQ(p->tokens, 0);
  EXPECT_EQ(p->all_rows_sha256, "");
  EXPECT_EQ(p->depths[0].positions, 0);
}

TEST(ParityProtocol, NullKlIsRecordedAsNonFiniteAndNeverPasses) {
  auto j = Full();
  j["depths"][0]["mean_kl"] = nullptr;  // how nlohmann prints a NaN
  j["depths"][1]["max_kl"] = nullptr;
  auto p = Parse(j.dump());
  ASSERT_TRUE(p.ok()) << "a null number is evidence of a FAIL, not a parse error: " << p.status().message();
  EXPECT_EQ(p->nonfinite, (std::vector<std::string>{"depths[0].mean_kl", "depths[1].max_kl"}));
  EXPECT_TRUE(std::isnan(p->worst_mean_kl)) << "the NaN was dropped: worst_mean_kl=" << p->worst_mean_kl;
  EXPECT_FALSE(p->worst_mean_kl <= 0.05) << "a threshold comparison must not pass it";
  EXPECT_TRUE(std::isnan(p->depths[1].max_kl));
}

TEST(ParityProtocol, NanInTheLastDepthIsNotDroppedByTheWorstOf) {
  // std::max(0.004, NaN) returns 0.004: the NaN must survive whichever depth holds it.
  auto j = Full();
  j["depths"][1]["mean_kl"] = nullptr;
  j["depths"][1]["top1"] = nullptr;
  auto p = Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(std::isnan(p->worst_mean_kl));
  EXPECT_TRUE(std::isnan(p->worst_top1));
  EXPECT_EQ(p->nonfinite, (std::vector<std::string>{"depths[1].top1", "depths[1].mean_kl"}));
}

TEST(ParityProtocol, NullWorstIsNonFiniteAndOverflowIsNoEvidence) {
  auto j = Full();
  j["worst"]["mean_kl"] = nullptr;  // worst is recomputed, but a null there still condemns the report
  auto p = Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->nonfinite, (std::vector<std::string>{"worst.mean_kl"}));
  // nlohmann refuses a number that overflows to infinity: no evidence at all.
  std::string out = Full().dump();
  const std::string kl = "\"mean_kl\":0.001";
  out.replace(out.find(kl), kl.size(), "\"mean_kl\":1e999");
  EXPECT_FALSE(Parse(out).ok());
}

TEST(ParityProtocol, TheProducersOwnNonFiniteListIsKept) {
  auto j = Full();
  j["nonfinite"] = {"candidate logits: position 3"};  // a NaN row no depth scored
  auto p = Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->nonfinite, (std::vector<std::string>{"candidate logits: position 3"}));
  j["nonfinite"] = "none";
  auto bad = Parse(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nonfinite that is not a list of strings"), std::string::npos);
}

TEST(ParityProtocol, BadModeIsAnErrorNamingIt) {
  auto j = Full();
  j["mode"] = "quick";
  auto p = Parse(j.dump());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("head parity command printed mode \"quick\""), std::string::npos)
      << p.status().message();
  j["mode"] = "deep";
  ASSERT_TRUE(Parse(j.dump()).ok());
  EXPECT_EQ(Parse(j.dump())->mode, "deep");
}

TEST(ParityProtocol, MalformedEvidenceFieldsAreErrors) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {{"build", {{"id", 7}}, "build without string id / artifact_sha256"},
                        {"all_rows_sha256", "xyz", "all_rows_sha256 that is not 64 hex"},
                        {"all_rows_sha256", std::string(64, 'g'), "all_rows_sha256 that is not 64 hex"},
                        {"window", "8", "\"window\": \"8\""},
                        {"tokens", 1.5, "\"tokens\": 1.5"}};
  for (const auto& c : cases) {
    auto j = Full();
    j[c.field] = c.value;
    auto p = Parse(j.dump());
    ASSERT_FALSE(p.ok()) << c.field;
    EXPECT_NE(p.status().message().find(c.message), std::string::npos) << p.status().message();
  }
  auto j = Full();
  j["depths"][0]["positions"] = "eight";
  auto p = Parse(j.dump());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("depths[0] printed \"positions\""), std::string::npos) << p.status().message();
}

TEST(ParityProtocol, StructurallyMissingNumbersStayErrors) {
  auto j = Full();
  j["depths"][1].erase("mean_kl");
  auto p = Parse(j.dump());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("lacks depth/top1/mean_kl numbers (depths[1])"), std::string::npos)
      << p.status().message();
  j = Full();
  j["depths"][0]["top1"] = "1.0";
  EXPECT_FALSE(Parse(j.dump()).ok()) << "a string is not a number";
  // Bare NaN is not JSON: no evidence at all.
  std::string out = Full().dump();
  out.replace(out.find("0.004"), 5, "NaN");
  EXPECT_FALSE(Parse(out).ok());
}

TEST(ParityProtocol, AFailingExitStillCarriesItsEvidence) {
  auto j = Full();
  j["ok"] = false;
  auto p = Parse(j.dump(), 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->exit_code, 1);
  EXPECT_FALSE(p->ok);
  EXPECT_EQ(p->build_id, "abc123");
}

// The fake parity tool the ledger tests script evidence with: its defaults
// parse, and bind to fake_bench's defaults (build "fake-build", artifact 64 'a').
Result<ParityEvidence> Fake(const std::string& args, bool deep = false) {
  std::string bin = test::VerityBin();
  bin = bin.substr(0, bin.rfind("/cli/")) + "/tests/fake_parity";  // built with every test tool
  std::map<std::string, std::string> env;
  if (deep) env["VERITY_PARITY_MODE"] = "deep";
  return ParseParity(RunCommand(bin + " " + args, 30, env), "fake parity");
}

TEST(ParityProtocol, FakeParityDefaultsAreFullEvidence) {
  auto p = Fake("");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->build_id, "fake-build");
  EXPECT_EQ(p->artifact_sha256, std::string(64, 'a'));
  EXPECT_EQ(p->mode, "standard");
  EXPECT_EQ(p->window, 8);
  EXPECT_EQ(p->tokens, 512);
  ASSERT_EQ(p->depths.size(), 7u);
  EXPECT_EQ(p->depths.back().depth, 512);
  for (const auto& d : p->depths) EXPECT_EQ(d.positions, 8);
  EXPECT_EQ(p->all_rows_sha256, std::string(64, 'c'));
  EXPECT_EQ(p->logits_sha256, std::string(64, 'b'));
  EXPECT_TRUE(p->nonfinite.empty());
  EXPECT_TRUE(p->ok);
  auto deep = Fake("--deep-top1 0.5", true);
  ASSERT_TRUE(deep.ok()) << deep.status().message();
  EXPECT_EQ(deep->mode, "deep");
  EXPECT_EQ(deep->window, 16);
  EXPECT_EQ(deep->depths.size(), 14u);
  EXPECT_EQ(deep->worst_top1, 0.5);
}

TEST(ParityProtocol, FakeParityFlagsScriptTheEvidence) {
  auto p = Fake("--depths 3 --window 4 --positions 2 --tokens 100 --deepest 90 --build b1 --artifact " +
                std::string(64, 'e') + " --all-sha " + std::string(64, 'f') + " --kl 0.01");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->depths.size(), 3u);
  EXPECT_EQ(p->depths.back().depth, 90);
  EXPECT_EQ(p->depths[0].positions, 2);
  EXPECT_EQ(p->window, 4);
  EXPECT_EQ(p->tokens, 100);
  EXPECT_EQ(p->build_id, "b1");
  EXPECT_EQ(p->artifact_sha256, std::string(64, 'e'));
  EXPECT_EQ(p->all_rows_sha256, std::string(64, 'f'));
  EXPECT_EQ(p->worst_mean_kl, 0.01);
  auto deep = Fake("--deep-depths 3 --deep-window 5 --mode standard", true);
  ASSERT_TRUE(deep.ok()) << deep.status().message();
  EXPECT_EQ(deep->mode, "standard") << "--mode forces the stated mode";
  EXPECT_EQ(deep->window, 5);
  EXPECT_EQ(deep->depths.size(), 3u);
  auto bare = Fake("--no-build");
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(bare->build_id, "");
  // --nan: a producer that dropped its NaN still says ok; the parser names it.
  auto nan = Fake("--nan");
  ASSERT_TRUE(nan.ok()) << nan.status().message();
  EXPECT_TRUE(nan->ok);
  EXPECT_EQ(nan->nonfinite, (std::vector<std::string>{"depths[1].mean_kl"}));
  EXPECT_TRUE(std::isnan(nan->worst_mean_kl));
  EXPECT_FALSE(Fake("--mode quick").ok());
}

}  // namespace
}  // namespace verity::measure
