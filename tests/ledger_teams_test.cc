// Several bench boxes writing to one ledger at once (issue 28): every record
// arrives, each box keeps its own frontier, and two boxes confirming one held
// change bank it once. The same source runs on SQLite files and, registered
// again as pg.Teams.*, on a PostgreSQL server (tests/ledger_test_util.h).
#include <gtest/gtest.h>

#include <cmath>

#include <map>
#include <set>
#include <string>

#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

// A 64-hex artifact hash numbered n: each change its own base and head.
std::string Sha(int n) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", n);
  return std::string(56, '0') + b;
}

// A shell prefix that waits (a minute at most, a hang guard) until `n`
// processes have passed it once: every box is then open on the ledger together.
std::string Meet(const std::string& dir, int n) {
  const std::string at = dir + "/arrived";
  return "if [ ! -e " + dir + "/met ]; then mkdir -p " + at + "; mktemp -p " + at +
         " >/dev/null; for i in $(seq 6000); do "
         "[ $(ls " +
         at + " | wc -l) -ge " + std::to_string(n) + " ] && break; sleep 0.01; done; touch " + dir + "/met; fi; ";
}

int Count(const std::string& db, const std::string& sql) {
  auto r = LedgerSql(db, sql);
  EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.err;
  return std::atoi(r.out.c_str());
}

TEST(LedgerTeams, FourBoxesSubmitAtOnceAndKeepTheirOwnFrontiers) {
  Case c = Fresh("boxes");
  constexpr int kBoxes = 4, kEach = 2;
  std::string script;
  for (int b = 0; b < kBoxes; b++) {
    const std::string box = "box" + std::to_string(b), out = c.dir + "/" + box;
    std::string seq = "(";
    for (int k = 0; k < kEach; k++) {
      const int n = 100 * b + 10 * k;
      const std::string tag = box + "c" + std::to_string(k);
      // Each box its own label (so its own fingerprint and frontier; one
      // machine's measurement lock since issue 41, so they meet in the parity
      // command, before the lock); all of them race from an empty ledger,
      // schema creation included.
      seq += "VERITY_BOX_LABEL=" + box + " VERITY_LOCK_DIR=" + c.dir + " " + VerityBin() + " submit --json --ledger " +
             c.db + " --title " + Quote(tag) + " --predict 3.5 --base-cmd " +
             // Each change steps from where its box's frontier stands (policy v6's
             // continuity): the second from the first's head.
             Quote(Bench(c.dir, tag + "b", 1000 * std::pow(1.035, k), 0.005, n + 1,
                         "--sha " + Sha(k == 0 ? n + 1 : n - 10 + 2))) +
             " --head-cmd " +
             Quote(Bench(c.dir, tag + "h", 1035 * std::pow(1.035, k), 0.005, n + 2, "--sha " + Sha(n + 2))) +
             " --parity-cmd " + Quote(Meet(c.dir, kBoxes) + Parity("--artifact " + Sha(n + 2))) + " >>" + out +
             ".out 2>>" + out + ".err; echo $? >>" + out + ".rc; ";
    }
    script += seq + ") & ";
  }
  auto r = Shell(script + "wait");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int b = 0; b < kBoxes; b++) {
    const std::string out = c.dir + "/box" + std::to_string(b);
    EXPECT_EQ(ReadFile(out + ".rc"), "0\n0\n") << ReadFile(out + ".err");
  }
  // Every record arrived, and the chain holds them all.
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM changes"), kBoxes * kEach);
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM scores"), kBoxes * kEach);
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM boxes"), kBoxes);
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM policy"), 6) << "each policy version installed once";
  auto v = Shell(VerityBin() + " ledger verify --ledger " + c.db);
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("verdict=PASS"), std::string::npos) << v.out;
  // Each box its own frontier, moved only by its own changes.
  std::map<std::string, std::string> box_of;  // change title -> box fingerprint
  for (int id = 1; id <= kBoxes * kEach; id++) {
    auto s = JsonOf(VerityBin() + " show --json --ledger " + c.db + " " + std::to_string(id));
    box_of[s["change"]["title"].get<std::string>()] = s["runs"][0]["box"].get<std::string>();
  }
  std::set<std::string> fingerprints;
  for (int b = 0; b < kBoxes; b++) {
    const std::string box = "box" + std::to_string(b);
    EXPECT_EQ(box_of[box + "c0"], box_of[box + "c1"]) << box << "'s two submissions were recorded on two boxes";
    fingerprints.insert(box_of[box + "c0"]);
  }
  EXPECT_EQ(fingerprints.size(), static_cast<size_t>(kBoxes));
  auto f = JsonOf(VerityBin() + " frontier --json --ledger " + c.db)["frontier"];
  ASSERT_EQ(f.size(), static_cast<size_t>(kBoxes)) << f.dump();
  for (const auto& ladder : f) {
    EXPECT_EQ(fingerprints.count(ladder["box"].get<std::string>()), 1u);
    EXPECT_EQ(ladder["counted_events"], 3) << "seed and two steps of its own box: " << ladder.dump();
    for (const auto& step : ladder["steps"]) {
      auto s = JsonOf(VerityBin() + " show --json --ledger " + c.db + " " + std::to_string(step["change"].get<int>()));
      EXPECT_EQ(s["runs"][0]["box"], ladder["box"]) << "a step of another box in this box's frontier";
    }
  }
  std::printf("teams: %d boxes x %d submissions at once: %d changes, %zu frontiers, verify PASS\n", kBoxes, kEach,
              Count(c.db, "SELECT count(*) FROM changes"), f.size());
}

TEST(LedgerTeams, TwoBoxesConfirmingOneHeldChangeBankItOnce) {
  Case c = Fresh("confirm2");
  ::setenv("VERITY_LOCK_DIR", c.dir.c_str(), 1);  // its own box lock: nothing else measuring holds it
  // The parity command meets the other confirm once `meet` exists, so both
  // run deep parity before either scores.
  const std::string meet = "if [ -e " + c.dir + "/meet ]; then " + Meet(c.dir, 2) + "fi; ";
  const std::string L = " --ledger " + c.db;
  auto seed = Submit(c.db, "seed", 3.5, Bench(c.dir, "sb", 1000, 0.003, 1, "--sha " + Sha(1)),
                     Bench(c.dir, "sh", 1035, 0.003, 2, "--sha " + Sha(2)), Parity("--artifact " + Sha(2)));
  ASSERT_EQ(seed.j["verdict"], "accepted") << seed.cmd.out << seed.cmd.err;
  // From where the frontier stands (the seed's head), as policy v6's continuity asks.
  auto held = Submit(c.db, "surprise", 1, Bench(c.dir, "hb", 1035, 0.003, 3, "--sha " + Sha(2)),
                     Bench(c.dir, "hh", 1107.45, 0.003, 4, "--sha " + Sha(4)), meet + Parity("--artifact " + Sha(4)));
  ASSERT_EQ(held.j["verdict"], "held-surprise") << held.cmd.out << held.cmd.err;
  const double before = JsonOf(VerityBin() + " frontier --json" + L)["frontier"][0]["value"].get<double>();
  WriteFile(c.dir + "/meet", "");
  const std::string id = std::to_string(held.j["change"].get<int>());
  auto confirm = [&](const std::string& box) {
    const std::string out = c.dir + "/" + box;
    return "(VERITY_BOX_LABEL=" + box + " " + VerityBin() + " confirm --json" + L + " " + id + " >" + out + ".out 2>" +
           out + ".err; echo $? >" + out + ".rc) & ";
  };
  auto r = Shell(confirm("boxa") + confirm("boxb") + "wait");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string rc = ReadFile(c.dir + "/boxa.rc") + ReadFile(c.dir + "/boxb.rc");
  EXPECT_TRUE(rc == "0\n1\n" || rc == "1\n0\n")
      << "exactly one confirm banks it: " << rc << ReadFile(c.dir + "/boxa.err") << ReadFile(c.dir + "/boxb.err");
  const std::string errs = ReadFile(c.dir + "/boxa.err") + ReadFile(c.dir + "/boxb.err");
  EXPECT_NE(errs.find("was scored again while deep parity ran"), std::string::npos) << errs;
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM frontier_events WHERE reason = 'confirmed'"), 1);
  const double after = JsonOf(VerityBin() + " frontier --json" + L)["frontier"][0]["value"].get<double>();
  const double once = before * (1 + held.j["gain"].get<double>());
  EXPECT_NEAR(after, once, once * 1e-3) << "the held gain was banked other than once";
  EXPECT_EQ(Count(c.db, "SELECT count(*) FROM parity_results WHERE mode = 'deep'"), 2) << "both deep runs are kept";
  auto v = Shell(VerityBin() + " ledger verify" + L);
  EXPECT_NE(v.out.find("verdict=PASS"), std::string::npos) << v.out;
  std::printf("teams: two boxes confirmed change %s at once: one banked it, the other was refused; verify PASS\n",
              id.c_str());
}

}  // namespace
}  // namespace verity::test
