// Helpers for ledger tests: build fake bench/parity commands, run `verity submit`.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "measure/measure.h"
#include "tests/test_util.h"

namespace verity::test {

// A fake bench command: N(mean, noise*mean), its own run counter in `dir`.
inline std::string Bench(const std::string& dir, const std::string& name, double mean, double noise, int seed,
                         const std::string& extra = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, " --mean %.6f --noise %.6f --seed %d", mean, noise, seed);
  return std::string(FAKE_BENCH) + buf + " --state " + dir + "/" + name + ".state " + extra;
}

inline std::string Parity(const std::string& args = "") { return std::string(FAKE_PARITY) + " " + args; }

// Whether this run of a ledger suite is against PostgreSQL: its second CTest
// registration (prefix "pg.") sets VERITY_TEST_PG_STATE to the directory where
// scripts/pg-test-cluster.sh (the pg_cluster fixture) wrote the server's URL.
inline bool OnPostgres() {
  const char* s = std::getenv("VERITY_TEST_PG_STATE");
  return s && *s;
}

// The PostgreSQL test server's URL (database `postgres`); a failure, naming
// what is missing, when the server is not there.
inline std::string PostgresServerUrl() {
  const std::string state = std::getenv("VERITY_TEST_PG_STATE");
  const std::string url = ReadFile(state + "/url");
  const std::string trimmed = url.substr(0, url.find('\n'));
  auto ping = Shell("psql -X -qAt -c 'SELECT 1' " + trimmed);
  if (trimmed.empty() || ping.exit_code != 0)
    ADD_FAILURE() << "the PostgreSQL test server is not reachable (" << state << "/url: '" << trimmed
                  << "'): the pg_cluster_start fixture starts it (ctest), or run scripts/pg-test-cluster.sh start "
                  << state << "\n"
                  << ping.err;
  return trimmed;
}

// The databases this test process made, dropped when it ends if every test
// passed (each is ~8 MB; a failed test's stay for a look until the cluster stops).
struct CreatedDatabases {
  std::string server;
  std::vector<std::string> names;
  ~CreatedDatabases() {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    for (const auto& n : names) Shell("psql -X -q -c 'DROP DATABASE IF EXISTS " + n + " WITH (FORCE)' " + server);
  }
};

// A ledger no test has used: a file in `dir`, or on PostgreSQL a new database
// (SQL_ASCII and C, from the cluster's template) named after `dir`.
inline std::string FreshLedger(const std::string& dir) {
  if (!OnPostgres()) return dir + "/ledger.db";
  static int n = 0;
  std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(n++) + "_";
  for (char c : dir.substr(dir.find_last_of('/') + 1))
    if (std::isalnum(static_cast<unsigned char>(c)) && name.size() < 60) name += static_cast<char>(std::tolower(c));
  const std::string server = PostgresServerUrl();
  auto made = Shell("psql -X -q -c 'CREATE DATABASE " + name + "' " + server);
  if (made.exit_code != 0) ADD_FAILURE() << "CREATE DATABASE " << name << " on " << server << ": " << made.err;
  static CreatedDatabases created;  // after Shell's own statics: destroyed before them
  created.server = server;
  created.names.push_back(name);
  return server.substr(0, server.rfind('/') + 1) + name;
}

// Runs one SQL statement on a test's ledger (sqlite3 or psql), rows as a|b|c lines.
inline CommandResult LedgerSql(const std::string& db, const std::string& sql) {
  if (db.rfind("postgresql://", 0) == 0)
    return Shell("psql -X -qAt -v ON_ERROR_STOP=1 -c " + measure::ShellQuote(sql) + " " + db);
  return Shell("sqlite3 " + db + " " + measure::ShellQuote(sql));
}

// A fresh directory with a ledger in it (created on first use).
struct Case {
  std::string dir, db;
};
inline Case Fresh(const std::string& tag) {
  Case c;
  c.dir = TempDir(tag);
  c.db = FreshLedger(c.dir);
  return c;
}

inline std::string Quote(const std::string& s) { return measure::ShellQuote(s); }

// A prefix for the bench commands of two submissions run at once, whose
// stderr and exit codes go to <dir>/a.err, b.err, a.rc and b.rc: whichever
// holds the box lock times nothing until the other says it is waiting for the
// lock (or has ended; a minute at most, once), so the two always meet at the
// lock, however they are scheduled.
inline std::string UntilOneWaitsForTheLock(const std::string& dir, const std::string& tag) {
  const std::string met = dir + "/" + tag + ".met";
  return "[ -e " + met + " ] || { for i in $(seq 6000); do grep -qs 'waiting for the box lock' " + dir + "/a.err " +
         dir + "/b.err && break; [ -e " + dir + "/a.rc ] || [ -e " + dir +
         "/b.rc ] && break; sleep 0.01; done; touch " + met + "; }; ";
}

struct Submitted {
  CommandResult cmd;
  nlohmann::json j;
};

// Runs `verity submit --json` and parses its stdout.
inline Submitted Submit(const std::string& db, const std::string& title, double predict, const std::string& base,
                        const std::string& head, const std::string& parity, const std::string& extra = "") {
  char p[32];
  std::snprintf(p, sizeof p, "%g", predict);
  Submitted s;
  s.cmd = Shell(VerityBin() + " submit --json --ledger " + db + " --title " + Quote(title) + " --predict " + p +
                " --base-cmd " + Quote(base) + " --head-cmd " + Quote(head) + " --parity-cmd " + Quote(parity) + " " +
                extra);
  try {
    s.j = nlohmann::json::parse(s.cmd.out);
  } catch (...) {
    s.j = nlohmann::json();
  }
  return s;
}

inline nlohmann::json JsonOf(const std::string& cmd) {
  auto r = Shell(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (...) {
    ADD_FAILURE() << "not JSON: " << r.out;
    return nlohmann::json();
  }
}

}  // namespace verity::test
