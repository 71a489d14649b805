// Policy v3 (issue 23): a guard regresses only beyond the gate and beyond an
// absolute floor for its unit, so 0.3 MiB more on a 13 MiB process cannot
// block a 4.8x speedup while a real memory regression still does. The pure
// rule, then the ledger: floors stored and read back, v2 scores keeping v2.
#include <gtest/gtest.h>

#include <cmath>

#include "ledger/ledger.h"
#include "ledger/read_model.h"
#include "ledger/score.h"
#include "tests/score_rounds.h"
#include "tests/ledger_test_util.h"

namespace verity::ledger {
namespace {

using ::verity::test::Rounds;

// A 4.8x decode gain, predicted, with one memory guard going from `base_mib` to `head_mib`.
ScoreInput FastWithMemory(double base_mib, double head_mib) {
  ScoreInput in;
  in.primary = Rounds("decode_tok_s", 1000, 4.8);
  in.frontier = 1000;
  in.predict_frac = 3.8;
  in.plan = PlanFor(PolicyV3());
  in.guards.push_back(Rounds("peak_rss_mb", base_mib, base_mib / head_mib));
  return in;
}

TEST(GuardFloors, PolicyV3StatesAFloorForEveryUnitSuffix) {
  const Policy p = PolicyV3();
  EXPECT_EQ(p.version, 3);
  EXPECT_TRUE(PolicyV2().guard_floors.empty()) << "v2 judged percent alone";
  for (const char* metric : {"peak_rss_mb", "x_gb", "x_bytes", "x_ns", "x_us", "x_ms", "x_s", "x_seconds",
                             "decode_tok_s", "x_per_s", "prefill_gflops", "x_tflops", "x_gb_s"}) {
    EXPECT_TRUE(MetricDirection(metric).has_value()) << metric;
    EXPECT_TRUE(p.FloorFor(metric).has_value()) << "no floor stated for " << metric;
  }
  EXPECT_EQ(p.FloorFor("peak_rss_mb")->amount, 4.0);
  EXPECT_EQ(p.FloorFor("peak_rss_mb")->unit, "MiB");
  EXPECT_EQ(p.FloorFor("x_bytes")->amount, 4.0 * 1048576);
  EXPECT_EQ(p.FloorFor("x_gb")->unit, "GiB");
  // The longest suffix decides: GB/s is a rate (no floor), not GiB or seconds.
  EXPECT_EQ(p.FloorFor("x_gb_s")->suffix, "_gb_s");
  EXPECT_EQ(p.FloorFor("prefill_tok_s")->amount, 0.0);
  EXPECT_FALSE(p.FloorFor("tokens").has_value());
}

TEST(GuardFloors, ASmallRiseOnASmallProcessDoesNotBlockABigGain) {
  const ScoreInput in = FastWithMemory(13.0, 13.3);  // +0.3 MiB, -2.26% oriented: beyond the 2% gate
  const ScoreResult v2 = Score(PolicyV2(), in);
  EXPECT_EQ(v2.verdict, Verdict::kRejectedRegression) << "v2 judged percent alone: " << v2.note;

  const ScoreResult v3 = Score(PolicyV3(), in);
  EXPECT_EQ(v3.verdict, Verdict::kAccepted) << v3.note;
  EXPECT_EQ(v3.tier, Tier::kXL);
  ASSERT_EQ(v3.guards.size(), 1u);
  const GuardResult& g = v3.guards[0];
  EXPECT_TRUE(g.beyond_gate) << "the gate half of the test still holds";
  EXPECT_FALSE(g.regressed);
  EXPECT_TRUE(g.within_floor());
  EXPECT_NEAR(g.worse_by(), 0.3, 1e-9);
  EXPECT_EQ(FloorText(g), "within floor 4 MiB (+0.3 MiB)");
  EXPECT_NE(v3.note.find("guard peak_rss_mb -2.26% within floor 4 MiB (+0.3 MiB)"), std::string::npos) << v3.note;
}

TEST(GuardFloors, ARealMemoryRegressionStillBlocks) {
  struct Row {
    const char* name;
    double base, head;
    Verdict want;
  };
  const Row rows[] = {
      {"+50 MiB on a 13 MiB process", 13.0, 63.0, Verdict::kRejectedRegression},
      {"+30% on a 430 MiB process", 430.0, 559.0, Verdict::kRejectedRegression},
      {"+4.5 MiB, just beyond the floor", 13.0, 17.5, Verdict::kRejectedRegression},
      {"+3.9 MiB, just within it", 13.0, 16.9, Verdict::kAccepted},
      {"+1.5% on 430 MiB: under the gate", 430.0, 436.45, Verdict::kAccepted},
  };
  for (const auto& r : rows) {
    const ScoreResult s = Score(PolicyV3(), FastWithMemory(r.base, r.head));
    EXPECT_STREQ(VerdictName(s.verdict), VerdictName(r.want)) << r.name << ": " << s.note;
    if (r.want == Verdict::kRejectedRegression) {
      EXPECT_NE(s.note.find("peak_rss_mb"), std::string::npos) << r.name << ": " << s.note;
      EXPECT_EQ(FloorText(s.guards[0]).rfind("beyond floor 4 MiB (+", 0), 0u) << r.name;
    }
  }
}

TEST(GuardFloors, RatesAndTimesKeepTheGateAlone) {
  ScoreInput in = FastWithMemory(13.0, 13.0);
  in.guards.push_back(Rounds("prefill_tok_s", 5000, 0.90));   // -10%, 500 tok/s
  in.guards.push_back(Rounds("kernel_ns", 50, 50.0 / 55.0));  // +5 ns on 50 ns
  const ScoreResult s = Score(PolicyV3(), in);
  EXPECT_EQ(s.verdict, Verdict::kRejectedRegression) << s.note;
  EXPECT_NE(s.note.find("prefill_tok_s"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("kernel_ns"), std::string::npos) << "a floor of 0 is no floor: " << s.note;
  EXPECT_EQ(FloorText(s.guards[1]), "") << "nothing to say about a floor of 0";
}

// The ledger: a ledger of schema 9 scores under v2; opened by this verity it
// is migrated, gets v3 with its floors as stored rows, and its v2 score still
// says v2 while new scores judge size.
TEST(GuardFloors, TheLedgerStoresV3AndOldScoresKeepV2) {
  const test::Case c = test::Fresh("guard-floors");
  const auto bench = [&](const std::string& tag, double decode, double rss, int seed) {
    return test::Bench(c.dir, tag, decode, 0.003, seed, "--guard peak_rss_mb=" + std::to_string(rss));
  };
  const auto submit = [&](Ledger& l, const std::string& title, double rss_head, int seed) {
    ChangeRequest req;
    req.title = title;
    req.predict_pct = 380;
    req.base_cmd = bench("b" + std::to_string(seed), 1000, 13.0, seed);
    req.head_cmd = bench("h" + std::to_string(seed), 4800, rss_head, seed + 1);
    req.parity_cmd = test::Parity();
    auto o = l.Submit(req, MeasureOptions{});
    EXPECT_TRUE(o.ok()) << o.status().message();
    return o.ok() ? *o : Outcome{};
  };
  {
    auto old = Ledger::Open(c.db, 9);
    ASSERT_TRUE(old.ok()) << old.status().message();
    EXPECT_EQ((*old)->CurrentPolicy()->version, 2);
    const Outcome o = submit(**old, "fast, +0.3 MiB, under v2", 13.3, 9101);
    EXPECT_EQ(o.verdict, Verdict::kRejectedRegression) << o.note;
  }
  auto l = Ledger::Open(c.db, 10);  // v3's schema (0011 brings v4)
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto pol = (*l)->CurrentPolicy();
  ASSERT_TRUE(pol.ok()) << pol.status().message();
  EXPECT_EQ(pol->version, 3) << "an existing ledger gets v3 with the migration";
  ASSERT_EQ(pol->guard_floors.size(), PolicyV3().guard_floors.size()) << "the floors are read back from the ledger";
  EXPECT_EQ(pol->FloorFor("peak_rss_mb")->amount, 4.0);

  const Outcome small = submit(**l, "fast, +0.3 MiB, under v3", 13.3, 9103);
  EXPECT_EQ(small.verdict, Verdict::kAccepted) << small.note;
  ASSERT_EQ(small.guards.size(), 1u);
  EXPECT_EQ(small.guards[0]["within_floor"], true) << small.guards;
  const Outcome big = submit(**l, "fast, +50 MiB, under v3", 63.0, 9105);
  EXPECT_EQ(big.verdict, Verdict::kRejectedRegression) << big.note;

  auto old_score = (*l)->Show(1);
  ASSERT_TRUE(old_score.ok()) << old_score.status().message();
  const auto& s1 = (*old_score)["runs"][0]["scores"][0];
  EXPECT_EQ(s1["policy_version"], 2) << "an old score keeps its version";
  EXPECT_EQ(s1["verdict"], "rejected-regression");
  EXPECT_FALSE(s1["guards"][0].contains("within_floor")) << "v2 judged no floor";
  auto new_score = (*l)->Show(2);
  ASSERT_TRUE(new_score.ok());
  EXPECT_EQ((*new_score)["runs"][0]["scores"][0]["policy_version"], 3);

  // What a reader sees: the v2 score as it was judged, the v3 ones with their floor.
  const auto show = [&](int id) {
    return test::Shell(test::VerityBin() + " show --ledger " + c.db + " " + std::to_string(id));
  };
  const auto one = show(1), two = show(2), three = show(3);
  EXPECT_NE(one.out.find("(policy v2)"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("guard peak_rss_mb -2."), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("floor"), std::string::npos) << one.out;
  EXPECT_NE(two.out.find("(policy v3)"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("guard peak_rss_mb -2."), std::string::npos) << two.out;
  EXPECT_NE(two.out.find(": within floor 4 MiB (+0."), std::string::npos) << two.out;
  EXPECT_NE(three.out.find(": regressed, beyond floor 4 MiB (+"), std::string::npos) << three.out;
  // The sizes behind those lines, in MiB (the fake bench's guards carry 0.3% noise).
  const auto worse = [](const nlohmann::json& show) {
    const auto& g = show["runs"][0]["scores"][0]["guards"][0];
    return g["head_median"].get<double>() - g["base_median"].get<double>();
  };
  EXPECT_NEAR(worse(*new_score), 0.3, 0.1);
  auto big_score = (*l)->Show(3);
  ASSERT_TRUE(big_score.ok());
  EXPECT_NEAR(worse(big_score.value()), 50.0, 1.0);

  // The changelog says the same.
  auto report = test::Shell(test::VerityBin() + " report --ledger " + c.db + " --out " + c.dir + "/CHANGELOG.md");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string md = test::ReadFile(c.dir + "/CHANGELOG.md");
  for (const char* needle :
       {"**policy v2** (1 score)", "**policy v3** (2 scores)",
        "guard floors: a guard beyond the gate regresses only if also worse by more than _mb 4 MiB",
        "): held, within floor 4 MiB (+0.", "): regressed, undeclared, beyond floor 4 MiB (+"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle;

  auto v = (*l)->Verify();
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok) << v->first_broken;
}

}  // namespace
}  // namespace verity::ledger
