// Box noise profiles (issue 14): the A/A summary, the rounds it implies, and
// `verity calibrate` + `verity submit` through the real binary: a quiet box's
// profile sets the rounds, a noisy box's refuses to pretend.
#include <gtest/gtest.h>

#include "ledger/noise.h"
#include "ledger/stats.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

std::string Note(const Submitted& s) { return s.j.contains("note") ? s.j["note"].get<std::string>() : s.cmd.err; }

TEST(Noise, SummaryOfAnAARun) {
  std::vector<ledger::Round> rounds;
  for (int i = 0; i < 9; i++) {
    const double wobble = (i % 3 - 1) * 0.01;  // ratios 0.99, 1.00, 1.01 ...
    rounds.push_back({100.0, 100.0 * (1 + wobble), 100.0 * (1 + wobble), 100.0});
  }
  rounds.push_back({100.0, 150.0, 150.0, 100.0});  // one outlier round
  auto p = ledger::SummarizeAA(rounds, true);
  EXPECT_EQ(p.rounds, 10);
  ASSERT_EQ(p.ratios.size(), 10u);
  EXPECT_NEAR(p.round_mad, 0.01, 1e-12);
  EXPECT_NEAR(p.sigma, 0.014826, 1e-9);
  EXPECT_EQ(p.outlier_rounds, 1);
  EXPECT_GT(p.drift_per_round, 0.0) << "the last round's level is higher";
}

TEST(Noise, RoundsToResolveTheGate) {
  const double alpha = 0.05 / 2 / 5;  // policy v2, first attempt, 5 looks
  // n >= (z x 1.2533 x sigma / gate)^2 with z(0.005) = 2.5758.
  EXPECT_EQ(ledger::RoundsToResolve(0.01, 0.02, alpha), 3);
  EXPECT_EQ(ledger::RoundsToResolve(0.034, 0.02, alpha), 31) << "issue 14's noisy box: past the 30-round cap";
  EXPECT_EQ(ledger::RoundsToResolve(0.0, 0.02, alpha), 1);
}

TEST(Noise, CalibrateThenSubmitUsesTheProfile) {
  Case c = Fresh("noise");
  const std::string quiet = Bench(c.dir, "aa", 1000, 0.002, 31, "--model m.bin");
  auto cal = Shell(VerityBin() + " calibrate --ledger " + c.db + " --rounds 8 --cmd " + Quote(quiet));
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  EXPECT_NE(cal.out.find("calibrate: box "), std::string::npos) << cal.out;
  EXPECT_NE(cal.out.find("workload 'm.bin f32 1t pp8+tg8' decode_tok_s: per-round sigma"), std::string::npos)
      << cal.out;
  auto r = Submit(c.db, "quiet box", 7, Bench(c.dir, "b", 1000, 0.002, 33, "--model m.bin"),
                  Bench(c.dir, "h", 1070, 0.002, 34, "--model m.bin"), Parity());
  ASSERT_EQ(r.cmd.exit_code, 0) << r.cmd.err;
  EXPECT_EQ(r.j["verdict"], "accepted") << r.cmd.out;
  EXPECT_NE(Note(r).find("box noise profile 1"), std::string::npos) << Note(r);
  auto show = Shell(VerityBin() + " show --ledger " + c.db + " 1");
  EXPECT_NE(show.out.find("    box noise: profile 1 ("), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("    workload: m.bin f32 1t pp8+tg8"), std::string::npos) << show.out;
  auto report = Shell(VerityBin() + " report --ledger " + c.db + " --out " + c.dir + "/CHANGELOG.md");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string md = ReadFile(c.dir + "/CHANGELOG.md");
  EXPECT_NE(md.find("## Box noise"), std::string::npos);
  EXPECT_NE(md.find("| 1 | `"), std::string::npos) << "profile 1 is listed";

  // The same box, now noisy (8% per sample): a submission cannot resolve the
  // gate in 30 rounds and says so instead of scoring `none`.
  const std::string noisy = Bench(c.dir, "aa2", 1000, 0.08, 41, "--model m.bin");
  ASSERT_EQ(Shell(VerityBin() + " calibrate --ledger " + c.db + " --rounds 10 --cmd " + Quote(noisy)).exit_code, 0);
  auto n = Submit(c.db, "noisy box", 7, Bench(c.dir, "b2", 1000, 0.08, 43, "--model m.bin"),
                  Bench(c.dir, "h2", 1070, 0.08, 44, "--model m.bin"), Parity());
  EXPECT_EQ(n.cmd.exit_code, 1) << "a run that could not resolve fails" << n.cmd.err;
  EXPECT_NE(n.cmd.err.find("failed: this box is too noisy to resolve the +2.00% gate within 30 rounds"),
            std::string::npos)
      << n.cmd.err;
  EXPECT_NE(n.cmd.err.find("allow more with --max-rounds"), std::string::npos) << n.cmd.err;
  auto shown = JsonOf(VerityBin() + " show --json --ledger " + c.db + " 2");
  EXPECT_EQ(shown["runs"][0]["scores"][0]["verdict"], "failed") << "recorded, not `none`";
}

TEST(Noise, CalibrateRefusesBadInput) {
  Case c = Fresh("noise-bad");
  auto r = Shell(VerityBin() + " calibrate --ledger " + c.db + " --rounds 2 --cmd true");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--rounds 2 is outside [5, 200]"), std::string::npos) << r.err;
  auto g = Shell(VerityBin() + " calibrate --ledger " + c.db + " --cmd 'echo garbage'");
  EXPECT_EQ(g.exit_code, 1);
  EXPECT_NE(g.err.find("calibrate command"), std::string::npos) << g.err;
}

}  // namespace
}  // namespace verity::test
