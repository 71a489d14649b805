// llama-bench's -o json / -o jsonl records read as the bench protocol
// (measure/llama_bench.h): each test becomes its metric, repetitions give the
// median, the build commit is the identity, and every malformed record is
// named. The records are llama-bench's field set (llama.cpp's
// tools/llama-bench), trimmed to what the parser reads plus a few it ignores.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "measure/llama_bench.h"
#include "measure/measure.h"

namespace verity::measure {
namespace {

std::string Record(const std::string& commit, int prompt, int gen, const std::string& samples, int threads = 1,
                   const std::string& model = "/models/stories260K-f32.gguf") {
  return R"({"build_commit": ")" + commit + R"(", "build_number": 5501, "cpu_info": "AMD EPYC", "gpu_info": "",
 "backends": "CPU", "model_filename": ")" +
         model + R"(", "model_type": "llama ?B all F32",
 "model_size": 1043712, "model_n_params": 260096, "n_batch": 2048, "n_ubatch": 512, "n_threads": )" +
         std::to_string(threads) + R"(, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 0, "n_prompt": )" +
         std::to_string(prompt) + R"(, "n_gen": )" + std::to_string(gen) + R"(, "n_depth": 0,
 "test_time": "2026-12-01T23:00:00Z", "avg_ns": 1000, "stddev_ns": 10, "avg_ts": 999.0, "stddev_ts": 5.0,
 "samples_ns": [1, 2, 3], "samples_ts": [)" +
         samples + "]}";
}

CommandOutput Printed(const std::string& out) {
  CommandOutput run;
  run.exit_code = 0;
  run.out = out;
  return run;
}

TEST(LlamaBench, JsonArrayBecomesDecodeAndPrefillWithTheMedianOfTheRepetitions) {
  const std::string out = "[\n" + Record("abc1234", 512, 0, "300.5, 310.0, 305.25") + ",\n" +
                          Record("abc1234", 0, 128, "4100, 3900, 4000, 4200") + "\n]\n";
  auto s = ParseBench(Printed(out), "decode_tok_s", "head bench command", "llama-bench -m m.gguf -o json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->value, 4050.0);  // median of 3900, 4000, 4100, 4200
  EXPECT_EQ(s->metrics.at("prefill_tok_s"), 305.25);
  EXPECT_EQ(s->metrics.size(), 2u);
  EXPECT_EQ(s->build_id, "raw:llama-bench:abc1234");
  EXPECT_EQ(s->raw_format, "llama-bench");
  EXPECT_EQ(s->workload, "llama-bench stories260K-f32.gguf 1t");
  EXPECT_EQ(s->artifact_sha256.size(), 64u);
}

TEST(LlamaBench, JsonLinesAreTheSameRecords) {
  const std::string line1 = nlohmann::json::parse(Record("abc1234", 512, 0, "300")).dump();
  const std::string line2 = nlohmann::json::parse(Record("abc1234", 0, 128, "4000")).dump();
  auto s = ParseBench(Printed(line1 + "\n" + line2 + "\n"), "prefill_tok_s", "base bench command", "llama-bench");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->value, 300.0);
  EXPECT_EQ(s->metrics.at("decode_tok_s"), 4000.0);
}

TEST(LlamaBench, TheSameCommandLineAtAnotherCommitIsAnotherArtifact) {
  auto a = ParseBench(Printed("[" + Record("abc1234", 0, 128, "4000") + "]"), "decode_tok_s", "base", "llama-bench");
  auto b = ParseBench(Printed("[" + Record("def5678", 0, 128, "4000") + "]"), "decode_tok_s", "head", "llama-bench");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->artifact_sha256, b->artifact_sha256);
}

TEST(LlamaBench, CombinedAndDeepTestsGetTheirOwnNames) {
  std::string deep = Record("abc1234", 0, 128, "3000");
  deep.replace(deep.find("\"n_depth\": 0"), 12, "\"n_depth\": 512");
  auto r = ParseLlamaBench("[" + Record("abc1234", 512, 128, "700") + "," + deep + "]", "bench");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metrics.at("pp512_tg128_tok_s"), 700.0);
  EXPECT_EQ(r->metrics.at("decode_d512_tok_s"), 3000.0);
}

TEST(LlamaBench, EveryMalformedRecordIsNamed) {
  struct Bad {
    std::string out, needle;
  };
  std::string no_gen = Record("abc1234", 0, 128, "1");
  no_gen.replace(no_gen.find("\"n_gen\""), 7, "\"n_gem\"");
  const Bad bads[] = {
      {"[" + Record("abc1234", 0, 128, "1") + "," + Record("zzz9999", 512, 0, "1") + "]",
       "record 1.build_commit is 'zzz9999', record 0's is 'abc1234'"},
      {"[" + Record("abc1234", 0, 128, "1", 1) + "," + Record("abc1234", 0, 128, "1", 2) + "]",
       "record 1 is a second decode_tok_s test"},
      {"[" + no_gen + "]", "record 0.n_gen is missing"},
      {"[" + Record("abc1234", 0, 128, "4000, -1") + "]", "record 0.samples_ts[1] is -1"},
      {"[" + Record("abc1234", 0, 128, "1") + "," + Record("abc1234", 512, 0, "1", 1, "/other.gguf") + "]",
       "one bench command must measure one model"},
      {"[" + Record("abc1234", 0, 0, "1") + "]", "a test of nothing"},
      {"[" + Record("abc1234", 0, 128, "1") + "] trailing", "not llama-bench JSON"},
      {"[]  ", "no test records"},
  };
  for (const auto& b : bads) {
    auto r = ParseLlamaBench(b.out, "head bench command");
    ASSERT_FALSE(r.ok()) << b.out;
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("head bench command", 0), 0u) << r.status().message();
  }
  // Through ParseBench too: an error, never a default.
  auto s = ParseBench(Printed(bads[0].out), "decode_tok_s", "head bench command", "llama-bench");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("one bench command must measure one build"), std::string::npos);
}

TEST(LlamaBench, OtherProtocolsAreNotTakenForIt) {
  EXPECT_FALSE(LooksLikeLlamaBench(R"({"schema": "verity.bench/1", "ok": true})"));
  EXPECT_FALSE(LooksLikeLlamaBench(R"({"context": {}, "benchmarks": []})"));
  EXPECT_FALSE(LooksLikeLlamaBench("achieved tok/s: 12.5\n"));
  EXPECT_TRUE(LooksLikeLlamaBench("[" + Record("abc1234", 0, 128, "1") + "]"));
}

}  // namespace
}  // namespace verity::measure
