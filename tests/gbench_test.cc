// verity gbench: a Google Benchmark binary of this repository as a bench
// command. Conversion rules on hand-made reports, then the real ledger_bench
// submitted as base and head and scored with a lower-is-better time metric.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "measure/gbench.h"
#include "measure/measure.h"
#include "measure/raw_report.h"
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


// ---- raw reports: a bench command prints Google Benchmark's or hyperfine's own JSON ----

// What a bench command's stdout parses to.
Result<measure::BenchSample> Parsed(const std::string& stdout_text, const std::string& metric) {
  measure::CommandOutput out;
  out.exit_code = 0;
  out.out = stdout_text;
  return measure::ParseBench(out, metric, "bench", "the bench command");
}

// A hyperfine report in its documented --export-json format, one result per command.
std::string Hyperfine(const std::string& results) { return "{\"results\":[" + results + "]}"; }
std::string HyperfineResult(const std::string& command, const std::string& times, const std::string& exits = "[0,0,0]") {
  return "{\"command\":\"" + command + "\",\"mean\":0.01,\"stddev\":0.001,\"median\":0.01,\"user\":0.001," +
         "\"system\":0.0,\"min\":0.009,\"max\":0.011,\"times\":" + times + ",\"exit_codes\":" + exits + "}";
}

TEST(RawReports, ShapesAreRecognised) {
  EXPECT_EQ(measure::RawReportFormat(Report("")), "gbench");
  EXPECT_EQ(measure::RawReportFormat(nlohmann::json::parse(Hyperfine(HyperfineResult("a", "[0.01]")))), "hyperfine");
  EXPECT_EQ(measure::RawReportFormat(nlohmann::json::parse(R"({"schema":"verity.bench/1","metrics":{}})")), "");
  EXPECT_EQ(measure::RawReportFormat(nlohmann::json::parse(R"({"results":[{"command":"a"}]})")), "")
      << "a results entry without mean/median/times is not hyperfine's";
  EXPECT_EQ(measure::RawReportFormat(nlohmann::json::parse(R"({"benchmarks":[]})")), "") << "no context";
}

TEST(RawReports, HyperfineMediansOfTimesInNanoseconds) {
  auto s = Parsed(Hyperfine(HyperfineResult("sleep 0.01", "[0.012, 0.010, 0.011]") + "," +
                            HyperfineResult("work", "[0.5, 0.3]")),
                  "sleep_0_01_ns");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_DOUBLE_EQ(s->value, 0.011e9) << "the median of times, in ns";
  EXPECT_DOUBLE_EQ(s->metrics.at("work_ns"), 0.4e9);
  EXPECT_EQ(s->raw_format, "hyperfine");
  EXPECT_EQ(s->build_id, "raw:hyperfine:command");
  EXPECT_EQ(s->artifact_sha256.size(), 64u);
  EXPECT_EQ(s->workload, "hyperfine");
  // Empty times: hyperfine's own median.
  auto m = Parsed(Hyperfine(HyperfineResult("a", "[]", "[]")), "a_ns");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->value, 0.01e9);
}

// Bad shapes fail with a message naming the field, on the path a bench command's output takes.
TEST(RawReports, BadShapesNameTheField) {
  struct Bad {
    std::string out, metric, names;
  } bad[] = {
      {Report("").dump(), "BM_A_ns", "no benchmark results"},
      {R"({"context":{},"benchmarks":{}})", "BM_A_ns", "no 'benchmarks' array"},
      {Report(R"({"name":"BM_A","real_time":1,"time_unit":"fortnights"})").dump(), "BM_A_ns", "time_unit 'fortnights'"},
      {Report(R"({"name":"BM_A","real_time":-3,"time_unit":"ns"})").dump(), "BM_A_ns",
       "benchmark 'BM_A': real_time is not a positive finite number"},
      {Report(R"({"name":"BM_A/1","real_time":1},{"name":"BM_A:1","real_time":1})").dump(), "BM_A_1_ns",
       "also maps to metric BM_A_1_ns"},
      {Hyperfine(HyperfineResult("a", "[0.01, -0.002]")), "a_ns", "results[0].times[1] is -0.002"},
      {Hyperfine(HyperfineResult("a", "[0.01, \"x\"]")), "a_ns", "results[0].times[1] is \"x\""},
      {Hyperfine(HyperfineResult("a b", "[0.01]") + "," + HyperfineResult("a_b", "[0.01]")), "a_b_ns",
       "results[1].command 'a_b': another result also maps to metric a_b_ns"},
      {Hyperfine(HyperfineResult("a", "[0.01]", "[0, 2]")), "a_ns", "results[0].exit_codes[1] is 2"},
      {R"({"results":[{"command":7,"mean":1,"median":1,"times":[1]}]})", "a_ns", "results[0].command is missing or not"},
      {Hyperfine(HyperfineResult("a", "[0.01]")), "b_ns", "printed no metric 'b_ns'"},
  };
  size_t checked = 0;
  for (const auto& b : bad) {
    auto e = Parsed(b.out, b.metric);
    ASSERT_FALSE(e.ok()) << b.out;
    EXPECT_NE(e.status().message().find(b.names), std::string::npos) << e.status().message();
    EXPECT_EQ(e.status().message().rfind("bench", 0), 0u) << "names the command: " << e.status().message();
    checked++;
  }
  EXPECT_EQ(checked, std::size(bad));
}

// The real ledger_bench, printing its raw --benchmark_format=json on both
// sides: scored with lower-is-better time metrics, its identity the hash of
// the executable the report names, and never bound to parity evidence.
TEST(RawReports, RawGbenchOfLedgerBenchIsScoredLowerIsBetter) {
  const std::string dir = TempDir("raw-gbench"), db = dir + "/l.db";
  const std::string cmd = std::string(LEDGER_BENCH) +
                          " --benchmark_filter='BM_Frontier|BM_Show' --benchmark_min_time=0.01 --benchmark_format=json";
  const std::string parity = std::string(VERITY_BIN) + " parity --model " + SourceDir() + "/models/stories260K.bin --json";
  auto r = Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db +
                 " --title 'raw ledger_bench against itself' --predict 0 --metric BM_Frontier_ns --base-cmd \"" + cmd +
                 "\" --head-cmd \"" + cmd + "\" --parity-cmd '" + parity + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["verdict"] == "none" || j["verdict"] == "unverified") << "never accepted: nothing binds " << r.out;
  EXPECT_GE(j["rounds"].get<int>(), 10);
  EXPECT_LT(std::abs(j["gain"].get<double>()), 0.5) << r.out;
  EXPECT_NE(r.err.find("the base bench printed a raw gbench report, which names no build (raw:gbench:executable"),
            std::string::npos)
      << r.err;
  auto show = nlohmann::json::parse(Shell(std::string(VERITY_BIN) + " show --json --ledger " + db + " 1").out);
  const auto& run = show["runs"][0];
  auto sha = Shell("sha256sum " + std::string(LEDGER_BENCH));
  ASSERT_EQ(sha.exit_code, 0);
  ASSERT_EQ(run["artifacts"].size(), 2u);
  for (const auto& a : run["artifacts"]) {
    EXPECT_EQ(a["build_id"], "raw:gbench:executable");
    EXPECT_EQ(a["artifact_sha256"], sha.out.substr(0, 64)) << "the executable context.executable names";
  }
  const auto& score = run["scores"].back();
  EXPECT_NE(score["note"].get<std::string>().find("no parity evidence binds to it"), std::string::npos) << score["note"];
  // The direction the ledger took: a time, lower is better (the guard records it).
  ASSERT_EQ(score["guards"].size(), 1u) << score;
  EXPECT_EQ(score["guards"][0]["metric"], "BM_Show_ns");
  EXPECT_EQ(score["guards"][0]["higher_is_better"], false);
  // The frontier a gain is measured against is the base time, in ns.
  const double base = score["base_median"];
  EXPECT_GT(base, 1e6) << "BM_Frontier takes milliseconds: the metric is in ns";
  EXPECT_NEAR(score["frontier_before"].get<double>(), base, 1e-9 * base);
  auto f = Shell(std::string(VERITY_BIN) + " frontier --ledger " + db);
  EXPECT_NE(f.out.find("frontier: 0 metric/box pairs"), std::string::npos) << "an unbound run never seeds: " << f.out;
}

// The real hyperfine (Debian's, scripts/setup.sh), its report in a file the
// bench command cats: a head three times slower is a loss of about 2/3 --
// lower is better -- and parked.
TEST(RawReports, RealHyperfineIsScoredLowerIsBetter) {
  ASSERT_EQ(Shell("command -v hyperfine").exit_code, 0) << "hyperfine is missing: install it (scripts/setup.sh)";
  const std::string dir = TempDir("raw-hyperfine"), db = dir + "/l.db";
  auto bench = [&](const std::string& side, const std::string& seconds) {
    const std::string json = dir + "/" + side + ".json";
    return "hyperfine -N --runs 3 --warmup 1 --style none -n work --export-json " + json + " 'sleep " + seconds +
           "' >/dev/null && cat " + json;
  };
  auto one = Shell(bench("probe", "0.005"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto parsed = Parsed(one.out, "work_ns");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << one.out;
  EXPECT_GT(parsed->value, 4.9e6) << "sleep 0.005 takes at least 5 ms, in ns";
  EXPECT_LT(parsed->value, 5e8);
  const std::string parity = std::string(VERITY_BIN) + " parity --model " + SourceDir() + "/models/stories260K.bin --json";
  auto r = Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db + " --title 'a slower sleep' --predict 0 " +
                 "--metric work_ns --base-cmd \"" + bench("base", "0.005") + "\" --head-cmd \"" + bench("head", "0.015") +
                 "\" --parity-cmd '" + parity + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "none") << r.out;
  EXPECT_LT(j["gain"].get<double>(), -0.4) << "lower is better: 3x the time is a loss, not a gain " << r.out;
  EXPECT_GT(j["gain"].get<double>(), -0.9) << r.out;
  EXPECT_NE(r.err.find("raw hyperfine report, which names no build (raw:hyperfine:command"), std::string::npos) << r.err;
  // Three times faster clears the gate, but passing parity evidence never
  // binds to a raw report: unverified, not accepted, and no frontier.
  auto fast = Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db + " --title 'a faster sleep' --predict 200 " +
                    "--metric work_ns --base-cmd \"" + bench("base", "0.015") + "\" --head-cmd \"" + bench("head", "0.005") +
                    "\" --parity-cmd '" + parity + "'");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  auto k = nlohmann::json::parse(fast.out);
  EXPECT_EQ(k["verdict"], "unverified") << fast.out;
  EXPECT_GT(k["gain"].get<double>(), 0.5) << fast.out;
  auto f = Shell(std::string(VERITY_BIN) + " frontier --ledger " + db);
  EXPECT_NE(f.out.find("frontier: 0 metric/box pairs"), std::string::npos) << f.out;
}

}  // namespace
}  // namespace verity::test
