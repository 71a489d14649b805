// verity gbench: a Google Benchmark binary of this repository as a bench
// command. Conversion rules on hand-made reports, then the real ledger_bench
// submitted as base and head and scored with a lower-is-better time metric.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "measure/gbench.h"
#include "tests/test_util.h"

namespace verity::test {
namespace {

nlohmann::json Report(const std::string& benchmarks) {
  return nlohmann::json::parse("{\"context\":{\"num_cpus\":2},\"benchmarks\":[" + benchmarks + "]}");
}

TEST(Gbench, MetricsAreRealTimesInNanosecondsNamedByBenchmark) {
  EXPECT_EQ(measure::GbenchMetricName("BM_History/reverts"), "BM_History_reverts_ns");
  EXPECT_EQ(measure::GbenchMetricName("BM_X/iterations:10"), "BM_X_iterations_10_ns");
  auto r = measure::GbenchToBench(
      Report(R"({"name":"BM_A","run_type":"iteration","real_time":2.5,"time_unit":"ms"},)"
             R"({"name":"BM_B/8","run_type":"iteration","real_time":40,"time_unit":"us"})"),
      {{"id", "x"}, {"artifact_sha256", std::string(64, 'a')}}, "bin", std::string(64, 'b'), "gbench bin", "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_A_ns"].get<double>(), 2.5e6);
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_B_8_ns"].get<double>(), 4e4);
  EXPECT_EQ((*r)["schema"], "verity.bench/1");
  EXPECT_EQ((*r)["workload"], "gbench bin");
}

TEST(Gbench, MediansOfRepetitionsAndNamedErrors) {
  const nlohmann::json build = {{"id", "x"}, {"artifact_sha256", std::string(64, 'a')}};
  auto r = measure::GbenchToBench(
      Report(R"({"name":"BM_A","run_type":"iteration","real_time":9,"time_unit":"ns"},)"
             R"({"name":"BM_A_median","run_name":"BM_A","run_type":"aggregate","aggregate_name":"median","real_time":5,"time_unit":"ns"},)"
             R"({"name":"BM_A_mean","run_name":"BM_A","run_type":"aggregate","aggregate_name":"mean","real_time":7,"time_unit":"ns"})"),
      build, "bin", "", "w", "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_A_ns"].get<double>(), 5.0) << "the median aggregate, not an iteration or the mean";
  struct Bad {
    std::string report, names;
  } bad[] = {
      {R"({"name":"BM_A","real_time":1,"time_unit":"fortnights"})", "time_unit 'fortnights'"},
      {R"({"name":"BM_A","real_time":0,"time_unit":"ns"})", "benchmark 'BM_A': real_time is not a positive finite number"},
      {R"({"name":"BM_A/1","real_time":1},{"name":"BM_A:1","real_time":1})", "also maps to metric BM_A_1_ns"},
      {"", "no benchmark results"},
  };
  for (const auto& b : bad) {
    auto e = measure::GbenchToBench(Report(b.report), build, "bin", "", "w", "t");
    ASSERT_FALSE(e.ok()) << b.report;
    EXPECT_NE(e.status().message().find(b.names), std::string::npos) << e.status().message();
  }
}

TEST(Gbench, LedgerBenchIsScoredWithALowerIsBetterTime) {
  const std::string dir = TempDir("gbench"), db = dir + "/l.db";
  const std::string gbench = std::string(VERITY_BIN) + " gbench -- " + LEDGER_BENCH +
                             " --benchmark_filter=BM_Frontier --benchmark_min_time=0.01";
  auto one = Shell(gbench);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(nlohmann::json::parse(one.out)["metrics"].contains("BM_Frontier_ns")) << one.out;
  const std::string parity = std::string(VERITY_BIN) + " parity --model " + SourceDir() + "/models/stories260K.bin --json";
  auto r = Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db +
                 " --title 'ledger_bench against itself' --predict 0 --metric BM_Frontier_ns --base-cmd '" + gbench +
                 "' --head-cmd '" + gbench + "' --parity-cmd '" + parity + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["verdict"] == "none" || j["verdict"] == "accepted" || j["verdict"] == "held-surprise") << r.out;
  EXPECT_GE(j["rounds"].get<int>(), 10);
  EXPECT_NE(r.err.find("workload 'gbench ledger_bench --benchmark_filter=BM_Frontier"), std::string::npos) << r.err;
  // Lower is better: the frontier of a time metric is the base's time, and a
  // gain is stated as time saved (the same binary on both sides: near 0).
  EXPECT_LT(std::abs(j["gain"].get<double>()), 0.5) << r.out;
}

}  // namespace
}  // namespace verity::test
