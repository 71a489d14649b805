// verity submit with bench commands of known distribution: each verdict, the
// correctness gate before speed, and the false-positive rate and power.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

TEST(Scoring, KnownGainsLandInTheirTiers) {
  struct Want {
    const char* name;
    double head_mean, noise, predict;
    const char* verdict;
    const char* tier;
  };
  const Want wants[] = {{"+3.5% at 0.5% noise", 1035, 0.005, 3.5, "accepted", "s"},
                        {"+0.5%", 1005, 0.005, 0.5, "none", "none"},
                        {"+7%", 1070, 0.005, 7, "accepted", "m"},
                        {"6x head", 6000, 0.005, 500, "rejected-implausible", "none"}};
  int seed = 100;
  for (const auto& w : wants) {
    Case c = Fresh("tier");
    auto s = Submit(c.db, w.name, w.predict, Bench(c.dir, "base", 1000, w.noise, seed),
                    Bench(c.dir, "head", w.head_mean, w.noise, seed + 1), Parity());
    seed += 2;
    ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
    EXPECT_EQ(s.j["verdict"], w.verdict) << w.name << ": " << s.cmd.out;
    EXPECT_EQ(s.j["tier"], w.tier) << w.name;
    EXPECT_GE(s.j["rounds"].get<int>(), 5);
    EXPECT_EQ(s.j["frontier_before"].get<double>(), s.j["base_median"].get<double>()) << "seeded from base";
    EXPECT_NEAR(s.j["gate"].get<double>(), 0.02 * s.j["frontier_before"].get<double>(), 1e-9);
    for (const char* k : {"change", "run", "gain", "ci", "frontier_after"}) EXPECT_TRUE(s.j.contains(k)) << k;
  }
}

TEST(Scoring, FailingParityIsRejectedAndTheHeadBenchNeverRuns) {
  Case c = Fresh("parity");
  const std::string marker = c.dir + "/head-ran";
  auto s = Submit(c.db, "corrupt but fast", 10, Bench(c.dir, "base", 1000, 0.005, 1),
                  Bench(c.dir, "head", 1300, 0.005, 2, "--touch " + marker), Parity("--top1 0.6 --kl 0.4 --exit 1"));
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "rejected-parity");
  EXPECT_TRUE(s.j["gain"].is_null());
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the head's bench command ran";
  auto show = JsonOf(VerityBin() + " show --json --ledger " + c.db + " " + std::to_string(s.j["change"].get<int>()));
  EXPECT_EQ(show["runs"][0]["samples"], 0);
  EXPECT_EQ(show["runs"][0]["parity"][0]["passed"], 0);
}

TEST(Scoring, AbsentParityEvidenceIsRefusedNotGreen) {
  // The guard disabled: the parity command exits 0 but prints nothing, or fails to run.
  for (const std::string& parity :
       {Parity("--silent"), std::string("true"), std::string("exit 0"), std::string("/nonexistent/parity")}) {
    Case c = Fresh("silent");
    const std::string marker = c.dir + "/head-ran";
    auto s = Submit(c.db, "no evidence", 3, Bench(c.dir, "base", 1000, 0.005, 1),
                    Bench(c.dir, "head", 1035, 0.005, 2, "--touch " + marker), parity);
    ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
    EXPECT_EQ(s.j["verdict"], "rejected-parity") << parity;
    EXPECT_NE(s.j["note"].get<std::string>().find("no parity evidence"), std::string::npos) << s.j["note"];
    EXPECT_FALSE(std::filesystem::exists(marker));
  }
  // Exit 1 with JSON that claims to pass is inconsistent: refused.
  Case c = Fresh("inconsistent");
  auto s = Submit(c.db, "exit 1", 3, Bench(c.dir, "base", 1000, 0.005, 1), Bench(c.dir, "head", 1035, 0.005, 2),
                  Parity("--exit 1"));
  EXPECT_EQ(s.j["verdict"], "rejected-parity");
}

TEST(Scoring, BitIdentityIsProvedByLogitsHashes) {
  Case c = Fresh("bits");
  std::string same(64, 'c'), other(64, 'd');
  auto ok = Submit(c.db, "same bits", 3.5, Bench(c.dir, "base", 1000, 0.005, 1), Bench(c.dir, "head", 1035, 0.005, 2),
                   Parity("--all-sha " + same),
                   "--claim-bit-identical --base-parity-cmd " + Quote(Parity("--all-sha " + same)));
  EXPECT_EQ(ok.j["verdict"], "accepted") << ok.cmd.out << ok.cmd.err;
  auto bad = Submit(c.db, "different bits", 3.5, Bench(c.dir, "base2", 1000, 0.005, 3),
                    Bench(c.dir, "head2", 1035, 0.005, 4), Parity("--all-sha " + same),
                    "--claim-bit-identical --base-parity-cmd " + Quote(Parity("--all-sha " + other)));
  EXPECT_EQ(bad.j["verdict"], "rejected-parity");
  EXPECT_NE(bad.j["note"].get<std::string>().find("logit rows differ"), std::string::npos);
  auto none = Submit(c.db, "unproved", 3.5, Bench(c.dir, "base3", 1000, 0.005, 5),
                     Bench(c.dir, "head3", 1035, 0.005, 6), Parity(), "--claim-bit-identical");
  EXPECT_EQ(none.j["verdict"], "rejected-parity");
}

TEST(Scoring, SurpriseIsHeldUntilDeepParityConfirms) {
  Case c = Fresh("surprise");
  auto s = Submit(c.db, "too good", 2, Bench(c.dir, "base", 1000, 0.005, 1), Bench(c.dir, "head", 1150, 0.005, 2),
                  Parity("--deep-top1 1.0"));
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "held-surprise");
  EXPECT_EQ(s.j["tier"], "l");
  EXPECT_EQ(s.j["frontier_after"], s.j["frontier_before"]);
  const std::string id = std::to_string(s.j["change"].get<int>());
  auto f = JsonOf(VerityBin() + " frontier --json --ledger " + c.db);
  EXPECT_EQ(f["frontier"][0]["reason"], "seed") << "a held result moved the frontier";
  auto conf = JsonOf(VerityBin() + " confirm --json --ledger " + c.db + " " + id);
  EXPECT_EQ(conf["verdict"], "accepted");
  EXPECT_GT(conf["frontier_after"].get<double>(), conf["frontier_before"].get<double>() * 1.1);
  f = JsonOf(VerityBin() + " frontier --json --ledger " + c.db);
  EXPECT_EQ(f["frontier"][0]["reason"], "confirmed");
  // Confirming again: nothing is held any more.
  auto again = Shell(VerityBin() + " confirm --ledger " + c.db + " " + id);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("is not held"), std::string::npos);

  // A surprise whose deep parity fails is rejected and never banked.
  Case d = Fresh("surprise-deep");
  auto t = Submit(d.db, "too good, wrong deep", 2, Bench(d.dir, "base", 1000, 0.005, 1),
                  Bench(d.dir, "head", 1150, 0.005, 2), Parity("--deep-top1 0.5"));
  EXPECT_EQ(t.j["verdict"], "held-surprise");
  auto rej = Shell(VerityBin() + " confirm --json --ledger " + d.db + " " + std::to_string(t.j["change"].get<int>()));
  EXPECT_EQ(rej.exit_code, 0) << rej.err;
  EXPECT_NE(rej.out.find("\"verdict\":\"rejected-parity\""), std::string::npos) << rej.out;
}

// --exit-by-verdict gives each verdict class its documented code (docs/ci.md)
// and --markdown writes the PR comment naming the verdict, the gain and what
// to do next; without the flag a scored submission exits 0 whatever it says.
TEST(Scoring, ExitByVerdictAndThePrComment) {
  struct Want {
    const char* name;
    double head_mean, predict;
    std::string parity;
    const char* verdict;
    int exit_code;
    const char* next;  // words of the comment's "Next:" line
  };
  const Want wants[] = {
      {"+7%", 1070, 7, Parity(), "accepted", 0, "merge it"},
      {"+0.5%", 1005, 0.5, Parity(), "none", 3, "stays parked"},
      {"too good", 1150, 2, Parity(), "held-surprise", 3, "verity confirm"},
      {"broken", 1300, 10, Parity("--top1 0.6 --kl 0.4 --exit 1"), "rejected-parity", 4, "Fix correctness first"},
      {"no build named", 1070, 7, Parity("--no-build"), "unverified", 4, "--parity-cmd"},
      {"6x", 6000, 500, Parity(), "rejected-implausible", 4, "a bug report"}};
  int seed = 300;
  for (const auto& w : wants) {
    Case c = Fresh("exit");
    const std::string md = c.dir + "/comment.md";
    auto s = Submit(c.db, w.name, w.predict, Bench(c.dir, "base", 1000, 0.005, seed),
                    Bench(c.dir, "head", w.head_mean, 0.005, seed + 1), w.parity, "--exit-by-verdict --markdown " + md);
    seed += 2;
    EXPECT_EQ(s.j["verdict"], w.verdict) << w.name << ": " << s.cmd.out << s.cmd.err;
    EXPECT_EQ(s.cmd.exit_code, w.exit_code) << w.name << ": " << s.cmd.err;
    const std::string comment = ReadFile(md);
    EXPECT_NE(comment.find("**" + std::string(w.verdict) + "**"), std::string::npos) << comment;
    EXPECT_NE(comment.find("**Next:**"), std::string::npos) << comment;
    EXPECT_NE(comment.find(w.next), std::string::npos) << w.name << ":\n" << comment;
    EXPECT_NE(comment.find("| prediction |"), std::string::npos) << comment;
    EXPECT_NE(comment.find("| parity | head, standard: "), std::string::npos) << comment;
  }
  // Without the flag: scored, so 0, even when rejected.
  Case c = Fresh("exit-plain");
  auto s = Submit(c.db, "broken", 10, Bench(c.dir, "base", 1000, 0.005, 1), Bench(c.dir, "head", 1300, 0.005, 2),
                  Parity("--top1 0.6 --kl 0.4 --exit 1"));
  EXPECT_EQ(s.j["verdict"], "rejected-parity");
  EXPECT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
}

TEST(Scoring, PredictionIsRequired) {
  Case c = Fresh("predict");
  auto r =
      Shell(VerityBin() + " submit --ledger " + c.db + " --title t --base-cmd true --head-cmd true --parity-cmd true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--predict"), std::string::npos) << r.err;
}

TEST(Statistics, FalsePositiveRateAndPower) {
  int aa_above = 0, power_hits = 0;
  std::string aa_verdicts, power_verdicts;
  for (int i = 0; i < 20; i++) {
    Case c = Fresh("aa");
    auto s = Submit(c.db, "A/A", 0, Bench(c.dir, "base", 1000, 0.01, 1000 + 2 * i),
                    Bench(c.dir, "head", 1000, 0.01, 1001 + 2 * i), Parity());
    ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
    aa_verdicts += s.j["verdict"].get<std::string>() + "/" + s.j["tier"].get<std::string>() + " ";
    if (s.j["tier"] != "none") aa_above++;
  }
  for (int i = 0; i < 10; i++) {
    Case c = Fresh("power");
    auto s = Submit(c.db, "+4%", 4, Bench(c.dir, "base", 1000, 0.01, 5000 + 2 * i),
                    Bench(c.dir, "head", 1040, 0.01, 5001 + 2 * i), Parity());
    ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
    power_verdicts += s.j["verdict"].get<std::string>() + "/" + s.j["tier"].get<std::string>() + " ";
    if (s.j["verdict"] == "accepted" && s.j["tier"] != "none") power_hits++;
  }
  std::printf("A/A (1%% noise): %d/20 scored above none [%s]\n", aa_above, aa_verdicts.c_str());
  std::printf("+4%% (1%% noise): %d/10 scored s or better [%s]\n", power_hits, power_verdicts.c_str());
  EXPECT_LE(aa_above, 1);
  EXPECT_GE(power_hits, 9);
}

}  // namespace
}  // namespace verity::test
