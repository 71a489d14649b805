// A scripted history leaves exactly that story in `verity history` and `show`:
// change accepted, frontier moves, a parked change re-measured and promoted, a
// revert refused for weak evidence, a revert accepted, a reapply that retracts
// the revert's evidence.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

TEST(History, ScriptedStory) {
  const std::string dir = TempDir("story"), db = FreshLedger(dir);
  const std::string L = " --ledger " + db;
  // The parked change's head: worth +1.2% on today's main, +3.5% once main moves.
  WriteFile(dir + "/parked.mean", "1012");
  // Its base bench runs whatever main's binary is now (policy v4: the step is from where the frontier stands).
  WriteFile(dir + "/main.sha", std::string(64, '0'));
  auto parked = Submit(db, "tiny tweak", 2, Bench(dir, "p-base", 1000, 0.003, 1, "--sha-file " + dir + "/main.sha"),
                       std::string(FAKE_BENCH) + " --mean-file " + dir +
                           "/parked.mean --noise 0.003 --seed 2 --state " + dir + "/p-head.state",
                       Parity());
  ASSERT_EQ(parked.cmd.exit_code, 0) << parked.cmd.err;
  EXPECT_EQ(parked.j["verdict"], "none");
  const int parked_id = parked.j["change"];

  auto big = Submit(db, "fast kernels", 7, Bench(dir, "b-base", 1000, 0.003, 3, "--sha " + std::string(64, '0')),
                    Bench(dir, "b-head", 1070, 0.003, 4, "--sha " + std::string(64, 'b')),
                    Parity("--artifact " + std::string(64, 'b')));
  EXPECT_EQ(big.j["verdict"], "accepted");
  EXPECT_EQ(big.j["tier"], "m");
  const int big_id = big.j["change"];
  EXPECT_GT(big.j["frontier_after"].get<double>(), big.j["frontier_before"].get<double>());

  auto none_hist = JsonOf(VerityBin() + " history none --json" + L);
  ASSERT_EQ(none_hist["none"].size(), 1u);
  EXPECT_TRUE(none_hist["none"][0]["queued"].get<bool>()) << "frontier moved: the parked change must be queued";

  WriteFile(dir + "/parked.mean", "1035");
  WriteFile(dir + "/main.sha", std::string(64, 'b'));  // main rebuilt with the fast kernels
  auto rem = JsonOf(VerityBin() + " remeasure --json" + L);
  ASSERT_EQ(rem["remeasured"].size(), 1u);
  EXPECT_EQ(rem["remeasured"][0]["change"], parked_id);
  EXPECT_EQ(rem["remeasured"][0]["verdict"], "accepted");
  EXPECT_EQ(rem["remeasured"][0]["tier"], "s");
  // Nothing queued any more, except what the promotion re-queued (nothing is parked).
  auto rem2 = JsonOf(VerityBin() + " remeasure --json" + L);
  EXPECT_EQ(rem2["remeasured"].size(), 0u);

  // A revert with weak evidence: main without the change is no faster.
  auto weak = Shell(VerityBin() + " revert --json" + L + " " + std::to_string(big_id) +
                    " --reason 'suspect it regressed' --base-cmd " + Quote(Bench(dir, "r1-base", 1000, 0.003, 5)) +
                    " --head-cmd " + Quote(Bench(dir, "r1-head", 1000, 0.003, 6)) + " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(weak.exit_code, 0) << weak.err;
  auto weak_j = nlohmann::json::parse(weak.out);
  EXPECT_EQ(weak_j["verdict"], "refused");

  // A revert with (bad, as it later turns out) strong evidence.
  auto strong =
      Shell(VerityBin() + " revert --json" + L + " " + std::to_string(big_id) +
            " --reason 'costs 5% on the long workload' --base-cmd " + Quote(Bench(dir, "r2-base", 1000, 0.003, 7)) +
            " --head-cmd " + Quote(Bench(dir, "r2-head", 1050, 0.003, 8, "--sha " + std::string(64, 'c'))) +
            " --parity-cmd " + Quote(Parity("--artifact " + std::string(64, 'c'))));
  ASSERT_EQ(strong.exit_code, 0) << strong.err;
  auto strong_j = nlohmann::json::parse(strong.out);
  EXPECT_EQ(strong_j["verdict"], "accepted");
  const int revert_id = strong_j["change"], revert_run = strong_j["run"];

  // The ladder so far: seed x big x promoted parked change x the (wrong) revert.
  const double before_revert = strong_j["frontier_before"].get<double>();
  EXPECT_NEAR(strong_j["frontier_after"].get<double>(), before_revert * (1 + strong_j["gain"].get<double>()), 1e-6);
  auto reapply = Shell(VerityBin() + " reapply --json --predict 7" + L + " " + std::to_string(revert_id) +
                       " --reason 'the revert was measured on a stale build' --retract " + std::to_string(revert_run) +
                       " --base-cmd " + Quote(Bench(dir, "ra-base", 1000, 0.003, 9, "--sha " + std::string(64, 'c'))) +
                       " --head-cmd " + Quote(Bench(dir, "ra-head", 1070, 0.003, 10, "--sha " + std::string(64, 'd'))) +
                       " --parity-cmd " + Quote(Parity("--artifact " + std::string(64, 'd'))));
  ASSERT_EQ(reapply.exit_code, 0) << reapply.err;
  auto reapply_j = nlohmann::json::parse(reapply.out);
  EXPECT_EQ(reapply_j["verdict"], "accepted");
  const int reapply_id = reapply_j["change"];
  // Retracting the revert's evidence restores the frontier as if it had never
  // counted; the reapply does not count the change a second time.
  EXPECT_NEAR(reapply_j["frontier_after"].get<double>(), before_revert, 1e-6) << reapply_j["note"];
  EXPECT_NEAR(JsonOf(VerityBin() + " frontier --json" + L)["frontier"][0]["value"].get<double>(), before_revert, 1e-6);
  EXPECT_NE(reapply_j["note"].get<std::string>().find("not counted"), std::string::npos) << reapply_j["note"];

  auto reverts = JsonOf(VerityBin() + " history reverts --json" + L);
  ASSERT_EQ(reverts["reverts"].size(), 3u);
  EXPECT_EQ(reverts["reverts"][0]["verdict"], "refused");
  EXPECT_EQ(reverts["reverts"][0]["found_wrong"], false);
  EXPECT_EQ(reverts["reverts"][1]["verdict"], "accepted");
  EXPECT_EQ(reverts["reverts"][1]["found_wrong"], true);
  EXPECT_EQ(reverts["reverts"][1]["reapplied_by"], reapply_id);
  EXPECT_EQ(reverts["reverts"][2]["kind"], "reapply");

  auto retr = JsonOf(VerityBin() + " history retractions --json" + L);
  ASSERT_EQ(retr["retractions"].size(), 1u);
  EXPECT_EQ(retr["retractions"][0]["run"], revert_run);
  EXPECT_EQ(retr["retractions"][0]["by_change"], reapply_id);
  EXPECT_NE(retr["retractions"][0]["reason"].get<std::string>().find("stale build"), std::string::npos);
  EXPECT_TRUE(retr["retractions"][0]["base_median"].is_number()) << "a retraction keeps the number";

  auto none = JsonOf(VerityBin() + " history none --json" + L);
  ASSERT_EQ(none["none"].size(), 1u);
  ASSERT_EQ(none["none"][0]["attempts"].size(), 2u);
  EXPECT_EQ(none["none"][0]["attempts"][0]["verdict"], "none");
  EXPECT_EQ(none["none"][0]["attempts"][1]["verdict"], "accepted");
  EXPECT_EQ(none["none"][0]["attempts"][1]["purpose"], "remeasure");
  EXPECT_GT(none["none"][0]["attempts"][1]["frontier_before"].get<double>(),
            none["none"][0]["attempts"][0]["frontier_before"].get<double>());

  auto show = JsonOf(VerityBin() + " show --json" + L + " " + std::to_string(big_id));
  EXPECT_EQ(show["state"], "accepted");
  EXPECT_EQ(show["change"]["predict_pct"], 7.0);
  ASSERT_EQ(show["related"].size(), 2u);
  EXPECT_EQ(show["runs"][0]["samples"].get<int>(), 2 + 4 * show["runs"][0]["scores"][0]["rounds"].get<int>());
  EXPECT_EQ(show["runs"][0]["warmup_samples"], 2);
  EXPECT_EQ(show["runs"][0]["artifacts"].size(), 2u);

  // The retracted revert no longer counts toward the frontier.
  auto f = JsonOf(VerityBin() + " frontier --json" + L);
  EXPECT_NE(f["frontier"][0]["run"], revert_run);
  auto v = Shell(VerityBin() + " ledger verify" + L);
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("verdict=PASS"), std::string::npos);
}

}  // namespace
}  // namespace verity::test

namespace verity::test {
namespace {

TEST(History, RevertOnParityEvidenceThatMainIsWrong) {
  const std::string dir = TempDir("revert-parity"), db = FreshLedger(dir);
  auto c = Submit(db, "change", 7, Bench(dir, "b", 1000, 0.003, 1), Bench(dir, "h", 1070, 0.003, 2), Parity());
  ASSERT_EQ(c.j["verdict"], "accepted");
  const std::string id = std::to_string(c.j["change"].get<int>());
  const std::string marker = dir + "/bench-ran";
  // A base parity command that prints nothing is no evidence: speed must decide (equal here: refused).
  auto weak = Shell(VerityBin() + " revert --json --ledger " + db + " " + id + " --reason 'no evidence' --base-cmd " +
                    Quote(Bench(dir, "wb", 1000, 0.003, 5)) + " --head-cmd " + Quote(Bench(dir, "wh", 1000, 0.003, 6)) +
                    " --base-parity-cmd " + Quote(Parity("--silent")) + " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(weak.exit_code, 0) << weak.err;
  EXPECT_EQ(nlohmann::json::parse(weak.out)["verdict"], "refused");
  // Main without the change failing parity is no revert at all.
  auto broken = Shell(VerityBin() + " revert --json --ledger " + db + " " + id +
                      " --reason 'main is wrong' --base-cmd " + Quote(Bench(dir, "xb", 1000, 0.003, 7)) +
                      " --head-cmd " + Quote(Bench(dir, "xh", 1000, 0.003, 8)) + " --base-parity-cmd " +
                      Quote(Parity("--top1 0.5 --exit 1")) + " --parity-cmd " + Quote(Parity("--top1 0.5 --exit 1")));
  EXPECT_EQ(nlohmann::json::parse(broken.out)["verdict"], "rejected-parity") << broken.out;
  const double seed = c.j["frontier_before"].get<double>();
  // Main fails parity and main without the change passes: that is evidence
  // enough, no speed is measured, and the change's factor leaves the ladder.
  auto r = Shell(VerityBin() + " revert --json --ledger " + db + " " + id + " --reason 'main is wrong' --base-cmd " +
                 Quote("touch " + marker + "; " + Bench(dir, "rb", 1000, 0.003, 3)) + " --head-cmd " +
                 Quote(Bench(dir, "rh", 1000, 0.003, 4)) + " --base-parity-cmd " +
                 Quote(Parity("--top1 0.5 --kl 0.3 --exit 1")) + " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "accepted");
  EXPECT_NE(j["note"].get<std::string>().find("parity evidence that main is wrong"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_NEAR(j["frontier_after"].get<double>(), seed, 1e-6) << "the wrong change's gain must leave the frontier";
  // The change's factor is undone: it no longer counts, so it cannot be reverted again.
  auto again = Shell(VerityBin() + " revert --ledger " + db + " " + id +
                     " --reason again --base-cmd true --head-cmd true --parity-cmd " + Quote(Parity()));
  EXPECT_NE(again.err.find("does not count in this box's frontier"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace verity::test
