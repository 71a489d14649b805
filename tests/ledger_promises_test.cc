// The ledger keeps the promises it makes (issue 9): each test replays one way
// a skeptical maintainer could talk the ledger into something it promises to
// refuse, through the real `verity` binary and fake commands of known output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "measure/roofline.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

std::string Note(const Submitted& s) { return s.j.contains("note") ? s.j["note"].get<std::string>() : s.cmd.err; }
double Frontier(const std::string& db) {
  auto f = JsonOf(VerityBin() + " frontier --json --ledger " + db);
  return f["frontier"].empty() ? -1.0 : f["frontier"][0]["value"].get<double>();
}
int Seed() {
  static int seed = 7000;
  return seed += 2;
}

// Runs `cmd` in the background of a shell line, its stdout, stderr and exit
// code in <dir>/<tag>.out, .err and .rc; the line must end in `wait`.
std::string InBackground(const std::string& cmd, const std::string& dir, const std::string& tag) {
  const std::string out = dir + "/" + tag;
  return "(" + cmd + " > " + out + ".out 2>" + out + ".err; echo $? > " + out + ".rc) & ";
}

// A submission of a +7% head at 0.3% noise with the given parity command.
Submitted Plus7(const Case& c, const std::string& tag, const std::string& parity, const std::string& extra = "") {
  const int s = Seed();
  return Submit(c.db, tag, 7, Bench(c.dir, tag + "-b", 1000, 0.003, s), Bench(c.dir, tag + "-h", 1070, 0.003, s + 1),
                parity, extra);
}

// 1. Parity evidence is bound to the benchmarked artifact.
TEST(Promises, ParityFromAnotherBinaryIsRefused) {
  Case c = Fresh("bind");
  auto s = Plus7(c, "other-binary", Parity("--artifact " + std::string(64, 'e')));
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "rejected-parity") << s.cmd.out;
  EXPECT_NE(Note(s).find("does not cover what was benchmarked"), std::string::npos) << Note(s);
  EXPECT_LT(Frontier(c.db), 0) << "a refused run seeded or moved the frontier";
}

TEST(Promises, EvidenceWithoutIdentityIsUnverifiedAndCannotMoveTheFrontier) {
  Case c = Fresh("unverified");
  auto s = Plus7(c, "no-identity", Parity("--no-build"));
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "unverified") << s.cmd.out;
  EXPECT_EQ(s.j["frontier_after"], s.j["frontier_before"]);
  EXPECT_LT(Frontier(c.db), 0) << "an unverified run neither moves nor seeds the frontier";
}

TEST(Promises, BitIdentityBindsTheBaseSideToo) {
  Case c = Fresh("bind-base");
  const int s = Seed();
  auto r = Submit(c.db, "bits from another base", 3.5, Bench(c.dir, "b", 1000, 0.003, s),
                  Bench(c.dir, "h", 1035, 0.003, s + 1), Parity(),
                  "--claim-bit-identical --base-parity-cmd " + Quote(Parity("--artifact " + std::string(64, 'f'))));
  ASSERT_EQ(r.cmd.exit_code, 0) << r.cmd.err;
  EXPECT_EQ(r.j["verdict"], "rejected-parity") << r.cmd.out;
  EXPECT_NE(Note(r).find("base parity evidence came from artifact ffff"), std::string::npos) << Note(r);
}

// 2. Parity evidence has a floor, and a NaN is a FAIL.
TEST(Promises, ThinEvidenceIsRejectedNamingWhatIsMissing) {
  struct Thin {
    const char* args;
    const char* names;
  };
  const Thin cases[] = {{"--depths 1", "1 depths, the policy needs at least 7"},
                        {"--positions 1", "fewer than 8 positions"},
                        {"--deepest 300", "is not the last context position 512"},
                        {"--nan", "non-finite values at"},
                        {"--mode deep", "mode 'deep' stated, 'standard' required"}};
  for (const auto& t : cases) {
    Case c = Fresh("thin");
    const std::string marker = c.dir + "/head-ran";
    const int s = Seed();
    auto r = Submit(c.db, t.args, 7, Bench(c.dir, "b", 1000, 0.003, s),
                    Bench(c.dir, "h", 1070, 0.003, s + 1, "--touch " + marker), Parity(t.args));
    ASSERT_EQ(r.cmd.exit_code, 0) << r.cmd.err;
    EXPECT_EQ(r.j["verdict"], "rejected-parity") << t.args << ": " << r.cmd.out;
    EXPECT_NE(Note(r).find(t.names), std::string::npos) << t.args << ": " << Note(r);
    EXPECT_FALSE(std::filesystem::exists(marker)) << t.args << ": the head's bench ran";
  }
}

// 3. Deep parity is verified: at least twice the standard depths and window.
TEST(Promises, DeepEvidenceMustBeDeeper) {
  struct Deep {
    const char* args;
    const char* names;
  };
  const Deep cases[] = {{"--deep-depths 7", "deep evidence has 7 depths, needs 2x the 7"},
                        {"--deep-window 8", "deep window 8 is not 2x the standard window 8"},
                        {"--mode standard", "mode 'standard' stated, 'deep' required"}};
  for (const auto& d : cases) {
    Case c = Fresh("deep");
    const int s = Seed();
    auto held = Submit(c.db, "surprising", 1, Bench(c.dir, "b", 1000, 0.003, s), Bench(c.dir, "h", 1150, 0.003, s + 1),
                       Parity(d.args));
    ASSERT_EQ(held.j["verdict"], "held-surprise") << d.args << held.cmd.out << held.cmd.err;
    auto conf =
        JsonOf(VerityBin() + " confirm --json --ledger " + c.db + " " + std::to_string(held.j["change"].get<int>()));
    EXPECT_EQ(conf["verdict"], "rejected-parity") << d.args;
    EXPECT_NE(conf["note"].get<std::string>().find(d.names), std::string::npos) << d.args << ": " << conf["note"];
    EXPECT_EQ(conf["frontier_after"], conf["frontier_before"]);
  }
}

// 4. Bit identity means every logit row, not the sampled windows.
TEST(Promises, BitIdentityCoversEveryRow) {
  Case c = Fresh("rows");
  const std::string windows(64, 'c');
  const int s = Seed();
  auto r =
      Submit(c.db, "same windows, other rows", 3.5, Bench(c.dir, "b", 1000, 0.003, s),
             Bench(c.dir, "h", 1035, 0.003, s + 1), Parity("--sha " + windows + " --all-sha " + std::string(64, '1')),
             "--claim-bit-identical --base-parity-cmd " +
                 Quote(Parity("--sha " + windows + " --all-sha " + std::string(64, '2'))));
  ASSERT_EQ(r.cmd.exit_code, 0) << r.cmd.err;
  EXPECT_EQ(r.j["verdict"], "rejected-parity") << r.cmd.out;
  EXPECT_NE(Note(r).find("logit rows differ"), std::string::npos) << Note(r);
}

// 5. Reverts and reapplies pass the same gates as changes.
TEST(Promises, RevertAndReapplyPassTheGates) {
  Case c = Fresh("gates");
  auto a = Plus7(c, "change", Parity());
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  const std::string id = std::to_string(a.j["change"].get<int>()), L = " --ledger " + c.db;
  auto revert = [&](const std::string& head_mean, const std::string& parity) {
    const int s = Seed();
    return Shell(VerityBin() + " revert --json" + L + " " + id + " --reason r --base-cmd " +
                 Quote(Bench(c.dir, std::string("rb") + std::to_string(s), 1000, 0.003, s)) + " --head-cmd " +
                 Quote(Bench(c.dir, std::string("rh") + std::to_string(s), std::stod(head_mean), 0.003, s + 1)) +
                 parity);
  };
  auto no_parity = revert("1050", "");
  EXPECT_NE(no_parity.exit_code, 0);
  EXPECT_NE(no_parity.err.find("--parity-cmd"), std::string::npos) << no_parity.err;
  auto wrong_head = revert("1050", " --parity-cmd " + Quote(Parity("--top1 0.5 --exit 1")));
  ASSERT_EQ(wrong_head.exit_code, 0) << wrong_head.err;
  EXPECT_NE(wrong_head.out.find("\"verdict\":\"rejected-parity\""), std::string::npos) << wrong_head.out;
  auto implausible = revert("6000", " --parity-cmd " + Quote(Parity()));
  EXPECT_NE(implausible.out.find("\"verdict\":\"rejected-implausible\""), std::string::npos) << implausible.out;
  auto refused = revert("1000", " --parity-cmd " + Quote(Parity()));
  ASSERT_NE(refused.out.find("\"verdict\":\"refused\""), std::string::npos) << refused.out;
  const std::string refused_id = std::to_string(nlohmann::json::parse(refused.out)["change"].get<int>());

  auto reapply = [&](const std::string& revert_id, const std::string& extra) {
    const int s = Seed();
    return Shell(VerityBin() + " reapply --json" + L + " " + revert_id + " --reason 'revert was wrong' --base-cmd " +
                 Quote(Bench(c.dir, std::string("ab") + std::to_string(s), 1000, 0.003, s)) + " --head-cmd " +
                 Quote(Bench(c.dir, std::string("ah") + std::to_string(s), 1070, 0.003, s + 1)) + extra);
  };
  auto of_refused = reapply(refused_id, " --predict 7 --parity-cmd " + Quote(Parity()));
  EXPECT_NE(of_refused.exit_code, 0);
  EXPECT_NE(of_refused.err.find("was not accepted"), std::string::npos) << of_refused.err;

  auto accepted = revert("1050", " --parity-cmd " + Quote(Parity()));
  ASSERT_NE(accepted.out.find("\"verdict\":\"accepted\""), std::string::npos) << accepted.out << accepted.err;
  const std::string revert_id = std::to_string(nlohmann::json::parse(accepted.out)["change"].get<int>());
  auto unpredicted = reapply(revert_id, " --parity-cmd " + Quote(Parity()));
  EXPECT_NE(unpredicted.exit_code, 0);
  EXPECT_NE(unpredicted.err.find("--predict"), std::string::npos) << unpredicted.err;
  auto failing = reapply(revert_id, " --predict 7 --parity-cmd " + Quote(Parity("--top1 0.5 --exit 1")));
  EXPECT_NE(failing.out.find("\"verdict\":\"rejected-parity\""), std::string::npos) << failing.out;
  auto surprising = reapply(revert_id, " --predict 1 --parity-cmd " + Quote(Parity()));
  EXPECT_NE(surprising.out.find("\"verdict\":\"held-surprise\""), std::string::npos) << surprising.out;
  // Its revert's evidence retracted, the confirmed reapply must not count the change twice.
  const auto revert_j = nlohmann::json::parse(accepted.out);
  ASSERT_EQ(Shell(VerityBin() + " retract" + L + " " + std::to_string(revert_j["run"].get<int>()) + " --reason stale")
                .exit_code,
            0);
  const double before = Frontier(c.db);
  EXPECT_NEAR(before, a.j["frontier_after"].get<double>(), 1e-6) << "the retracted revert left the ladder";
  auto conf = JsonOf(VerityBin() + " confirm --json" + L + " " +
                     std::to_string(nlohmann::json::parse(surprising.out)["change"].get<int>()));
  // Policy v4: the change's own step (the same head artifact) counts again, so the reapply is not a new step.
  EXPECT_EQ(conf["verdict"], "refused") << conf;
  EXPECT_NE(conf["note"].get<std::string>().find("already counts in this frontier"), std::string::npos) << conf;
  EXPECT_NEAR(Frontier(c.db), before, 1e-6) << "a confirmed reapply counted the change a second time";
}

// 6. The frontier is derived: retracting any event gives the frontier as if
// that run had never counted. 7. Gains are head vs the run's own base.
TEST(Promises, FrontierIsDerivedAndRetractionsUndoExactly) {
  Case c = Fresh("ladder");
  struct Step {
    int run;
    double base, ratio;
  };
  std::vector<Step> steps;
  // Each step from where the last one left main (policy v4: a step is a move between two artifacts).
  char art = '0';
  for (double head : {1070.0, 1050.0, 1100.0, 1040.0}) {
    const int s = Seed();
    const std::string from(64, art), to(64, ++art);
    auto r = Submit(c.db, std::string("x") + std::to_string(head), 100 * (head / 1000 - 1),
                    Bench(c.dir, std::string("b") + std::to_string(s), 1000, 0.003, s, "--sha " + from),
                    Bench(c.dir, std::string("h") + std::to_string(s), head, 0.003, s + 1, "--sha " + to),
                    Parity("--artifact " + to));
    ASSERT_EQ(r.j["verdict"], "accepted") << r.cmd.out << r.cmd.err;
    steps.push_back({r.j["run"].get<int>(), r.j["base_median"].get<double>(), 1.0 + r.j["gain"].get<double>()});
    // 7: the gain is against this run's own base (1000), not the frontier it faces.
    EXPECT_NEAR(r.j["gain"].get<double>(), head / 1000 - 1, 0.005) << head;
    EXPECT_NEAR(r.j["frontier_after"].get<double>(), r.j["frontier_before"].get<double>() * steps.back().ratio, 1e-6);
  }
  const double seed = steps[0].base;
  auto product = [&](std::vector<int> idx) {
    double f = 1;
    for (int i : idx) f *= steps[i].ratio;
    return f;
  };
  EXPECT_NEAR(Frontier(c.db), seed * product({0, 1, 2, 3}), 1e-6);
  auto retract = [&](int i) {
    auto r = Shell(VerityBin() + " retract --ledger " + c.db + " " + std::to_string(steps[i].run) + " --reason test");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  retract(2);  // a middle event
  EXPECT_NEAR(Frontier(c.db), seed * product({0, 1, 3}), 1e-6);
  retract(3);  // the last event
  EXPECT_NEAR(Frontier(c.db), seed * product({0, 1}), 1e-6);
  retract(0);  // the first event, which also seeded: the next run seeds from its own base
  EXPECT_NEAR(Frontier(c.db), steps[1].base * product({1}), 1e-6);
}

// 12. Every other metric is a guard.
TEST(Promises, GuardMetricsBlockUndeclaredRegressions) {
  Case c = Fresh("guards");
  const int s = Seed();
  auto bench = [&](const std::string& tag, double decode, double prefill, double rss, int seed) {
    char g[96];
    std::snprintf(g, sizeof g, "--guard prefill_tok_s=%g --guard peak_rss_mb=%g", prefill, rss);
    return Bench(c.dir, tag, decode, 0.003, seed, g);
  };
  auto slower_prefill = Submit(c.db, "decode up, prefill down", 7, bench("b1", 1000, 5000, 100, s),
                               bench("h1", 1070, 4500, 100, s + 1), Parity());
  ASSERT_EQ(slower_prefill.cmd.exit_code, 0) << slower_prefill.cmd.err;
  EXPECT_EQ(slower_prefill.j["verdict"], "rejected-regression") << slower_prefill.cmd.out;
  EXPECT_NE(Note(slower_prefill).find("prefill_tok_s"), std::string::npos) << Note(slower_prefill);
  auto more_memory = Submit(c.db, "decode up, memory up", 7, bench("b2", 1000, 5000, 100, s + 2),
                            bench("h2", 1070, 5000, 130, s + 3), Parity());
  EXPECT_EQ(more_memory.j["verdict"], "rejected-regression") << more_memory.cmd.out;
  EXPECT_NE(Note(more_memory).find("peak_rss_mb"), std::string::npos) << "lower is better for memory";
  auto declared = Submit(c.db, "declared", 7, bench("b3", 1000, 5000, 100, s + 4), bench("h3", 1070, 4500, 100, s + 5),
                         Parity(), "--accept-regression prefill_tok_s");
  EXPECT_EQ(declared.j["verdict"], "accepted") << declared.cmd.out;
  bool shown = false;
  for (const auto& g : declared.j["guards"])
    if (g["metric"] == "prefill_tok_s") shown = g["regressed"] == true && g["declared"] == true;
  EXPECT_TRUE(shown) << declared.j["guards"];
  EXPECT_NE(Note(declared).find("declared regression on prefill_tok_s"), std::string::npos);
}

// 8 (end to end): the policy's floor on rounds; more may be asked, never fewer.
TEST(Promises, RoundsFloorIsThePolicys) {
  Case c = Fresh("floor");
  const int s = Seed();
  auto fewer = Submit(c.db, "two rounds", 7, Bench(c.dir, "b", 1000, 0.003, s), Bench(c.dir, "h", 1070, 0.003, s + 1),
                      Parity(), "--min-rounds 2");
  EXPECT_NE(fewer.cmd.exit_code, 0);
  EXPECT_NE(fewer.cmd.err.find("below the policy floor of 10"), std::string::npos) << fewer.cmd.err;
  auto more = Submit(c.db, "twelve rounds", 7, Bench(c.dir, "b2", 1000, 0.003, s),
                     Bench(c.dir, "h2", 1070, 0.003, s + 1), Parity(), "--min-rounds 12 --max-rounds 40");
  ASSERT_EQ(more.cmd.exit_code, 0) << more.cmd.err;
  EXPECT_GE(more.j["rounds"].get<int>(), 12);
  EXPECT_EQ(more.j["verdict"], "accepted");
}

// 9. Two submissions on one box never time at the same moment.
TEST(Promises, ConcurrentSubmissionsDoNotInterleaveTimings) {
  const std::string dir = TempDir("lock"), db = dir + "/l.db";
  auto background = [&](const std::string& tag, int seed) {
    return InBackground(
        "VERITY_LOCK_DIR=" + dir + " " + VerityBin() + " submit --json --ledger " + db + " --title " + tag +
            " --predict 7 --base-cmd " +
            Quote(UntilOneWaitsForTheLock(dir, tag) + Bench(dir, tag + "b", 1000, 0.003, seed, "--sleep 0.03")) +
            " --head-cmd " + Quote(Bench(dir, tag + "h", 1070, 0.003, seed + 1, "--sleep 0.03")) + " --parity-cmd " +
            Quote(Parity()),
        dir, tag);
  };
  Shell(background("a", 1) + background("b", 3) + "wait");
  int waited = 0;
  for (const char* t : {"a", "b"}) {
    EXPECT_EQ(ReadFile(dir + "/" + t + ".rc"), "0\n") << ReadFile(dir + "/" + t + ".err");
    waited += ReadFile(dir + "/" + t + ".err").find("waiting for the box lock") != std::string::npos;
  }
  EXPECT_EQ(waited, 1) << "exactly one submission should have said it was waiting";
  auto ranges = LedgerSql(db, "SELECT min(taken_at), max(taken_at) FROM samples GROUP BY run_id ORDER BY run_id");
  ASSERT_EQ(ranges.exit_code, 0) << ranges.err;
  std::vector<std::pair<std::string, std::string>> r;
  std::stringstream ss(ranges.out);
  for (std::string line; std::getline(ss, line);)
    r.push_back({line.substr(0, line.find('|')), line.substr(line.find('|') + 1)});
  ASSERT_EQ(r.size(), 2u) << ranges.out;
  const bool disjoint = r[0].second < r[1].first || r[1].second < r[0].first;
  EXPECT_TRUE(disjoint) << "sample times overlap: " << ranges.out;
}

}  // namespace
}  // namespace verity::test

namespace verity::test {
namespace {

// 10 (printing side): recorded bytes that are not UTF-8 never crash a JSON printer.
TEST(Promises, JsonOutputSurvivesInvalidUtf8InRecordedText) {
  Case c = Fresh("utf8");
  const std::string bad = "printf 'bad \\377\\376 bytes' >&2; exit 3";
  auto s = Submit(c.db, "bad bytes", 3, bad, bad, Parity());
  EXPECT_EQ(s.cmd.exit_code, 1) << s.cmd.err;
  ASSERT_TRUE(s.j.is_object()) << "submit --json printed no JSON: " << s.cmd.out;
  EXPECT_EQ(s.j["verdict"], "failed");
  auto show = Shell(VerityBin() + " show --json --ledger " + c.db + " " + std::to_string(s.j["change"].get<int>()));
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("\"failed\""), std::string::npos) << show.out;
  auto v = Shell(VerityBin() + " ledger verify --ledger " + c.db);
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

}  // namespace
}  // namespace verity::test

namespace verity::test {
namespace {

// Review findings: each a way around a promise, replayed.
std::string Rev(const Case& c, int change, const std::string& tag, double base, double head, const std::string& rest) {
  const int s = Seed();
  return VerityBin() + " revert --json --ledger " + c.db + " " + std::to_string(change) + " --reason " + tag +
         " --base-cmd " + Quote(Bench(c.dir, tag + "b", base, 0.003, s)) + " --head-cmd " +
         Quote(Bench(c.dir, tag + "h", head, 0.003, s + 1)) + " " + rest;
}
nlohmann::json Json(const CommandResult& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (...) {
    return nlohmann::json();
  }
}

TEST(Promises, LowerIsBetterMovesTheFrontierDownAndUnknownMetricsAreRefused) {
  Case c = Fresh("latency");
  const int s = Seed();
  auto r = Submit(c.db, "faster first token", 10, Bench(c.dir, "b", 10, 0.003, s, "--metric first_token_ms"),
                  Bench(c.dir, "h", 9, 0.003, s + 1, "--metric first_token_ms"), Parity(), "--metric first_token_ms");
  ASSERT_EQ(r.j["verdict"], "accepted") << r.cmd.out << r.cmd.err;
  EXPECT_NEAR(r.j["gain"].get<double>(), 10.0 / 9.0 - 1, 0.01);
  EXPECT_LT(r.j["frontier_after"].get<double>(), r.j["frontier_before"].get<double>()) << "latency must go down";
  EXPECT_NEAR(Frontier(c.db), r.j["frontier_before"].get<double>() / (1 + r.j["gain"].get<double>()), 1e-6);
  auto slower =
      Submit(c.db, "slower", 10, Bench(c.dir, "b2", 1000, 0.003, s, "--metric tokens_per_sec"),
             Bench(c.dir, "h2", 900, 0.003, s + 1, "--metric tokens_per_sec"), Parity(), "--metric tokens_per_sec");
  EXPECT_NE(slower.cmd.exit_code, 0);
  EXPECT_NE(slower.cmd.err.find("cannot tell whether higher or lower is better"), std::string::npos) << slower.cmd.err;
  auto odd_guard = Submit(c.db, "odd guard", 7, Bench(c.dir, "b3", 1000, 0.003, s, "--guard accuracy=0.9"),
                          Bench(c.dir, "h3", 1070, 0.003, s + 1, "--guard accuracy=0.5"), Parity());
  EXPECT_EQ(odd_guard.j["verdict"], "failed") << odd_guard.cmd.out;
  EXPECT_NE(odd_guard.cmd.err.find("guard metric 'accuracy'"), std::string::npos) << odd_guard.cmd.err;
}

TEST(Promises, AGuardCannotBeDroppedFromSomeSamples) {
  Case c = Fresh("dropped");
  const int s = Seed();
  // The head reports prefill except on its third run.
  const std::string head = "n=$(cat " + c.dir + "/n 2>/dev/null || echo 0); echo $((n+1)) > " + c.dir +
                           "/n; if [ $n -eq 2 ]; then " + Bench(c.dir, "h", 1070, 0.003, s + 1) + "; else " +
                           Bench(c.dir, "h", 1070, 0.003, s + 1, "--guard prefill_tok_s=300") + "; fi";
  auto r =
      Submit(c.db, "drops a guard", 7, Bench(c.dir, "b", 1000, 0.003, s, "--guard prefill_tok_s=500"), head, Parity());
  EXPECT_EQ(r.j["verdict"], "failed") << r.cmd.out;
  EXPECT_NE(r.cmd.err.find("guard metric 'prefill_tok_s' is missing"), std::string::npos) << r.cmd.err;
}

TEST(Promises, RevertsCannotBankGainsTheyShouldNot) {
  Case c = Fresh("revert-holes");
  auto rejected = Submit(c.db, "wrong", 5, Bench(c.dir, "xb", 1000, 0.003, Seed()),
                         Bench(c.dir, "xh", 1050, 0.003, Seed()), Parity("--top1 0.5 --exit 1"));
  ASSERT_EQ(rejected.j["verdict"], "rejected-parity");
  auto side_channel = Shell(Rev(c, rejected.j["change"], "side", 1000, 1400, "--parity-cmd " + Quote(Parity())));
  EXPECT_NE(side_channel.exit_code, 0) << side_channel.out;
  EXPECT_NE(side_channel.err.find("does not count in this box's frontier"), std::string::npos) << side_channel.err;

  auto a = Plus7(c, "a", Parity());
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out;
  const int id = a.j["change"];
  const double after_a = Frontier(c.db);
  auto unverified = Json(Shell(Rev(c, id, "nobuild", 1000, 1050, "--parity-cmd " + Quote(Parity("--no-build")))));
  EXPECT_EQ(unverified["verdict"], "unverified") << unverified;
  auto guarded = Json(Shell(Rev(c, id, "guard", 1000, 1050, "--parity-cmd " + Quote(Parity()))));
  EXPECT_EQ(guarded["verdict"], "accepted") << guarded;  // a plain speed revert: allowed
  EXPECT_NEAR(Frontier(c.db), after_a * (1 + guarded["gain"].get<double>()), 1e-6);
  // The change no longer counts: a second revert of it is refused.
  auto again = Shell(Rev(c, id, "again", 1000, 1050, "--parity-cmd " + Quote(Parity())));
  EXPECT_NE(again.exit_code, 0);
}

TEST(Promises, ParityRevertsNeedProofAndUndoOnce) {
  Case c = Fresh("parity-revert");
  auto a = Plus7(c, "a", Parity());
  ASSERT_EQ(a.j["verdict"], "accepted");
  const int id = a.j["change"];
  const double seed = a.j["frontier_before"].get<double>();
  // Thin "failing" evidence from main proves nothing: speed decides (equal: refused).
  auto thin = Json(Shell(Rev(
      c, id, "thin", 1000, 1000,
      "--parity-cmd " + Quote(Parity()) + " --base-parity-cmd " + Quote(Parity("--depths 1 --top1 0.5 --exit 1")))));
  EXPECT_EQ(thin["verdict"], "refused") << thin;
  // Proof from main, but the head's evidence names no artifact: refused.
  auto nobuild = Json(Shell(Rev(
      c, id, "nobuild", 1000, 1000,
      "--parity-cmd " + Quote(Parity("--no-build")) + " --base-parity-cmd " + Quote(Parity("--top1 0.5 --exit 1")))));
  EXPECT_EQ(nobuild["verdict"], "refused") << nobuild;
  auto proof = Json(
      Shell(Rev(c, id, "proof", 1000, 1000,
                "--parity-cmd " + Quote(Parity()) + " --base-parity-cmd " + Quote(Parity("--top1 0.5 --exit 1")))));
  ASSERT_EQ(proof["verdict"], "accepted") << proof;
  EXPECT_NEAR(Frontier(c.db), seed, 1e-6);
  auto twice =
      Shell(Rev(c, id, "twice", 1000, 1000,
                "--parity-cmd " + Quote(Parity()) + " --base-parity-cmd " + Quote(Parity("--top1 0.5 --exit 1"))));
  EXPECT_NE(twice.exit_code, 0) << "the change's factor was already undone: " << twice.out;
  // A parity revert can be retracted like any run that moved the frontier.
  auto r = Shell(VerityBin() + " retract --ledger " + c.db + " " + std::to_string(proof["run"].get<int>()) +
                 " --reason wrong");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(Frontier(c.db), a.j["frontier_after"].get<double>(), 1e-6);
}

TEST(Promises, AReapplyCountsOnceAndRetractsOnlyAfterItsGate) {
  Case c = Fresh("reapply-once");
  auto a = Plus7(c, "a", Parity());
  ASSERT_EQ(a.j["verdict"], "accepted");
  auto rev = Json(Shell(Rev(c, a.j["change"], "rev", 1000, 1050, "--parity-cmd " + Quote(Parity()))));
  ASSERT_EQ(rev["verdict"], "accepted") << rev;
  const std::string rid = std::to_string(rev["change"].get<int>()), L = " --ledger " + c.db;
  auto reapply = [&](const std::string& extra) {
    const int s = Seed();
    return Shell(VerityBin() + " reapply --json" + L + " " + rid + " --predict 7 --reason r --base-cmd " +
                 Quote(Bench(c.dir, std::string("ab") + std::to_string(s), 1000, 0.003, s)) + " --head-cmd " +
                 Quote(Bench(c.dir, std::string("ah") + std::to_string(s), 1070, 0.003, s + 1)) + extra);
  };
  auto foreign = reapply(" --retract " + std::to_string(a.j["run"].get<int>()) + " --parity-cmd " + Quote(Parity()));
  EXPECT_NE(foreign.exit_code, 0);
  EXPECT_NE(foreign.err.find("is not an unretracted run of revert"), std::string::npos) << foreign.err;
  auto failing = Json(reapply(" --retract " + std::to_string(rev["run"].get<int>()) + " --parity-cmd " +
                              Quote(Parity("--top1 0.5 --exit 1"))));
  EXPECT_EQ(failing["verdict"], "rejected-parity");
  auto retr = JsonOf(VerityBin() + " history retractions --json" + L);
  EXPECT_EQ(retr["retractions"].size(), 0u) << "a reapply that failed its gate retracted the revert's evidence";
  auto once = Json(reapply(" --parity-cmd " + Quote(Parity())));
  ASSERT_EQ(once["verdict"], "accepted") << once;
  auto twice = reapply(" --parity-cmd " + Quote(Parity()));
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_NE(twice.err.find("already reapplied"), std::string::npos) << twice.err;
  auto hist = JsonOf(VerityBin() + " history reverts --json" + L);
  EXPECT_EQ(hist["reverts"][0]["reapplied_by"], once["change"])
      << "found wrong by the accepted reapply, not the failed one";
}

// Two confirms of one held surprise, both past the "still held?" read before
// either banks: one banks it, the other finds it scored while its deep parity
// ran and banks nothing. Confirm's deep parity command meets the other's at a
// barrier (a minute at most), so the race runs however the two processes are
// scheduled; both are waited for.
TEST(Promises, ConcurrentConfirmsBankOnce) {
  Case c = Fresh("confirm-race");
  const int s = Seed();
  const std::string arrived = c.dir + "/arrived";
  const std::string barrier = "if [ \"$VERITY_PARITY_MODE\" = deep ]; then mkdir -p " + arrived + " && touch " +
                              arrived + "/$$; for i in $(seq 6000); do [ $(ls " + arrived +
                              " | wc -l) -ge 2 ] && break; sleep 0.01; done; fi; ";
  auto held = Submit(c.db, "surprise", 1, Bench(c.dir, "b", 1000, 0.003, s), Bench(c.dir, "h", 1150, 0.003, s + 1),
                     barrier + Parity());
  ASSERT_EQ(held.j["verdict"], "held-surprise") << held.cmd.out;
  const double before = Frontier(c.db);
  const std::string cmd =
      VerityBin() + " confirm --json --ledger " + c.db + " " + std::to_string(held.j["change"].get<int>());
  Shell(InBackground(cmd, c.dir, "c1") + InBackground(cmd, c.dir, "c2") + "wait");
  EXPECT_EQ(Shell("ls " + arrived + " | wc -l").out, "2\n") << "both confirms ran deep parity together";
  int accepted = 0, refused = 0;
  for (const char* tag : {"c1", "c2"}) {
    const std::string rc = ReadFile(c.dir + "/" + tag + ".rc"), out = ReadFile(c.dir + "/" + tag + ".out"),
                      err = ReadFile(c.dir + "/" + tag + ".err");
    if (rc == "0\n" && out.find("\"verdict\":\"accepted\"") != std::string::npos) {
      accepted++;
    } else if (rc == "1\n" &&
               err.find("was scored again while deep parity ran (a concurrent confirm?); nothing banked") !=
                   std::string::npos) {
      refused++;
    } else {
      ADD_FAILURE() << tag << " neither banked nor lost the race: exit " << rc << out << err;
    }
  }
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(refused, 1);
  EXPECT_NEAR(Frontier(c.db), before * (1 + held.j["gain"].get<double>()), 1e-6);
}

TEST(Promises, AnOldReapplyWithRetractIsCountedOnceAfterMigration) {
  const std::string dir = TempDir("old-reapply"), db = dir + "/ledger.db";
  ASSERT_EQ(Shell("cp " + SourceDir() + "/tests/data/ledger-schema2-reapply.db " + db).exit_code, 0);
  EXPECT_NEAR(Frontier(db), 1070.84, 0.01) << "the old release showed 1141.29, counting the change twice";
  auto v = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

}  // namespace
}  // namespace verity::test

namespace verity::test {
namespace {

// Issue 10: a decode rate above the box's measured read bandwidth for its bytes per token is impossible.
TEST(Promises, DecodeAboveTheMeasuredBandwidthIsRejected) {
  Case c = Fresh("roofline");
  const std::string cache = c.dir + "/cache";
  auto roof =
      Shell("VERITY_CACHE_DIR=" + cache + " " + VerityBin() + " roofline --json --buffer-mb 16 --repetitions 1");
  ASSERT_EQ(roof.exit_code, 0) << roof.err;
  const std::string file = nlohmann::json::parse(roof.out)["cache_file"];
  // Pretend this box reads 400 GB/s at most; 1070 tok/s x 500 MB = 535 GB/s (> 1.25 x 400).
  auto j = nlohmann::json::parse(ReadFile(file));
  for (auto& p : j["read_gb_s"]) p["best"] = 400, p["median"] = 390;
  WriteFile(file, j.dump());
  const int s = Seed();
  const std::string bytes = "--bytes-per-token 5e8";
  auto withcache =
      Shell("VERITY_CACHE_DIR=" + cache + " " + VerityBin() + " submit --json --ledger " + c.db +
            " --title t --predict 7 --base-cmd " + Quote(Bench(c.dir, "b2", 1000, 0.003, s, bytes)) + " --head-cmd " +
            Quote(Bench(c.dir, "h2", 1070, 0.003, s + 1, bytes)) + " --parity-cmd " + Quote(Parity()));
  auto out = nlohmann::json::parse(withcache.out);
  EXPECT_EQ(out["verdict"], "rejected-implausible") << withcache.out << withcache.err;
  EXPECT_NE(out["note"].get<std::string>().find("GB/s, above this box's measured read bandwidth of 400 GB/s"),
            std::string::npos)
      << out["note"];
}

// Issue 26: a head benched with --backend cuda is bounded by GPU 0's measured
// bandwidth (`verity roofline --backend cuda`), not the box's CPU memory.
TEST(Promises, ACudaHeadIsBoundedByTheDevicesRoofline) {
  Case c = Fresh("device-roofline");
  const std::string cache = c.dir + "/cache";
  auto roof =
      Shell("VERITY_CACHE_DIR=" + cache + " " + VerityBin() + " roofline --json --buffer-mb 16 --repetitions 1");
  ASSERT_EQ(roof.exit_code, 0) << roof.err;
  const std::string file = nlohmann::json::parse(roof.out)["cache_file"];
  // The CPU reads 400 GB/s at most (as above); GPU 0, 3000 GB/s; a device
  // entry is the same record under "<box>-cuda0".
  auto cpu = nlohmann::json::parse(ReadFile(file));
  for (auto& p : cpu["read_gb_s"]) p["best"] = 400, p["median"] = 390;
  WriteFile(file, cpu.dump());
  auto dev = cpu;
  dev["box"]["fingerprint"] = cpu["box"]["fingerprint"].get<std::string>() + "-cuda0";
  dev["read_gb_s"] = nlohmann::json::array({{{"threads", 1}, {"best", 3000}, {"median", 2900}}});
  WriteFile(measure::RooflineCachePath(cache, dev["box"]["fingerprint"]), dev.dump());
  auto submit = [&](const std::string& tag, double head, const std::string& extra) {
    const int s = Seed();
    auto r = Shell("VERITY_CACHE_DIR=" + cache + " " + VerityBin() + " submit --json --ledger " + c.db + " --title " +
                   tag + " --predict 7 --base-cmd " + Quote(Bench(c.dir, tag + "b", head / 1.07, 0.003, s, extra)) +
                   " --head-cmd " + Quote(Bench(c.dir, tag + "h", head, 0.003, s + 1, extra)) + " --parity-cmd " +
                   Quote(Parity()));
    return nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
  };
  // 1070 tok/s x 500 MB = 535 GB/s: above the CPU's ceiling, far below the GPU's.
  auto fits = submit("fits", 1070, "--bytes-per-token 5e8 --backend cuda");
  EXPECT_NE(fits["verdict"], "rejected-implausible") << fits.dump();
  // 8000 tok/s x 500 MB = 4000 GB/s: above the GPU's 3000 x 1.25.
  auto over = submit("over", 8000, "--bytes-per-token 5e8 --backend cuda");
  EXPECT_EQ(over["verdict"], "rejected-implausible") << over.dump();
  EXPECT_NE(over["note"].get<std::string>().find("GB/s, above GPU 0's measured read bandwidth of 3000 GB/s"),
            std::string::npos)
      << over["note"];
}

// A +7% change on workload `slow` (~100 tok/s), then a +7% change 40x faster
// on workload `fast` (~4000 tok/s): against the first ladder's ~107 the second
// would be an impossible jump; on its own ladder it is seeded at 4000. Each
// ladder ends where its own change took it.
void ExpectTwoLadders(const std::string& name, const std::string& slow, const std::string& slow_workload,
                      const std::string& fast, const std::string& fast_workload) {
  Case c = Fresh(name);
  int s = Seed();
  auto first = Submit(c.db, "slow +7%", 7, Bench(c.dir, "b1", 100, 0.003, s, slow),
                      Bench(c.dir, "h1", 107, 0.003, s + 1, slow), Parity());
  ASSERT_EQ(first.j["verdict"], "accepted") << first.cmd.out << first.cmd.err;
  s = Seed();
  auto other = Submit(c.db, "fast +7%", 7, Bench(c.dir, "b2", 4000, 0.003, s, fast),
                      Bench(c.dir, "h2", 4280, 0.003, s + 1, fast), Parity());
  ASSERT_EQ(other.j["verdict"], "accepted") << other.cmd.out << other.cmd.err;
  EXPECT_NEAR(other.j["frontier_before"].get<double>(), 4000, 40) << "gated against its own workload's seed";
  auto f = JsonOf(VerityBin() + " frontier --json --ledger " + c.db);
  ASSERT_EQ(f["frontier"].size(), 2u) << f.dump();
  std::map<std::string, double> value;
  for (const auto& l : f["frontier"]) value[l["workload"].get<std::string>()] = l["value"].get<double>();
  EXPECT_NEAR(value[slow_workload], 107, 1.5) << f.dump();
  EXPECT_NEAR(value[fast_workload], 4280, 40) << f.dump();
}

// A frontier belongs to one workload: a change measured on a small model is
// neither gated against nor allowed to move the frontier of a large one.
TEST(Promises, EachWorkloadHasItsOwnFrontier) {
  ExpectTwoLadders("workloads", "--model /m/big-110m.bin", "big-110m.bin f32 1t pp8+tg8",
                   "--model /other/clone/small-260k.bin", "small-260k.bin f32 1t pp8+tg8");
}

// The same model benched on the GPU is a workload of its own: a 40x faster
// cuda speed is not a jump on the CPU's ladder.
TEST(Promises, ACudaBenchHasItsOwnFrontier) {
  ExpectTwoLadders("cuda-workload", "--model /m/big-110m.bin", "big-110m.bin f32 1t pp8+tg8",
                   "--model /m/big-110m.bin --backend cuda", "big-110m.bin f32 1t pp8+tg8 cuda");
}

// Eight sequences per step decode more tokens a second than one: a batched
// bench is a workload of its own, and a batch of 1 keeps the key it had.
TEST(Promises, ABatchedBenchHasItsOwnFrontier) {
  ExpectTwoLadders("batch-workload", "--model /m/big-110m.bin --batch 1", "big-110m.bin f32 1t pp8+tg8",
                   "--model /m/big-110m.bin --batch 8", "big-110m.bin f32 1t pp8+tg8 x8");
}

TEST(Promises, BaseAndHeadMustBenchTheSameWorkload) {
  Case c = Fresh("workload-mismatch");
  const int s = Seed();
  auto r = Submit(c.db, "apples and oranges", 7, Bench(c.dir, "b", 100, 0.003, s, "--model big.bin"),
                  Bench(c.dir, "h", 4000, 0.003, s + 1, "--model small.bin"), Parity());
  EXPECT_EQ(r.j["verdict"], "failed") << r.cmd.out << r.cmd.err;
  EXPECT_NE(Note(r).find("measured workload 'small.bin f32 1t pp8+tg8' but the run's first sample measured "
                         "'big.bin f32 1t pp8+tg8'"),
            std::string::npos)
      << Note(r);
  EXPECT_LT(Frontier(c.db), 0) << "a failed run seeds nothing";
}

}  // namespace
}  // namespace verity::test
