// Identity-based counting (issue 24, holes 1-4): a frontier step is a move
// from one artifact to another; an artifact counts at most once per frontier;
// a resubmission of the same artifact pair re-measures the same change on the
// same error budget; reverts and reapplies are re-checked where they are
// scored. Every case runs the real binary with fake commands of known output.
#include <gtest/gtest.h>

#include <string>

#include "ledger/migrations.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

int Seed() {
  static int seed = 9100;
  return seed += 2;
}
std::string Art(char c) { return std::string(64, c); }
// A bench of `mean` whose binary is artifact `art` (64 x the char).
std::string BenchOf(const Case& c, const std::string& name, double mean, char art, const std::string& extra = "",
                    double noise = 0.003) {
  return Bench(c.dir, name, mean, noise, Seed(), "--sha " + Art(art) + " " + extra);
}
std::string ParityOf(char art) { return Parity("--artifact " + Art(art)); }
nlohmann::json Json(const CommandResult& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (...) {
    return nlohmann::json();
  }
}
nlohmann::json Frontiers(const std::string& db) {
  return JsonOf(VerityBin() + " frontier --json --ledger " + db)["frontier"];
}
double Frontier(const std::string& db) {
  auto f = Frontiers(db);
  return f.empty() ? -1.0 : f[0]["value"].get<double>();
}
std::string Str(const nlohmann::json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
}

// Hole 1: the same base/head pair submitted twice moves the frontier once.
TEST(Counting, TheSameArtifactPairCountsOnce) {
  Case c = Fresh("pair-once");
  const std::string base = BenchOf(c, "b", 1000, 'b'), head = BenchOf(c, "h", 1070, 'c');
  auto first = Submit(c.db, "x", 7, base, head, ParityOf('c'));
  ASSERT_EQ(first.j["verdict"], "accepted") << first.cmd.out << first.cmd.err;
  const double after = Frontier(c.db);
  auto again = Submit(c.db, "x again", 7, base, head, ParityOf('c'));
  ASSERT_EQ(again.cmd.exit_code, 0) << again.cmd.err;
  EXPECT_NE(again.j["verdict"], "accepted") << again.cmd.out;
  EXPECT_NE(Str(again.j, "note").find("already counts"), std::string::npos) << again.cmd.out;
  EXPECT_NEAR(Frontier(c.db), after, 1e-9) << "the same gain was banked twice";
  // A step from where the frontier stood before (base b) to another head is stale too.
  auto stale = Submit(c.db, "from the old base", 5, base, BenchOf(c, "h2", 1050, 'd'), ParityOf('d'));
  EXPECT_NE(stale.j["verdict"], "accepted") << stale.cmd.out;
  EXPECT_NE(Str(stale.j, "note").find("where this frontier stood before"), std::string::npos) << stale.cmd.out;
  EXPECT_NEAR(Frontier(c.db), after, 1e-9);
  // From where it stands (c), a new head counts.
  auto next = Submit(c.db, "next", 5, BenchOf(c, "b3", 1000, 'c'), BenchOf(c, "h3", 1050, 'e'), ParityOf('e'));
  EXPECT_EQ(next.j["verdict"], "accepted") << next.cmd.out;
  EXPECT_GT(Frontier(c.db), after * 1.03);
}

// Hole 1: a held pair resubmitted with another prediction is still held, and
// confirming both banks the gain once.
TEST(Counting, AResubmissionCannotDodgeTheSurpriseHold) {
  Case c = Fresh("pair-hold");
  const std::string base = BenchOf(c, "b", 1000, 'b'), head = BenchOf(c, "h", 1070, 'c');
  auto held = Submit(c.db, "x", 1, base, head, ParityOf('c'));
  ASSERT_EQ(held.j["verdict"], "held-surprise") << held.cmd.out << held.cmd.err;
  const double seed = Frontier(c.db);
  auto again = Submit(c.db, "x, predicted after the fact", 7, base, head, ParityOf('c'));
  EXPECT_EQ(again.j["verdict"], "held-surprise") << again.cmd.out;
  for (const auto& s : {held, again}) {
    if (s.j["verdict"] != "held-surprise") continue;
    Shell(VerityBin() + " confirm --json --ledger " + c.db + " " + std::to_string(s.j["change"].get<int>()));
  }
  const double once = seed * (1 + held.j["gain"].get<double>());
  EXPECT_NEAR(Frontier(c.db), once, once * 1e-3) << "the held gain was banked more than once";
}

// Hole 2: a resubmission spends from the same error budget, and so does a
// run that failed after it took a look.
TEST(Counting, AResubmissionContinuesTheErrorBudget) {
  Case c = Fresh("pair-budget");
  const std::string base = BenchOf(c, "b", 1000, 'b'), head = BenchOf(c, "h", 1000, 'c');
  auto first = Submit(c.db, "x", 1, base, head, ParityOf('c'));
  ASSERT_EQ(first.j["attempt"], 0) << first.cmd.out << first.cmd.err;
  auto again = Submit(c.db, "x again", 1, base, head, ParityOf('c'));
  EXPECT_EQ(again.j["attempt"], 1) << again.cmd.out;
  EXPECT_NEAR(again.j["alpha"].get<double>(), 0.0025, 1e-12) << again.cmd.out;

  // At the gate, 1% noise: the look at round 10 continues, and the head's bench
  // then crashes in round 12 (its 24th run: warm-up 1, then 2 a round).
  Case f = Fresh("fail-budget");
  const std::string fb = BenchOf(f, "b", 1000, 'b', "", 0.01);
  auto failed = Submit(f.db, "flaky", 2, fb, BenchOf(f, "h", 1020, 'c', "--fail-after 23", 0.01), ParityOf('c'));
  ASSERT_EQ(failed.j["verdict"], "failed") << failed.cmd.out << failed.cmd.err;
  ASSERT_GE(failed.j["rounds"].get<int>() + 0, 0);
  auto retry = Submit(f.db, "flaky, re-rolled", 2, fb, BenchOf(f, "h2", 1020, 'c', "", 0.01), ParityOf('c'));
  EXPECT_EQ(retry.j["attempt"], 1) << "the failed run took a look and spent its alpha: " << retry.cmd.out;
}

// Issue 41, finding 2: the same base and head commits rebuilt into other
// artifacts (a build that is not byte-reproducible) are the same change: one
// error budget, counted once. Before, 100 -> 120 -> 144 with no head ever
// measured above 120.
TEST(Counting, TheSameCommitsRebuiltCountOnce) {
  Case c = Fresh("rebuilt");
  auto bench = [&](const std::string& name, double mean, char art, const std::string& build) {
    return BenchOf(c, name, mean, art, "--build " + build);
  };
  auto first = Submit(c.db, "x", 20, bench("b", 1000, 'b', "c1"), bench("h", 1200, 'c', "c2"), ParityOf('c'));
  ASSERT_EQ(first.j["verdict"], "accepted") << first.cmd.out << first.cmd.err;
  ASSERT_EQ(first.j["attempt"], 0);
  const double after = Frontier(c.db);
  auto again =
      Submit(c.db, "x, rebuilt", 20, bench("b2", 1000, 'd', "c1"), bench("h2", 1200, 'e', "c2"), ParityOf('e'));
  ASSERT_EQ(again.cmd.exit_code, 0) << again.cmd.err;
  EXPECT_NE(again.j["verdict"], "accepted") << again.cmd.out;
  EXPECT_NE(Str(again.j, "note").find("head build c2 already counts"), std::string::npos) << again.cmd.out;
  EXPECT_EQ(again.j["attempt"], 1) << "a rebuild continues the change's error budget: " << again.cmd.out;
  EXPECT_NEAR(Frontier(c.db), after, 1e-9) << "the same commits were banked twice";
  // A dirty build id names no source: two different working trees on one
  // commit are told apart by their artifacts, as before.
  auto dirty =
      Submit(c.db, "dirty", 5, bench("b3", 1200, 'e', "c2"), bench("h3", 1260, 'f', "c2-dirty"), ParityOf('f'));
  EXPECT_EQ(dirty.j["verdict"], "accepted") << dirty.cmd.out;
  EXPECT_EQ(dirty.j["attempt"], 0) << dirty.cmd.out;
}

// Issue 41, finding 2 (continuity): a step from a base the frontier has never
// stood at counts only if its base samples are consistent with the frontier's
// value. A base at 1000 under a frontier of 1200 would carry it to 1440,
// above every head ever measured.
TEST(Counting, AStepFromAnUnseenBaseMustStartWhereTheFrontierStands) {
  Case c = Fresh("continuity");
  auto bench = [&](const std::string& name, double mean, char art, const std::string& build) {
    return BenchOf(c, name, mean, art, "--build " + build);
  };
  auto first = Submit(c.db, "x", 20, bench("b", 1000, 'b', "c1"), bench("h", 1200, 'c', "c2"), ParityOf('c'));
  ASSERT_EQ(first.j["verdict"], "accepted") << first.cmd.out << first.cmd.err;
  const double after = Frontier(c.db);
  auto behind = Submit(c.db, "from a slow unseen base", 20, bench("b2", 1000, 'd', "c3"), bench("h2", 1200, 'e', "c4"),
                       ParityOf('e'));
  EXPECT_EQ(behind.j["verdict"], "refused") << behind.cmd.out << behind.cmd.err;
  EXPECT_NE(Str(behind.j, "note").find("never stood at"), std::string::npos) << behind.cmd.out;
  EXPECT_NEAR(Frontier(c.db), after, 1e-9);
  // An unseen base that measures what the frontier says is a step (main moved on by unsubmitted commits).
  auto onward =
      Submit(c.db, "from main moved on", 10, bench("b3", 1200, 'f', "c5"), bench("h3", 1320, 'g', "c6"), ParityOf('g'));
  EXPECT_EQ(onward.j["verdict"], "accepted") << onward.cmd.out << onward.cmd.err;
}

// Issue 41, finding 5: base and head on one artifact (a run-time flag, one
// interpreter running two scripts) are told apart by their commands: a
// resubmission with another prediction is still held, on the same budget.
TEST(Counting, OneArtifactRunTwoWaysIsOneChange) {
  Case c = Fresh("one-artifact");
  const std::string base = BenchOf(c, "b", 1000, 'a'), head = BenchOf(c, "h", 1070, 'a');
  auto held = Submit(c.db, "flag", 1, base, head, ParityOf('a'));
  ASSERT_EQ(held.j["verdict"], "held-surprise") << held.cmd.out << held.cmd.err;
  auto again = Submit(c.db, "flag, predicted after the fact", 7, base, head, ParityOf('a'));
  EXPECT_EQ(again.j["verdict"], "held-surprise") << again.cmd.out;
  EXPECT_EQ(again.j["attempt"], 1) << again.cmd.out;
  EXPECT_NE(Str(again.j, "note").find("scored against change 1's prediction"), std::string::npos) << again.cmd.out;
}

// Issue 41, finding 10: a run spends its attempt once a timed round is taken,
// not only at its first look: a start that looked bad, ended before round 10
// (here the head's bench crashes in round 5: warm-up 1, then 2 a round), and
// resubmitted is attempt 1, at the smaller alpha.
TEST(Counting, AnAbortedStartSpendsItsAttempt) {
  Case c = Fresh("abort-budget");
  const std::string base = BenchOf(c, "b", 1000, 'b');
  auto aborted = Submit(c.db, "x", 2, base, BenchOf(c, "h", 1020, 'c', "--fail-after 9"), ParityOf('c'));
  ASSERT_EQ(aborted.j["verdict"], "failed") << aborted.cmd.out << aborted.cmd.err;
  auto rounds = LedgerSql(c.db, "SELECT max(round) FROM samples");
  ASSERT_EQ(rounds.out, "4\n") << "the run must end before its first look (round 10)";
  auto again = Submit(c.db, "x, started again", 2, base, BenchOf(c, "h2", 1020, 'c'), ParityOf('c'));
  EXPECT_EQ(again.j["attempt"], 1) << "the aborted start took timed rounds: " << again.cmd.out;
  EXPECT_NEAR(again.j["alpha"].get<double>(), 0.0025, 1e-12) << again.cmd.out;
}

// Issue 41, finding 6: VERITY_BOX_LABEL names a box, it does not make a second
// machine: two labels on one machine share the measurement lock, and a step
// that counts under one label is refused under the other.
TEST(Counting, ALabelDoesNotSplitOneMachine) {
  Case c = Fresh("labels");
  const std::string base = BenchOf(c, "b", 1000, 'b'), head = BenchOf(c, "h", 1070, 'c');
  auto as = [&](const std::string& label, const std::string& title) {
    const std::string cmd = "VERITY_BOX_LABEL=" + label + " " + VerityBin() + " submit --json --ledger " + c.db +
                            " --title " + Quote(title) + " --predict 7 --base-cmd " + Quote(base) + " --head-cmd " +
                            Quote(head) + " --parity-cmd " + Quote(ParityOf('c'));
    return Json(Shell(cmd));
  };
  auto a = as("lab-a", "x on a");
  ASSERT_EQ(a["verdict"], "accepted") << a;
  auto b = as("lab-b", "x on b");
  EXPECT_NE(b["verdict"], "accepted") << b;
  EXPECT_NE(Str(b, "note").find("the same machine under another label"), std::string::npos) << b;
  auto locks = LedgerSql(c.db, "SELECT count(DISTINCT path) FROM run_box_locks");
  EXPECT_EQ(locks.out, "1\n") << "two labels held two locks on one machine";
  auto boxes = LedgerSql(c.db, "SELECT count(*) FROM boxes");
  EXPECT_EQ(boxes.out, "2\n") << "each label is still its own box";
}

std::string Revert(const Case& c, int change, const std::string& tag, double head_mean, char head_art,
                   const std::string& extra = "", const std::string& prefix = "") {
  return VerityBin() + " revert --json --ledger " + c.db + " " + std::to_string(change) + " --reason " + tag +
         " --base-cmd " + Quote(prefix + BenchOf(c, tag + "b", 1000, 'c', extra)) + " --head-cmd " +
         Quote(prefix + BenchOf(c, tag + "h", head_mean, head_art, extra)) + " --parity-cmd " +
         Quote(ParityOf(head_art));
}

// Hole 3: a revert counts only on the workload where its change counts.
TEST(Counting, ARevertIsCheckedOnItsOwnWorkload) {
  Case c = Fresh("revert-workload");
  auto a = Submit(c.db, "x", 7, BenchOf(c, "b", 1000, 'b', "--model one.bin"),
                  BenchOf(c, "h", 1070, 'c', "--model one.bin"), ParityOf('c'));
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  const double after = Frontier(c.db);
  auto r = Json(Shell(Revert(c, a.j["change"], "elsewhere", 1050, 'd', "--model two.bin")));
  EXPECT_NE(r["verdict"], "accepted") << r;
  EXPECT_NE(Str(r, "note").find("does not count on workload"), std::string::npos) << r;
  EXPECT_EQ(Frontiers(c.db).size(), 1u) << "the revert seeded another workload's frontier: " << Frontiers(c.db);
  EXPECT_NEAR(Frontier(c.db), after, 1e-9);
}

// Hole 3: two reverts of one change at once, meeting at the box lock: one counts.
TEST(Counting, ConcurrentRevertsCountOnce) {
  Case c = Fresh("revert-race");
  auto a = Submit(c.db, "x", 7, BenchOf(c, "b", 1000, 'b'), BenchOf(c, "h", 1070, 'c'), ParityOf('c'));
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  const double after = Frontier(c.db);
  const std::string meet = UntilOneWaitsForTheLock(c.dir, "meet");
  const std::string ra = Revert(c, a.j["change"], "ra", 1050, 'd', "", meet);
  const std::string rb = Revert(c, a.j["change"], "rb", 1050, 'e', "", meet);
  Shell("(" + ra + " > " + c.dir + "/a.out 2>" + c.dir + "/a.err; echo $? > " + c.dir + "/a.rc) & (" + rb + " > " +
        c.dir + "/b.out 2>" + c.dir + "/b.err; echo $? > " + c.dir + "/b.rc) & wait");
  int accepted = 0;
  double gain = 0;
  for (const char* t : {"a", "b"}) {
    auto j = Json(CommandResult{0, ReadFile(c.dir + "/" + t + ".out"), ""});
    EXPECT_EQ(ReadFile(c.dir + "/" + t + ".rc"), "0\n") << ReadFile(c.dir + "/" + t + ".err");
    if (j["verdict"] == "accepted") accepted++, gain = j["gain"].get<double>();
  }
  EXPECT_EQ(accepted, 1) << ReadFile(c.dir + "/a.out") << ReadFile(c.dir + "/b.out");
  EXPECT_NEAR(Frontier(c.db), after * (1 + gain), after * 1e-6) << "the change was reverted twice";
}

std::string Reapply(const Case& c, int revert, const std::string& tag, double predict, const std::string& head_extra,
                    int retract_run) {
  return VerityBin() + " reapply --json --ledger " + c.db + " " + std::to_string(revert) + " --predict " +
         std::to_string(predict) + " --reason " + tag + " --retract " + std::to_string(retract_run) + " --base-cmd " +
         Quote(BenchOf(c, tag + "b", 1000, 'd', "--guard peak_rss_mb=100")) + " --head-cmd " +
         Quote(BenchOf(c, tag + "h", 1070, 'c', head_extra)) + " --parity-cmd " + Quote(ParityOf('c'));
}

// Hole 4: --retract applies only once the reapply is accepted (after confirm if held).
TEST(Counting, RetractWaitsForAnAcceptedReapply) {
  Case c = Fresh("reapply-retract");
  auto a = Submit(c.db, "x", 7, BenchOf(c, "b", 1000, 'b'), BenchOf(c, "h", 1070, 'c'), ParityOf('c'));
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  auto rev = Json(Shell(Revert(c, a.j["change"], "rev", 1050, 'd')));
  ASSERT_EQ(rev["verdict"], "accepted") << rev;
  const int rid = rev["change"], rrun = rev["run"];
  const std::string L = " --ledger " + c.db;
  auto retractions = [&] { return JsonOf(VerityBin() + " history retractions --json" + L)["retractions"].size(); };
  auto regress = Json(Shell(Reapply(c, rid, "regress", 7, "--guard peak_rss_mb=300", rrun)));
  EXPECT_EQ(regress["verdict"], "rejected-regression") << regress;
  EXPECT_EQ(retractions(), 0u) << "a rejected reapply retracted the revert's run";
  auto held = Json(Shell(Reapply(c, rid, "held", 1, "--guard peak_rss_mb=100", rrun)));
  ASSERT_EQ(held["verdict"], "held-surprise") << held;
  EXPECT_EQ(retractions(), 0u) << "a held reapply retracted the revert's run before any confirm";
  auto conf = JsonOf(VerityBin() + " confirm --json" + L + " " + std::to_string(held["change"].get<int>()));
  EXPECT_EQ(conf["verdict"], "accepted") << conf;
  EXPECT_EQ(retractions(), 1u) << "the confirmed reapply did not retract the revert's run";
  EXPECT_NEAR(Frontier(c.db), a.j["frontier_after"].get<double>(), 1e-6) << "the change's own gain, counted once";
}

// Policy v4 on an old ledger: tests/data/ledger-schema6.db, made by the
// release at bdaefae (schema 6, policy v2), holds the same artifact pair
// accepted twice (v2 counted both). It verifies, migrates to v4, verifies
// again, and derives its frontier counting the pair once; the changelog says why.
TEST(Counting, ASchema6LedgerMigratesAndCountsThePairOnce) {
  const std::string dir = TempDir("schema6"), db = dir + "/ledger.db";
  ASSERT_EQ(Shell("cp " + SourceDir() + "/tests/data/ledger-schema6.db " + db).exit_code, 0);
  auto v = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  auto m = Shell(VerityBin() + " ledger migrate --ledger " + db);
  EXPECT_EQ(m.exit_code, 0) << m.err;
  // Every migration after schema 6 applies, whatever the newest is.
  const int newest = ledger::EmbeddedMigrations().back().version;
  EXPECT_NE(m.out.find("migrate: schema version " + std::to_string(newest) + " (" + std::to_string(newest - 6) +
                       " applied now)"),
            std::string::npos)
      << m.out;
  v = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  auto first = JsonOf(VerityBin() + " show --json --ledger " + db + " 1");
  EXPECT_NE(first.dump().find("\"accepted\""), std::string::npos) << "old scores keep their verdict";
  auto ladder = Frontiers(db)[0];
  EXPECT_EQ(ladder["counted_events"], 2) << ladder;  // the seed and the first step, not the second
  EXPECT_NEAR(ladder["value"].get<double>(), 1070, 5) << "v2 showed ~1145, counting the pair twice";
  ASSERT_EQ(Shell(VerityBin() + " report --ledger " + db + " --out " + dir + "/CHANGELOG.md").exit_code, 0);
  EXPECT_NE(ReadFile(dir + "/CHANGELOG.md").find("scored under policy v2, which counted it; v4 does not"),
            std::string::npos);
}

}  // namespace
}  // namespace verity::test
