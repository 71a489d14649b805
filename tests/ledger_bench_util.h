// Every ledger benchmark, run once: shared by the SQLite (gbench_test) and
// PostgreSQL (ledger_postgres_test) checks that no benchmark errors.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/test_util.h"

namespace verity::test {

// Runs `ledger_bench` (its path) with `flags` once per benchmark on a
// 200-change ledger. A benchmark that errors, or one that did not run, fails
// the calling test: a benchmark that errors is a guard that did not run.
// Returns the benchmarks' JSON records (empty when the run itself failed).
inline nlohmann::json EveryLedgerBenchmarkOnce(const std::string& ledger_bench, const std::string& flags) {
  const auto r = Shell(ledger_bench + " " + flags + " --changes=200 --benchmark_min_time=0.01 --benchmark_format=json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nlohmann::json::array();
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> ran;
  for (const auto& b : j["benchmarks"]) {
    const std::string name = b["name"];
    ran.insert(name.substr(0, name.find('/')));
    EXPECT_FALSE(b.value("error_occurred", false)) << name << ": " << b.value("error_message", std::string());
  }
  for (const char* want : {"BM_SubmitOverhead", "BM_Insert100kSamples", "BM_Show", "BM_History", "BM_Report",
                           "BM_Dashboard", "BM_Frontier", "BM_ConcurrentSubmitters"})
    EXPECT_EQ(ran.count(want), 1u) << want << " did not run (" << flags << ")";
  return j["benchmarks"];
}

}  // namespace verity::test
