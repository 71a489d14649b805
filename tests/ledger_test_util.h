// Helpers for ledger tests: build fake bench/parity commands, run `verity submit`.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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

// A fresh directory with a ledger path in it (the ledger is created on first use).
struct Case {
  std::string dir, db;
};
inline Case Fresh(const std::string& tag) {
  Case c;
  c.dir = TempDir(tag);
  c.db = c.dir + "/ledger.db";
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
  return "[ -e " + met + " ] || { for i in $(seq 6000); do grep -qs 'waiting for the box lock' " + dir + "/a.err " + dir +
         "/b.err && break; [ -e " + dir + "/a.rc ] || [ -e " + dir + "/b.rc ] && break; sleep 0.01; done; touch " + met +
         "; }; ";
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
                " --base-cmd " + Quote(base) + " --head-cmd " + Quote(head) + " --parity-cmd " + Quote(parity) +
                " " + extra);
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
