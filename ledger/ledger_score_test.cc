// The verdict, the ladder and the parity judge as pure functions: table-driven,
// no processes, no database.
#include <gtest/gtest.h>

#include <cmath>

#include "ledger/evidence.h"
#include "ledger/frontier.h"
#include "ledger/ledger.h"
#include "ledger/score.h"
#include "tests/score_rounds.h"

namespace verity::ledger {
namespace {

using ::verity::test::Rounds;

ScoreInput Input(Kind kind, double ratio, std::optional<double> predict, int n = 10) {
  ScoreInput in;
  in.kind = kind;
  in.primary = Rounds("decode_tok_s", 1000, ratio, n);
  in.frontier = 1000;
  in.predict_frac = predict;
  in.plan = PlanFor(PolicyV2());
  return in;
}

// Every verdict has one spelling: stored (VerdictName), read back
// (VerdictFromName) and in JSON (the Outcome a submit prints).
TEST(Score, EveryVerdictIsSpelledOneWayEverywhere) {
  int n = 0;
  for (int i = 0; i <= static_cast<int>(Verdict::kFailed); i++) {
    const Verdict v = static_cast<Verdict>(i);
    EXPECT_EQ(nlohmann::json(v), nlohmann::json(VerdictName(v)));
    EXPECT_EQ(VerdictFromName(VerdictName(v)), v);
    Outcome o;
    o.verdict = v;
    EXPECT_EQ(o.ToJson()["verdict"], VerdictName(v));
    n++;
  }
  EXPECT_EQ(n, 9);
  // A name that is no verdict reads as failed, never as accepted.
  EXPECT_EQ(nlohmann::json("no-such-verdict").get<Verdict>(), Verdict::kFailed);
}

TEST(Score, EveryTierIsSpelledOneWayEverywhere) {
  int n = 0;
  for (Tier t : {Tier::kNone, Tier::kS, Tier::kM, Tier::kL, Tier::kXL}) {
    EXPECT_EQ(nlohmann::json(t), nlohmann::json(TierName(t)));
    EXPECT_EQ(TierFromName(TierName(t)), t);
    Outcome o;
    o.tier = t;
    EXPECT_EQ(o.ToJson()["tier"], TierName(t));
    n++;
  }
  EXPECT_EQ(n, 5);
  EXPECT_EQ(TierFromName("xxl"), std::nullopt);
}

TEST(Score, VerdictTable) {
  const Policy p = PolicyV2();
  struct Row {
    const char* name;
    ScoreInput in;
    Verdict want;
    Tier tier;
  };
  ScoreInput unverified = Input(Kind::kChange, 1.07, 0.07);
  unverified.verified = false;
  ScoreInput regressed = Input(Kind::kChange, 1.07, 0.07);
  regressed.guards.push_back(Rounds("prefill_tok_s", 5000, 0.90, 10));
  ScoreInput declared = regressed;
  declared.declared_regressions = {"prefill_tok_s"};
  ScoreInput memory = Input(Kind::kChange, 1.07, 0.07);
  memory.guards.push_back(Rounds("peak_rss_mb", 100, 1.0 / 1.3, 10));  // 30% more memory: worse
  ScoreInput less_memory = Input(Kind::kChange, 1.07, 0.07);
  less_memory.guards.push_back(Rounds("peak_rss_mb", 100, 1.3, 10));
  const Row rows[] = {
      {"+7% predicted 7%", Input(Kind::kChange, 1.07, 0.07), Verdict::kAccepted, Tier::kM},
      {"+3% predicted 3%", Input(Kind::kChange, 1.03, 0.03), Verdict::kAccepted, Tier::kS},
      {"+12% predicted 10%", Input(Kind::kChange, 1.12, 0.10), Verdict::kAccepted, Tier::kL},
      {"+1% is below the gate", Input(Kind::kChange, 1.01, 0.01), Verdict::kNone, Tier::kNone},
      {"+2.1% is not shown above the gate", Input(Kind::kChange, 1.021, 0.02), Verdict::kNone, Tier::kNone},
      {"-5% slower", Input(Kind::kChange, 0.95, 0.02), Verdict::kNone, Tier::kNone},
      {"6x is implausible", Input(Kind::kChange, 6.0, 5.0), Verdict::kRejectedImplausible, Tier::kNone},
      {"+15% predicted 2%: surprise", Input(Kind::kChange, 1.15, 0.02), Verdict::kHeldSurprise, Tier::kL},
      {"+7% with no prediction of a gain", Input(Kind::kChange, 1.07, 0.0), Verdict::kHeldSurprise, Tier::kM},
      {"unverified", unverified, Verdict::kUnverified, Tier::kM},
      {"guard regressed", regressed, Verdict::kRejectedRegression, Tier::kNone},
      {"guard regressed, declared", declared, Verdict::kAccepted, Tier::kM},
      {"memory up is a regression", memory, Verdict::kRejectedRegression, Tier::kNone},
      {"memory down is not", less_memory, Verdict::kAccepted, Tier::kM},
      {"revert with evidence", Input(Kind::kRevert, 1.04, std::nullopt), Verdict::kAccepted, Tier::kS},
      {"revert without evidence", Input(Kind::kRevert, 1.005, std::nullopt), Verdict::kRefused, Tier::kNone},
      {"revert above the ceiling", Input(Kind::kRevert, 7.0, std::nullopt), Verdict::kRejectedImplausible, Tier::kNone},
      {"reapply surprise", Input(Kind::kReapply, 1.15, 0.02), Verdict::kHeldSurprise, Tier::kL},
      {"reapply as predicted", Input(Kind::kReapply, 1.07, 0.07), Verdict::kAccepted, Tier::kM},
  };
  for (const auto& r : rows) {
    const ScoreResult s = Score(p, r.in);
    EXPECT_STREQ(VerdictName(s.verdict), VerdictName(r.want)) << r.name << ": " << s.note;
    EXPECT_STREQ(TierName(s.tier), TierName(r.tier)) << r.name;
    EXPECT_EQ(s.moves_frontier, r.want == Verdict::kAccepted) << r.name;
    EXPECT_FALSE(s.note.empty()) << r.name;
  }
}

TEST(Score, GainIsAgainstTheRunsOwnBaseAndMovesTheFrontierByItsRatio) {
  ScoreInput in = Input(Kind::kChange, 1.05, 0.05);
  in.primary = Rounds("decode_tok_s", 2000, 1.05, 10, 0.0);  // the base is twice the frontier
  in.frontier = 1000;
  const ScoreResult s = Score(PolicyV2(), in);
  EXPECT_EQ(s.verdict, Verdict::kAccepted) << s.note;
  EXPECT_NEAR(s.gain, 0.05, 1e-12) << "not (2100 - 2000) / 1000";
  EXPECT_NEAR(s.frontier_after, 1050.0, 1e-9);
  EXPECT_NEAR(s.gate, 20.0, 1e-12) << "the gate is 2% of the frontier, in metric units";
  in.frontier.reset();
  const ScoreResult seeded = Score(PolicyV2(), in);
  EXPECT_TRUE(seeded.seeds_frontier);
  EXPECT_NEAR(seeded.frontier_before, 2000.0, 1e-9);
}

TEST(Score, LaterAttemptsSpendLessAlpha) {
  ScoreInput first = Input(Kind::kChange, 1.07, 0.07), fifth = first;
  fifth.attempt = 5;
  const ScoreResult a = Score(PolicyV2(), first), b = Score(PolicyV2(), fifth);
  EXPECT_GT(a.ratio.alpha, b.ratio.alpha);
  EXPECT_EQ(a.verdict, Verdict::kAccepted);
  EXPECT_EQ(b.verdict, Verdict::kNone) << "10 rounds cannot bound the median at attempt 5's alpha: " << b.note;
}

TEST(Score, HigherIsBetterByName) {
  EXPECT_TRUE(HigherIsBetter("decode_tok_s"));
  EXPECT_TRUE(HigherIsBetter("prefill_tok_s"));
  EXPECT_TRUE(HigherIsBetter("matmul_gflops"));
  EXPECT_FALSE(HigherIsBetter("peak_rss_mb"));
  EXPECT_FALSE(HigherIsBetter("first_token_ms"));
  EXPECT_DOUBLE_EQ(RoundRatio({100, 110, 110, 100}, true), 1.1);
  EXPECT_DOUBLE_EQ(RoundRatio({100, 110, 110, 100}, false), 1.0 / 1.1);
}

LadderEvent Ev(int64_t id, int64_t run, int64_t change, const std::string& kind, const std::string& reason,
               std::optional<double> ratio, double base = 1000) {
  LadderEvent e;
  e.event_id = id;
  e.run_id = run;
  e.change_id = change;
  e.kind = kind;
  e.reason = reason;
  e.recorded = reason == "seed" ? base : 0;
  e.ratio = ratio;
  e.base_median = base;
  return e;
}

TEST(Ladder, DerivedFromTheEventsThatCount) {
  // seed (run 1), +10% (run 1), +5% (run 2), +20% (run 3)
  std::vector<LadderEvent> ev = {Ev(1, 1, 1, "change", "seed", std::nullopt), Ev(2, 1, 1, "change", "accepted", 1.10),
                                 Ev(3, 2, 2, "change", "accepted", 1.05, 1100),
                                 Ev(4, 3, 3, "change", "accepted", 1.20, 1155)};
  EXPECT_NEAR(*DeriveLadder(ev).value, 1000 * 1.10 * 1.05 * 1.20, 1e-9);
  auto without = [&](int64_t run) {
    auto copy = ev;
    for (auto& e : copy) e.retracted = e.run_id == run;
    return *DeriveLadder(copy).value;
  };
  EXPECT_NEAR(without(3), 1000 * 1.10 * 1.05, 1e-9) << "the last";
  EXPECT_NEAR(without(2), 1000 * 1.10 * 1.20, 1e-9) << "a middle";
  EXPECT_NEAR(without(1), 1100 * 1.05 * 1.20, 1e-9) << "the first: run 2 seeds from its own base";
  // The same frontier as if the run had never been recorded at all.
  std::vector<LadderEvent> never = {ev[0], ev[1], ev[3]};
  EXPECT_NEAR(without(2), *DeriveLadder(never).value, 1e-9);
}

TEST(Ladder, RevertsAndReapplies) {
  std::vector<LadderEvent> ev = {Ev(1, 1, 1, "change", "seed", std::nullopt), Ev(2, 1, 1, "change", "accepted", 1.10)};
  // A revert on parity evidence divides out the change's factor.
  auto parity_revert = ev;
  LadderEvent r = Ev(3, 2, 2, "revert", "revert", std::nullopt);
  r.undoes_run = 1;
  parity_revert.push_back(r);
  EXPECT_NEAR(*DeriveLadder(parity_revert).value, 1000, 1e-9);
  // A speed revert (+5%), then a reapply (+8%) that undoes it.
  auto story = ev;
  story.push_back(Ev(3, 2, 2, "revert", "revert", 1.05));
  LadderEvent re = Ev(4, 3, 3, "reapply", "accepted", 1.08);
  re.undoes_run = 2;
  story.push_back(re);
  EXPECT_NEAR(*DeriveLadder(story).value, 1000 * 1.10 * 1.05 * 1.08, 1e-9);
  // Retract the revert's run (the reapply's --retract): the reapply must not count the change twice.
  story[2].retracted = true;
  const Ladder l = DeriveLadder(story);
  EXPECT_NEAR(*l.value, 1000 * 1.10, 1e-9);
  EXPECT_FALSE(l.steps[3].counted);
  EXPECT_NE(l.steps[3].why.find("no longer counts"), std::string::npos);
  EXPECT_EQ(l.last_event, 2);
}

measure::ParityEvidence Evidence(int depths, int window, int positions, int tokens, const std::string& mode) {
  measure::ParityEvidence e;
  for (int i = 1; i <= depths; i++) e.depths.push_back({i * tokens / depths, 1.0, 0.0, 0.0, positions});
  e.worst_top1 = 1.0;
  e.worst_mean_kl = 0.0;
  e.window = window;
  e.tokens = tokens;
  e.mode = mode;
  e.ok = true;
  return e;
}

TEST(ParityJudge, FloorModeNanAndDeepFactor) {
  const Policy p = PolicyV2();
  const auto standard = Evidence(7, 8, 8, 512, "standard");
  EXPECT_EQ(JudgeParity(p, standard, "standard"), "");
  EXPECT_NE(JudgeParity(p, Evidence(6, 8, 8, 512, "standard"), "standard").find("6 depths"), std::string::npos);
  EXPECT_NE(JudgeParity(p, Evidence(7, 8, 7, 512, "standard"), "standard").find("fewer than 8 positions"),
            std::string::npos);
  auto shallow = standard;
  shallow.depths.back().depth = 500;
  EXPECT_NE(JudgeParity(p, shallow, "standard").find("not the last context position"), std::string::npos);
  auto nan = standard;
  nan.nonfinite = {"depths[2].mean_kl"};
  nan.worst_mean_kl = NAN;
  EXPECT_NE(JudgeParity(p, nan, "standard").find("non-finite values at depths[2].mean_kl"), std::string::npos);
  auto silent_nan = standard;
  silent_nan.worst_mean_kl = NAN;  // even without the list, a NaN never passes the thresholds
  EXPECT_NE(JudgeParity(p, silent_nan, "standard"), "");
  EXPECT_NE(JudgeParity(p, standard, "deep").find("mode 'standard' stated"), std::string::npos);
  EXPECT_EQ(JudgeParity(p, Evidence(14, 16, 16, 512, "deep"), "deep", &standard), "");
  EXPECT_NE(JudgeParity(p, Evidence(13, 16, 16, 512, "deep"), "deep", &standard).find("needs 2x"), std::string::npos);
  EXPECT_NE(JudgeParity(p, Evidence(14, 12, 16, 512, "deep"), "deep", &standard).find("deep window 12"),
            std::string::npos);
}

// Issue 41, finding 4: confirm compares deep evidence with the run's standard
// evidence of the same kind. Standard `logits` at 7 depths, deep a 512-byte
// `tokens` record: refused, naming both kinds; deep `tokens` needs 2x the
// standard `tokens` record's bytes.
TEST(ParityJudge, DeepEvidenceMustBeOfTheStandardEvidencesKind) {
  const Policy p = PolicyV5();
  auto logits = Evidence(7, 8, 8, 512, "standard");
  logits.kind = "logits";
  ASSERT_EQ(JudgeParity(p, logits, "standard"), "");
  auto tokens = [](long long bytes, const std::string& mode) {
    measure::ParityEvidence e;
    e.kind = "tokens";
    e.mode = mode;
    e.ok = true;
    e.worst_top1 = NAN;
    e.worst_mean_kl = NAN;
    e.identity.against = "base";
    e.identity.identical = true;
    e.identity.head_bytes = e.identity.base_bytes = bytes;
    return e;
  };
  const std::string other = JudgeParity(p, tokens(512, "deep"), "deep", &logits);
  EXPECT_NE(other.find("kind 'tokens'"), std::string::npos) << other;
  EXPECT_NE(other.find("kind 'logits'"), std::string::npos) << other;
  auto deep_logits = Evidence(14, 16, 16, 512, "deep");
  deep_logits.kind = "logits";
  EXPECT_EQ(JudgeParity(p, deep_logits, "deep", &logits), "");
  const auto std_tokens = tokens(400, "standard");
  ASSERT_EQ(JudgeParity(p, std_tokens, "standard"), "");
  EXPECT_NE(JudgeParity(p, tokens(600, "deep"), "deep", &std_tokens).find("2x the 400"), std::string::npos);
  EXPECT_EQ(JudgeParity(p, tokens(800, "deep"), "deep", &std_tokens), "");
  EXPECT_NE(JudgeParity(p, deep_logits, "deep", &std_tokens).find("does not deepen"), std::string::npos);
}

}  // namespace
}  // namespace verity::ledger

namespace verity::ledger {
namespace {

TEST(Score, DecodeAboveTheMeasuredBandwidthIsImplausible) {
  // 400 MB per token at 31 GB/s (x1.25 for measurement error): at most 96.9 tok/s.
  ScoreInput in = Input(Kind::kChange, 1.25, 0.25);
  in.primary = Rounds("decode_tok_s", 80, 1.25, 10, 0.0);  // 100 tok/s: impossible
  in.read_bytes_per_s = 31e9;
  in.head_bytes_per_token = 400e6;
  ScoreResult s = Score(PolicyV2(), in);
  EXPECT_EQ(s.verdict, Verdict::kRejectedImplausible) << s.note;
  EXPECT_NE(s.note.find("40 GB/s, above this box's measured read bandwidth of 31 GB/s"), std::string::npos) << s.note;
  in.head_bytes_per_token = 200e6;  // under the minimum: may be cached, not judged
  EXPECT_EQ(Score(PolicyV2(), in).verdict, Verdict::kAccepted);
  in.head_bytes_per_token = 400e6;
  in.primary = Rounds("decode_tok_s", 75, 1.25, 10, 0.0);  // 93.75 tok/s = 37.5 GB/s: within the tolerance
  EXPECT_EQ(Score(PolicyV2(), in).verdict, Verdict::kAccepted);
  in.read_bytes_per_s.reset();  // no roofline measured: only the 5x rule applies
  in.primary = Rounds("decode_tok_s", 80, 1.25, 10, 0.0);
  EXPECT_EQ(Score(PolicyV2(), in).verdict, Verdict::kAccepted);
}

}  // namespace
}  // namespace verity::ledger
