// verity gbench: a Google Benchmark binary of this repository as a bench
// command. Conversion rules on hand-made reports, the real ledger_bench as a
// bench command, then Google Benchmark and hyperfine reports scored with
// lower-is-better time metrics. What is scored has known times
// (tests/tools/fixed_gbench.cc, a real hyperfine report given known times), so
// no verdict depends on how fast or loaded this machine is.
#include <gtest/gtest.h>

#include <set>

#include <algorithm>
#include <cmath>
#include <vector>
#include <nlohmann/json.hpp>

#include "measure/gbench.h"
#include "measure/measure.h"
#include "measure/raw_report.h"
#include "tests/ledger_bench_util.h"
#include "tests/test_util.h"

namespace verity::test {
namespace {

nlohmann::json Report(const std::string& benchmarks) {
  return nlohmann::json::parse("{\"context\":{\"num_cpus\":2},\"benchmarks\":[" + benchmarks + "]}");
}

TEST(Gbench, MetricsAreRealTimesInNanosecondsNamedByBenchmark) {
  EXPECT_EQ(measure::GbenchMetricName("BM_History/reverts"), "BM_History_reverts_ns");
  EXPECT_EQ(measure::GbenchMetricName("BM_X/iterations:10"), "BM_X_iterations_10_ns");
  auto r = measure::GbenchToBench(Report(R"({"name":"BM_A","run_type":"iteration","real_time":2.5,"time_unit":"ms"},)"
                                         R"({"name":"BM_B/8","run_type":"iteration","real_time":40,"time_unit":"us"})"),
                                  {{"id", "x"}, {"artifact_sha256", std::string(64, 'a')}}, "bin", std::string(64, 'b'),
                                  "gbench bin", "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_A_ns"].get<double>(), 2.5e6);
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_B_8_ns"].get<double>(), 4e4);
  EXPECT_EQ((*r)["schema"], "verity.bench/1");
  EXPECT_EQ((*r)["workload"], "gbench bin");
}

TEST(Gbench, MediansOfRepetitionsAndNamedErrors) {
  const nlohmann::json build = {{"id", "x"}, {"artifact_sha256", std::string(64, 'a')}};
  auto r = measure::GbenchToBench(
      Report(
          R"({"name":"BM_A","run_type":"iteration","real_time":9,"time_unit":"ns"},)"
          R"({"name":"BM_A_median","run_name":"BM_A","run_type":"aggregate","aggregate_name":"median","real_time":5,"time_unit":"ns"},)"
          R"({"name":"BM_A_mean","run_name":"BM_A","run_type":"aggregate","aggregate_name":"mean","real_time":7,"time_unit":"ns"})"),
      build, "bin", "", "w", "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)["metrics"]["BM_A_ns"].get<double>(), 5.0)
      << "the median aggregate, not an iteration or the mean";
  struct Bad {
    std::string report, names;
  } bad[] = {
      {R"({"name":"BM_A","real_time":1,"time_unit":"fortnights"})", "time_unit 'fortnights'"},
      {R"({"name":"BM_A","real_time":0,"time_unit":"ns"})",
       "benchmark 'BM_A': real_time is not a positive finite number"},
      {R"({"name":"BM_A/1","real_time":1},{"name":"BM_A:1","real_time":1})", "also maps to metric BM_A_1_ns"},
      {"", "no benchmark results"},
  };
  for (const auto& b : bad) {
    auto e = measure::GbenchToBench(Report(b.report), build, "bin", "", "w", "t");
    ASSERT_FALSE(e.ok()) << b.report;
    EXPECT_NE(e.status().message().find(b.names), std::string::npos) << e.status().message();
  }
}

std::string Sha256Of(const std::string& path) {
  auto sha = Shell("sha256sum " + path);
  EXPECT_EQ(sha.exit_code, 0) << sha.err;
  return sha.out.substr(0, 64);
}

// The real ledger_bench through `verity gbench`: one record naming its
// benchmark in ns, the binary and its hash, and the workload it ran.
TEST(Gbench, LedgerBenchIsABenchCommand) {
  auto one = Shell(std::string(VERITY_BIN) + " gbench -- " + LEDGER_BENCH +
                   " --benchmark_filter=BM_Frontier --benchmark_min_time=0.01");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto j = nlohmann::json::parse(one.out);
  ASSERT_TRUE(j["metrics"].contains("BM_Frontier_ns")) << one.out;
  EXPECT_GT(j["metrics"]["BM_Frontier_ns"].get<double>(), 0.0);
  EXPECT_EQ(j["metrics"].size(), 1u) << "--benchmark_filter reached the binary: " << one.out;
  EXPECT_EQ(j["workload"], "gbench ledger_bench --benchmark_filter=BM_Frontier --benchmark_min_time=0.01");
  EXPECT_EQ(j["gbench"]["binary"], LEDGER_BENCH);
  EXPECT_EQ(j["gbench"]["binary_sha256"], Sha256Of(LEDGER_BENCH));
}

// Every ledger benchmark, once, on a small ledger: a benchmark that errors is
// a guard that did not run (BM_SubmitOverhead once failed every run, its
// 5 rounds below the policy's floor, and nothing said so).
TEST(Gbench, EveryLedgerBenchmarkRunsWithoutAnError) {
  EXPECT_FALSE(EveryLedgerBenchmarkOnce(LEDGER_BENCH, "").empty());
  auto bad = Shell(std::string(LEDGER_BENCH) + " --changes=ten");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--changes must be an integer"), std::string::npos) << bad.err;
}

// One side of a scored benchmark: a copy of fixed_gbench in its own folder,
// as a build of it would be, taking `work_ns` (BM_Work) and 50 us (BM_Guard).
std::string FixedGbench(const std::string& dir, const std::string& side, double work_ns, int seed) {
  const std::string folder = dir + "/" + side;
  EXPECT_EQ(Shell("mkdir -p " + folder + " && cp " + FIXED_GBENCH + " " + folder + "/").exit_code, 0);
  WriteFile(folder + "/times", std::to_string(work_ns) + " 50000 0.002 " + std::to_string(seed) + "\n");
  return folder + "/fixed_gbench";
}

std::string StoriesParity() {
  return std::string(VERITY_BIN) + " parity --model " + SourceDir() + "/models/stories260K.bin --json";
}

// Lower is better: a head at half the base's time gains +100% and moves the
// frontier down to the head's time; one at three times the time loses 2/3.
TEST(Gbench, AGbenchBinaryIsScoredWithALowerIsBetterTime) {
  const std::string dir = TempDir("gbench"), db = dir + "/l.db";
  auto submit = [&](const std::string& tag, const std::string& title, int predict, double base_ns, double head_ns,
                    int seed) {
    auto gbench = [&](const std::string& side, double ns, int s) {
      return std::string(VERITY_BIN) + " gbench -- " + FixedGbench(dir, side, ns, s) + " --benchmark_min_time=0.01";
    };
    return Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db + " --title '" + title + "' --predict " +
                 std::to_string(predict) + " --metric BM_Work_manual_time_ns --base-cmd '" +
                 gbench(tag + "-base", base_ns, seed) + "' --head-cmd '" + gbench(tag + "-head", head_ns, seed + 1) +
                 "' --parity-cmd '" + StoriesParity() + "'");
  };
  auto r = submit("fast", "twice as fast", 100, 2e6, 1e6, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "accepted") << "this build's parity binds to the gbench record: " << r.out;
  EXPECT_GE(j["rounds"].get<int>(), 10);
  EXPECT_NEAR(j["gain"].get<double>(), 1.0, 0.02) << "half the time is +100%, not -50%: " << r.out;
  EXPECT_NEAR(j["frontier_before"].get<double>(), 2e6, 2e4) << "seeded from the base's time, in ns";
  EXPECT_NEAR(j["frontier_after"].get<double>(), 1e6, 1e4) << "the frontier of a time moves down";
  EXPECT_NE(r.err.find("workload 'gbench fixed_gbench --benchmark_min_time=0.01'"), std::string::npos) << r.err;
  auto slow = submit("slow", "three times slower", 0, 1e6, 3e6, 3);
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  auto k = nlohmann::json::parse(slow.out);
  EXPECT_EQ(k["verdict"], "none") << slow.out;
  EXPECT_NEAR(k["gain"].get<double>(), -2.0 / 3.0, 0.02) << slow.out;
  EXPECT_EQ(k["frontier_after"], k["frontier_before"]) << slow.out;
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
std::string HyperfineResult(const std::string& command, const std::string& times,
                            const std::string& exits = "[0,0,0]") {
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
  auto s = Parsed(
      Hyperfine(HyperfineResult("sleep 0.01", "[0.012, 0.010, 0.011]") + "," + HyperfineResult("work", "[0.5, 0.3]")),
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
      {R"({"results":[{"command":7,"mean":1,"median":1,"times":[1]}]})", "a_ns",
       "results[0].command is missing or not"},
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

// A Google Benchmark binary printing its raw --benchmark_format=json on both
// sides: scored with lower-is-better time metrics, its identity the hash of
// the executable the report names, and never bound to parity evidence.
TEST(RawReports, RawGbenchReportIsScoredLowerIsBetter) {
  const std::string dir = TempDir("raw-gbench"), db = dir + "/l.db";
  const std::string base = FixedGbench(dir, "base", 3e6, 5), head = FixedGbench(dir, "head", 1e6, 6);
  const std::string flags = " --benchmark_min_time=0.01 --benchmark_format=json";
  auto r =
      Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db +
            " --title 'raw gbench, a third of the time' --predict 200 --metric BM_Work_manual_time_ns --base-cmd '" +
            base + flags + "' --head-cmd '" + head + flags + "' --parity-cmd '" + StoriesParity() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "unverified") << "never accepted: nothing binds " << r.out;
  EXPECT_GE(j["rounds"].get<int>(), 10);
  EXPECT_NEAR(j["gain"].get<double>(), 2.0, 0.03) << "a third of the time is +200%: " << r.out;
  EXPECT_NE(r.err.find("the base bench printed a raw gbench report, which names no build (raw:gbench:executable"),
            std::string::npos)
      << r.err;
  auto show = nlohmann::json::parse(Shell(std::string(VERITY_BIN) + " show --json --ledger " + db + " 1").out);
  const auto& run = show["runs"][0];
  ASSERT_EQ(run["artifacts"].size(), 2u);
  for (const auto& a : run["artifacts"]) {
    EXPECT_EQ(a["build_id"], "raw:gbench:executable");
    EXPECT_EQ(a["artifact_sha256"], Sha256Of(FIXED_GBENCH)) << "the executable context.executable names";
  }
  const auto& score = run["scores"].back();
  EXPECT_NE(score["note"].get<std::string>().find("no parity evidence binds to it"), std::string::npos)
      << score["note"];
  // The direction the ledger took: a time, lower is better (the guard records it).
  ASSERT_EQ(score["guards"].size(), 1u) << score;
  EXPECT_EQ(score["guards"][0]["metric"], "BM_Guard_manual_time_ns");
  EXPECT_EQ(score["guards"][0]["higher_is_better"], false);
  // The frontier a gain is measured against is the base time, in ns (the
  // report says 3 ms).
  const double base_median = score["base_median"];
  EXPECT_NEAR(base_median, 3e6, 3e4);
  EXPECT_NEAR(score["frontier_before"].get<double>(), base_median, 1e-9 * base_median);
  auto f = Shell(std::string(VERITY_BIN) + " frontier --ledger " + db);
  EXPECT_NE(f.out.find("frontier: 0 metric/box pairs"), std::string::npos) << "an unbound run never seeds: " << f.out;
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The real hyperfine (Debian's, scripts/setup.sh) times a real command once;
// its report, given known times, is what each side's bench command prints:
// a head three times slower is a loss of 2/3 -- lower is better -- and
// parked, one three times faster a gain of +200%, unverified.
TEST(RawReports, RealHyperfineIsScoredLowerIsBetter) {
  ASSERT_EQ(Shell("command -v hyperfine").exit_code, 0) << "hyperfine is missing: install it (scripts/setup.sh)";
  const std::string dir = TempDir("raw-hyperfine"), db = dir + "/l.db";
  auto probe = Shell("hyperfine -N --runs 3 --warmup 1 --style none -n work --export-json " + dir +
                     "/probe.json 'sleep 0.005' >/dev/null && cat " + dir + "/probe.json");
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  auto parsed = Parsed(probe.out, "work_ns");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << probe.out;
  const nlohmann::json report = nlohmann::json::parse(probe.out);
  const std::vector<double> times = report["results"][0]["times"];
  ASSERT_EQ(times.size(), 3u) << probe.out;
  EXPECT_DOUBLE_EQ(parsed->value, MedianOf(times) * 1e9) << "the median of hyperfine's times, in ns";
  EXPECT_GT(parsed->value, 4.9e6) << "sleep 0.005 takes at least 5 ms";
  // The same report with its times set to 5 ms x scale (the ratio is what is scored).
  auto bench = [&](const std::string& side, double scale) {
    nlohmann::json r = report;
    auto& result = r["results"][0];
    result["times"] = {0.0050 * scale, 0.0052 * scale, 0.0048 * scale};
    result["mean"] = result["median"] = 0.0050 * scale;
    result["min"] = 0.0048 * scale;
    result["max"] = 0.0052 * scale;
    WriteFile(dir + "/" + side + ".json", r.dump());
    return "cat " + dir + "/" + side + ".json";
  };
  auto submit = [&](const std::string& title, int predict, double base_scale, double head_scale) {
    auto r = Shell(std::string(VERITY_BIN) + " submit --json --ledger " + db + " --title '" + title + "' --predict " +
                   std::to_string(predict) + " --metric work_ns --base-cmd '" + bench(title + "-base", base_scale) +
                   "' --head-cmd '" + bench(title + "-head", head_scale) + "' --parity-cmd '" + StoriesParity() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::make_pair(nlohmann::json::parse(r.out.empty() ? "{}" : r.out), r.err);
  };
  auto [slow, slow_err] = submit("slower", 0, 1, 3);
  EXPECT_EQ(slow["verdict"], "none") << slow;
  EXPECT_NEAR(slow["gain"].get<double>(), -2.0 / 3.0, 1e-6) << "lower is better: 3x the time is a loss " << slow;
  EXPECT_NE(slow_err.find("raw hyperfine report, which names no build (raw:hyperfine:command"), std::string::npos)
      << slow_err;
  // Three times faster clears the gate, but passing parity evidence never
  // binds to a raw report: unverified, not accepted, and no frontier.
  auto [fast, fast_err] = submit("faster", 200, 3, 1);
  EXPECT_EQ(fast["verdict"], "unverified") << fast;
  EXPECT_NEAR(fast["gain"].get<double>(), 2.0, 1e-6) << fast;
  auto f = Shell(std::string(VERITY_BIN) + " frontier --ledger " + db);
  EXPECT_NE(f.out.find("frontier: 0 metric/box pairs"), std::string::npos) << f.out;
}

}  // namespace
}  // namespace verity::test
