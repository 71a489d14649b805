// `verity adapt`: another engine's text output as a bench record. The
// extraction itself (each metric matched exactly once, a decimal number, a
// named error otherwise), and the command end to end on a script that prints
// as llama2.c's run does (the story on stdout, `achieved tok/s` on stderr).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "measure/text_adapter.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using measure::ExtractMetric;
using measure::ParseTextMetric;

const char* kRunLine = "decode_tok_s=achieved tok/s: ([0-9.]+)";

TEST(TextAdapter, TheNumberOfTheOneMatch) {
  auto m = ParseTextMetric(kRunLine);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "decode_tok_s");
  auto v = ExtractMetric("Once upon a time\nachieved tok/s: 51.250000\n", *m, "run");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(*v, 51.25);
}

TEST(TextAdapter, AbsenceTwoMatchesAndNonNumbersAreNamedErrors) {
  auto m = ParseTextMetric(kRunLine);
  ASSERT_TRUE(m.ok());
  struct Bad {
    std::string text, needle;
  };
  const Bad bads[] = {{"no speed here\n", "matched nothing in: 'no speed here'"},
                      {"achieved tok/s: 1\nachieved tok/s: 2\n", "matched more than once"},
                      {"achieved tok/s: 1.2.3\n", "captured '1.2.3', not a positive finite number"},
                      {"achieved tok/s: 0\n", "captured '0'"},
                      {"achieved tok/s: .\n", "captured '.'"}};
  for (const auto& b : bads) {
    auto v = ExtractMetric(b.text, *m, "run");
    ASSERT_FALSE(v.ok()) << b.text;
    EXPECT_NE(v.status().message().find(b.needle), std::string::npos) << v.status().message();
    EXPECT_NE(v.status().message().find("metric decode_tok_s"), std::string::npos) << v.status().message();
  }
  // Hex and infinity are not decimal numbers, whatever strtod would say.
  auto any = ParseTextMetric("x_tok_s=v=(\\S+)");
  ASSERT_TRUE(any.ok());
  for (const char* text : {"v=0x10", "v=inf", "v=nan", "v=1e999"})
    EXPECT_FALSE(ExtractMetric(text, *any, "run").ok()) << text;
}

TEST(TextAdapter, TheFlagIsCheckedBeforeAnythingRuns) {
  for (const char* bad : {"decode_tok_s", "=x ([0-9]+)", "de code=([0-9]+)", "decode_tok_s=no group", "d=([0-9"}) {
    auto m = ParseTextMetric(bad);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) EXPECT_NE(m.status().message().find(std::string("--metric '") + bad + "'"), std::string::npos);
  }
}

TEST(TextAdapter, VerityAdaptPrintsTheRecordOfALlama2cStyleRun) {
  const std::string dir = test::TempDir("adapt");
  const std::string run = dir + "/run";
  ASSERT_EQ(
      test::Shell("printf '#!/bin/sh\\necho \"Once upon a time\"\\necho \"achieved tok/s: 51.250000\" >&2\\n' > " +
                  run + " && chmod +x " + run)
          .exit_code,
      0);
  const std::string adapt = test::VerityBin() + " adapt --metric '" + kRunLine + "' -- ";
  auto r = test::Shell(adapt + run + " " + dir + "/stories260K.bin -t 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "verity.bench/1");
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["metrics"]["decode_tok_s"], 51.25);
  EXPECT_EQ(j["metrics"].size(), 1u);
  EXPECT_EQ(j["workload"], "adapt run stories260K.bin -t 0");  // the same in every clone
  auto sum = test::Shell("sha256sum " + run);
  EXPECT_EQ(j["build"]["artifact_sha256"], sum.out.substr(0, 64));

  // stdout alone lacks the line; a failing command and a missing program are errors, never a record.
  auto from = test::Shell(test::VerityBin() + " adapt --from stdout --metric '" + kRunLine + "' -- " + run);
  EXPECT_EQ(from.exit_code, 1);
  EXPECT_TRUE(from.out.empty()) << from.out;
  EXPECT_NE(from.err.find("stdout: metric decode_tok_s"), std::string::npos) << from.err;
  auto fails = test::Shell(adapt + "sh -c 'echo achieved tok/s: 5 >&2; exit 3'");
  EXPECT_EQ(fails.exit_code, 1);
  EXPECT_NE(fails.err.find("exited 3"), std::string::npos) << fails.err;
  auto missing = test::Shell(adapt + dir + "/no-such-run");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no-such-run"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace verity
