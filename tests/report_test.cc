// The changelog: a scripted ledger's report matches a golden file, two runs
// give identical bytes, and every section is populated.
#include <gtest/gtest.h>

#include <filesystem>

#include "ledger/ledger.h"
#include "reports/report.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using ledger::Db;
using ledger::Ledger;
using ledger::Value;

// Builds a ledger with fixed contents (fixed timestamps, fixed box) through the
// sealed-insert API, so the report is reproducible byte for byte.
std::string ScriptedLedger(const std::string& dir) {
  const std::string path = dir + "/scripted.db";
  auto l = Ledger::Open(path);
  EXPECT_TRUE(l.ok());
  Db& d = (*l)->db();
  const std::string at = "2026-11-29T12:00:00.000Z";
  auto change = [&](const std::string& kind, const std::string& title, Value predict, Value target, const std::string& reason,
                    bool bits = false) {
    return d.InsertSealed("changes", {{"kind", kind},
                                      {"title", title},
                                      {"author", std::string("alice")},
                                      {"claim_pct", predict},
                                      {"predict_pct", predict},
                                      {"claim_bit_identical", int64_t{bits}},
                                      {"metric", std::string("decode_tok_s")},
                                      {"base_cmd", std::string("base")},
                                      {"head_cmd", std::string("head")},
                                      {"parity_cmd", std::string("parity")},
                                      {"target_change", target},
                                      {"reason", reason.empty() ? Value() : Value(reason)},
                                      {"created_at", at}})
        .value();
  };
  auto run = [&](int64_t c, const std::string& purpose) {
    return d.InsertSealed("runs", {{"change_id", c}, {"purpose", purpose}, {"box_id", int64_t{1}}, {"policy_version", int64_t{1}},
                                   {"min_rounds", int64_t{5}}, {"max_rounds", int64_t{20}}, {"started_at", at}})
        .value();
  };
  auto samples = [&](int64_t r, int n) {
    for (int i = 0; i < n; i++)
      (void)d.InsertSealed("samples", {{"run_id", r}, {"round", int64_t{i / 4}}, {"side", std::string(i % 2 ? "head" : "base")},
                                       {"ord", int64_t{i % 4}}, {"value", 1000.0 + i}, {"seconds", 0.1}, {"taken_at", at},
                                       {"box_id", int64_t{1}}});
  };
  auto parity = [&](int64_t r, const std::string& side, bool passed, double top1, double kl, const std::string& sha) {
    (void)d.InsertSealed("parity_results", {{"run_id", r}, {"side", side}, {"mode", std::string("standard")},
                                            {"exit_code", int64_t{passed ? 0 : 1}}, {"passed", int64_t{passed}},
                                            {"worst_top1", top1}, {"worst_mean_kl", kl}, {"logits_sha256", sha},
                                            {"message", std::string(passed ? "pass" : "FAIL")}, {"seconds", 0.5}});
  };
  auto score = [&](int64_t r, const std::string& verdict, const std::string& tier, Value gain, Value fb, Value fa,
                   int64_t rounds, const std::string& note) {
    (void)d.InsertSealed("scores", {{"run_id", r}, {"policy_version", int64_t{1}}, {"verdict", verdict}, {"tier", tier},
                                    {"gain", gain},
                                    {"ci_low", ledger::IsNull(gain) ? Value() : Value(ledger::AsDouble(gain) - 0.005)},
                                    {"ci_high", ledger::IsNull(gain) ? Value() : Value(ledger::AsDouble(gain) + 0.005)},
                                    {"gate", ledger::IsNull(fb) ? Value() : Value(0.02 * ledger::AsDouble(fb))},
                                    {"frontier_before", fb}, {"frontier_after", fa},
                                    {"base_median", ledger::IsNull(gain) ? Value() : Value(1000.0)},
                                    {"head_median", ledger::IsNull(gain) ? Value() : Value(1000.0 * (1 + ledger::AsDouble(gain)))},
                                    {"rounds", rounds}, {"surprise", int64_t{0}}, {"note", note}, {"scored_at", at}});
  };
  auto frontier = [&](double v, int64_t r, const std::string& why) {
    return d.InsertSealed("frontier_events", {{"metric", std::string("decode_tok_s")}, {"box_id", int64_t{1}}, {"value", v},
                                              {"run_id", r}, {"reason", why}, {"at", at}})
        .value();
  };
  EXPECT_TRUE(d.Transaction([&]() -> Status {
                 (void)d.InsertSealed("boxes", {{"fingerprint", std::string("b0x0f1ngerpr1nt")}, {"detail", std::string("{}")}});
                 int64_t c1 = change("change", "fast kernels", 7.0, Value(), "", true);
                 int64_t r1 = run(c1, "submit");
                 parity(r1, "head", true, 1.0, 1e-12, std::string(64, 'a'));
                 parity(r1, "base", true, 1.0, 1e-12, std::string(64, 'a'));
                 samples(r1, 22);
                 frontier(1000.0, r1, "seed");
                 score(r1, "accepted", "m", 0.07, 1000.0, 1070.0, 5, "");
                 frontier(1070.0, r1, "accepted");
                 int64_t c2 = change("change", "tiny tweak", 1.0, Value(), "");
                 int64_t r2 = run(c2, "submit");
                 parity(r2, "head", true, 1.0, 0.0, std::string(64, 'b'));
                 samples(r2, 22);
                 score(r2, "none", "none", 0.004, 1070.0, 1070.0, 5, "below the gate or not significant; parked");
                 int64_t c3 = change("change", "stale attention", 30.0, Value(), "");
                 int64_t r3 = run(c3, "submit");
                 parity(r3, "head", false, 0.0, 7.1, std::string(64, 'c'));
                 score(r3, "rejected-parity", "none", Value(), Value(), Value(), 0, "parity gate failed; the head's speed was never measured");
                 int64_t c4 = change("change", "two threads", 40.0, Value(), "");
                 int64_t r4 = run(c4, "submit");
                 parity(r4, "head", true, 1.0, 0.0, std::string(64, 'd'));
                 samples(r4, 22);
                 score(r4, "accepted", "xl", 0.4, 1070.0, 1498.0, 5, "");
                 int64_t ev = frontier(1498.0, r4, "accepted");
                 (void)d.InsertSealed("remeasure_queue", {{"change_id", c2}, {"frontier_event_id", ev}, {"queued_at", at}});
                 int64_t r5 = run(c2, "remeasure");
                 parity(r5, "head", true, 1.0, 0.0, std::string(64, 'b'));
                 samples(r5, 22);
                 score(r5, "none", "none", 0.003, 1498.0, 1498.0, 5, "below the gate or not significant; parked");
                 int64_t c5 = change("revert", "Revert \"two threads\"", Value(), c4, "suspect contention");
                 int64_t r6 = run(c5, "revert");
                 samples(r6, 22);
                 score(r6, "refused", "none", -0.3, 1498.0, 1498.0, 5, "evidence too weak");
                 int64_t c6 = change("revert", "Revert \"fast kernels\"", Value(), c1, "costs 5% on long prompts");
                 int64_t r7 = run(c6, "revert");
                 samples(r7, 22);
                 score(r7, "accepted", "m", 0.05, 1498.0, 1572.9, 5, "the change costs +5.00% of the frontier");
                 frontier(1572.9, r7, "revert");
                 int64_t c7 = change("reapply", "Reapply fast kernels", Value(), c6, "the revert was measured on a stale build");
                 (void)d.InsertSealed("retractions", {{"run_id", r7}, {"reason", std::string("measured on a stale build")},
                                                      {"by_change", c7}, {"retracted_at", at}});
                 int64_t r8 = run(c7, "reapply");
                 parity(r8, "head", true, 1.0, 0.0, std::string(64, 'e'));
                 samples(r8, 22);
                 score(r8, "accepted", "s", 0.03, 1498.0, 1542.9, 5, "");
                 frontier(1542.9, r8, "accepted");
                 return OkStatus();
               }).ok());
  return path;
}

std::string Generate(const std::string& db, const std::string& out) {
  auto r = test::Shell(test::VerityBin() + " report --ledger " + db + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("report: wrote"), std::string::npos);
  return test::ReadFile(out);
}

TEST(Report, MatchesGoldenFileAndIsDeterministic) {
  const std::string dir = test::TempDir("report");
  const std::string db = ScriptedLedger(dir);
  const std::string a = Generate(db, dir + "/a.md");
  const std::string b = Generate(db, dir + "/b.md");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "two runs over one ledger must give identical bytes";
  const std::string golden_path = test::SourceDir() + "/tests/golden/report.md";
  std::string golden = test::ReadFile(golden_path);
  if (a != golden) {
    test::WriteFile("/tmp/verity-report.actual.md", a);
    ADD_FAILURE() << "report differs from " << golden_path
                  << "; the actual output is in /tmp/verity-report.actual.md (copy it over the golden if intended)";
  }
  const std::string svg = test::ReadFile(dir + "/ladder-decode_tok_s-b0x0f1ngerpr1nt.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<path d=\"M "), std::string::npos) << "the ladder line is drawn";
}

TEST(Report, EverySectionIsPopulated) {
  const std::string dir = test::TempDir("report-sections");
  const std::string md = Generate(ScriptedLedger(dir), dir + "/r.md");
  for (const char* needle :
       {"## Summary", "| decode_tok_s | `b0x0f1ngerpr1nt` | 1542.90 | 30.86 |", "## Frontier ladder",
        "](ladder-decode_tok_s-b0x0f1ngerpr1nt.svg)", "### Change 1: fast kernels", "bit identity proved",
        "## The `none` catalog", "| 2 | 5 | remeasure | none | none | +0.30% | 1498.00 |", "## Correctness rejections",
        "its speed was never measured: 0 samples recorded", "## Reverts and reapplies", "| refused |",
        "yes: reapplied by change 7", "### Note on a retracted number: run 7",
        "What produced it: measured on a stale build", "What replaced it: change 7"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle;
}

TEST(Report, SinceAndChartsDirAndBadInput) {
  const std::string dir = test::TempDir("report-since");
  const std::string db = ScriptedLedger(dir);
  auto r = test::Shell(test::VerityBin() + " report --ledger " + db + " --out " + dir + "/s.md --since 4 --charts " + dir + "/charts");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = test::ReadFile(dir + "/s.md");
  EXPECT_EQ(md.find("### Change 1: fast kernels"), std::string::npos);
  EXPECT_NE(md.find("### Change 4: two threads"), std::string::npos);
  EXPECT_NE(md.find("](charts/ladder-decode_tok_s-b0x0f1ngerpr1nt.svg)"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/charts/ladder-decode_tok_s-b0x0f1ngerpr1nt.svg"));
  test::WriteFile(dir + "/afile", "x");
  auto bad = test::Shell(test::VerityBin() + " report --ledger " + db + " --out " + dir + "/afile/r.md");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find(dir + "/afile"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace verity
