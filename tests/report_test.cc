// The changelog: a scripted ledger's report matches a golden file, two runs
// give identical bytes, and every section is populated; it names the ledger tip
// it was generated from, draws the derived ladder (what counts and why) and
// shows guards and declared regressions. Also the read model's show/frontier
// printers over the same ledger.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "ledger/ledger.h"
#include "render/pr_comment.h"
#include "render/report.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using ledger::Db;
using ledger::Ledger;
using ledger::Value;

// Every file under dir, by name, with its bytes.
std::map<std::string, std::string> FilesOf(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out[e.path().filename().string()] = test::ReadFile(e.path().string());
  return out;
}

// Builds a ledger with fixed contents (fixed timestamps, fixed box) through the
// sealed-insert API, so the report is reproducible byte for byte.
std::string ScriptedLedger(const std::string& dir) {
  const std::string path = dir + "/scripted.db";
  auto l = Ledger::Open(path);
  EXPECT_TRUE(l.ok());
  Db& d = (*l)->db();
  const std::string at = "2026-11-29T12:00:00.000Z";
  auto change = [&](const std::string& kind, const std::string& title, Value predict, Value target,
                    const std::string& reason, bool bits = false, bool with_parity = true) {
    return d
        .InsertSealed("changes", {{"kind", kind},
                                  {"title", title},
                                  {"author", std::string("alice")},
                                  {"claim_pct", predict},
                                  {"predict_pct", predict},
                                  {"claim_bit_identical", int64_t{bits}},
                                  {"metric", std::string("decode_tok_s")},
                                  {"base_cmd", std::string("base")},
                                  {"head_cmd", std::string("head")},
                                  {"parity_cmd", with_parity ? Value(std::string("parity")) : Value()},
                                  {"target_change", target},
                                  {"reason", reason.empty() ? Value() : Value(reason)},
                                  {"created_at", at}})
        .value();
  };
  // Changes 1-5 were measured under policy v1 (no statistics rows, no ladder
  // moves); runs from 7 on under policy v2.
  auto run = [&](int64_t c, const std::string& purpose, int64_t policy = 1, Value queue = Value()) {
    return d
        .InsertSealed("runs", {{"change_id", c},
                               {"purpose", purpose},
                               {"box_id", int64_t{1}},
                               {"policy_version", policy},
                               {"min_rounds", int64_t{policy == 1 ? 5 : 10}},
                               {"max_rounds", int64_t{policy == 1 ? 20 : 30}},
                               {"queue_id", queue},
                               {"started_at", at}})
        .value();
  };
  auto samples = [&](int64_t r, int n) {
    for (int i = 0; i < n; i++)
      (void)d.InsertSealed("samples", {{"run_id", r},
                                       {"round", int64_t{i / 4}},
                                       {"side", std::string(i % 2 ? "head" : "base")},
                                       {"ord", int64_t{i % 4}},
                                       {"value", 1000.0 + i},
                                       {"seconds", 0.1},
                                       {"taken_at", at},
                                       {"box_id", int64_t{1}}});
  };
  // `build` non-empty: the evidence as a v2 parity command prints it (raw_json), bound to that build.
  auto parity = [&](int64_t r, const std::string& side, bool passed, double top1, double kl, const std::string& sha,
                    const std::string& build = "") {
    Value raw;
    if (!build.empty()) {
      nlohmann::json depths = nlohmann::json::array();
      for (int i = 1; i <= 7; i++)
        depths.push_back(
            {{"depth", i == 7 ? 512 : 73 * i}, {"positions", 8}, {"top1", top1}, {"mean_kl", kl}, {"max_kl", kl}});
      raw = nlohmann::json{{"schema", "verity.parity/1"},
                           {"reference", "reference-cpu"},
                           {"mode", "standard"},
                           {"tokens", 512},
                           {"window", 8},
                           {"depths", depths},
                           {"worst", {{"top1", top1}, {"mean_kl", kl}}},
                           {"logits_sha256", sha},
                           {"all_rows_sha256", std::string(64, 'f')},
                           {"nonfinite", nlohmann::json::array()},
                           {"build", {{"id", build}, {"artifact_sha256", std::string(64, build[0])}}},
                           {"ok", passed}}
                .dump();
    }
    (void)d.InsertSealed("parity_results", {{"run_id", r},
                                            {"side", side},
                                            {"mode", std::string("standard")},
                                            {"exit_code", int64_t{passed ? 0 : 1}},
                                            {"passed", int64_t{passed}},
                                            {"worst_top1", top1},
                                            {"worst_mean_kl", kl},
                                            {"logits_sha256", sha},
                                            {"message", std::string(passed ? "pass" : "FAIL")},
                                            {"seconds", 0.5},
                                            {"raw_json", raw}});
  };
  // The base is main's build; the head's build id and artifact are what its parity evidence names.
  auto artifacts = [&](int64_t r, const std::string& head_build) {
    (void)d.InsertSealed("artifacts", {{"run_id", r},
                                       {"side", std::string("base")},
                                       {"build_id", std::string("0d1f2e3c4b5a69788796a5b4c3d2e1f00f1e2d3c")},
                                       {"artifact_sha256", std::string(64, '1')}});
    (void)d.InsertSealed("artifacts", {{"run_id", r},
                                       {"side", std::string("head")},
                                       {"build_id", head_build},
                                       {"artifact_sha256", std::string(64, head_build[0])}});
  };
  auto score = [&](int64_t r, const std::string& verdict, const std::string& tier, Value gain, Value fb, Value fa,
                   int64_t rounds, const std::string& note, int64_t policy = 1) {
    return d
        .InsertSealed("scores",
                      {{"run_id", r},
                       {"policy_version", policy},
                       {"verdict", verdict},
                       {"tier", tier},
                       {"gain", gain},
                       {"ci_low", ledger::IsNull(gain) ? Value() : Value(ledger::AsDouble(gain) - 0.005)},
                       {"ci_high", ledger::IsNull(gain) ? Value() : Value(ledger::AsDouble(gain) + 0.005)},
                       {"gate", ledger::IsNull(fb) ? Value() : Value(0.02 * ledger::AsDouble(fb))},
                       {"frontier_before", fb},
                       {"frontier_after", fa},
                       {"base_median", ledger::IsNull(gain) ? Value() : Value(1000.0)},
                       {"head_median", ledger::IsNull(gain) ? Value() : Value(1000.0 * (1 + ledger::AsDouble(gain)))},
                       {"rounds", rounds},
                       {"surprise", int64_t{0}},
                       {"note", note},
                       {"scored_at", at}})
        .value();
  };
  // Policy v2 scores: the statistics behind them, and their guard metrics.
  auto stats = [&](int64_t score_id, int64_t attempt, double alpha, double ratio, double low, double high,
                   const std::string& decision) {
    (void)d.InsertSealed("score_stats", {{"score_id", score_id},
                                         {"metric", std::string("decode_tok_s")},
                                         {"attempt", attempt},
                                         {"alpha", alpha},
                                         {"ratio", ratio},
                                         {"ratio_low", low},
                                         {"ratio_high", high},
                                         {"decision", decision}});
  };
  auto guard = [&](int64_t score_id, const std::string& metric, bool higher, double ratio, double low, double high,
                   bool regressed, bool declared) {
    (void)d.InsertSealed("score_guards", {{"score_id", score_id},
                                          {"metric", metric},
                                          {"higher_is_better", int64_t{higher}},
                                          {"ratio", ratio},
                                          {"ratio_low", low},
                                          {"ratio_high", high},
                                          {"regressed", int64_t{regressed}},
                                          {"declared", int64_t{declared}}});
  };
  auto frontier = [&](double v, int64_t r, const std::string& why) {
    return d
        .InsertSealed("frontier_events", {{"metric", std::string("decode_tok_s")},
                                          {"box_id", int64_t{1}},
                                          {"value", v},
                                          {"run_id", r},
                                          {"reason", why},
                                          {"at", at}})
        .value();
  };
  // How an event moves the ladder (policy v2 events; older ones take their factor from their score).
  auto move = [&](int64_t event, Value ratio, Value undoes_run) {
    (void)d.InsertSealed("frontier_moves", {{"event_id", event}, {"ratio", ratio}, {"undoes_run", undoes_run}});
  };
  EXPECT_TRUE(
      d.Transaction([&]() -> Status {
         (void)d.InsertSealed("boxes",
                              {{"fingerprint", std::string("b0x0f1ngerpr1nt")}, {"detail", std::string("{}")}});
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
         score(r3, "rejected-parity", "none", Value(), Value(), Value(), 0,
               "parity gate failed; the head's speed was never measured");
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
         int64_t r7 = run(c6, "revert", 2);
         artifacts(r7, "5f0e1d2c3b4a59687766554433221100ffeeddcc");
         parity(r7, "head", true, 1.0, 0.0, std::string(64, '5'), "5f0e1d2c3b4a59687766554433221100ffeeddcc");
         samples(r7, 42);
         int64_t s7 =
             score(r7, "accepted", "m", 0.05, 1498.0, 1572.9, 10, "the change costs +5.00% of the frontier", 2);
         stats(s7, 0, 0.005, 1.05, 1.045, 1.055, "above");
         int64_t e7 = frontier(1572.9, r7, "revert");
         move(e7, 1.05, Value());
         // The reapply retracts the revert's evidence; its own event is recorded, but it
         // does not count: with the revert gone, the change's factor is still in the ladder.
         int64_t c7 = change("reapply", "Reapply fast kernels", 3.0, c6, "the revert was measured on a stale build");
         (void)d.InsertSealed("retractions", {{"run_id", r7},
                                              {"reason", std::string("measured on a stale build")},
                                              {"by_change", c7},
                                              {"retracted_at", at}});
         int64_t r8 = run(c7, "reapply", 2);
         artifacts(r8, "e7a3c9d1f0b24e6a8c1d3f5e7a9b0c2d4e6f8a1b");
         parity(r8, "head", true, 1.0, 0.0, std::string(64, 'e'), "e7a3c9d1f0b24e6a8c1d3f5e7a9b0c2d4e6f8a1b");
         samples(r8, 42);
         int64_t s8 = score(r8, "accepted", "s", 0.03, 1498.0, 1498.0, 10,
                            "above the gate; recorded but not counted: the revert it undoes no longer counts, so "
                            "the change's own gain is already in the frontier",
                            2);
         stats(s8, 0, 0.005, 1.03, 1.025, 1.035, "above");
         int64_t e8 = frontier(1542.94, r8, "accepted");
         move(e8, 1.03, r7);
         // Policy v2 with guards: a declared regression, accepted.
         int64_t c8 = change("change", "batched prefill", 6.0, Value(), "");
         (void)d.InsertSealed("accepted_regressions", {{"change_id", c8}, {"metric", std::string("prefill_tok_s")}});
         int64_t r9 = run(c8, "submit", 2);
         artifacts(r9, "c8b1d2e3f4a5968778695a4b3c2d1e0f9a8b7c6d");
         parity(r9, "head", true, 1.0, 0.0, std::string(64, '8'), "c8b1d2e3f4a5968778695a4b3c2d1e0f9a8b7c6d");
         samples(r9, 42);
         int64_t s9 = score(r9, "accepted", "m", 0.06, 1498.0, 1587.88, 10,
                            "above the gate; declared regression on prefill_tok_s -9.80%", 2);
         stats(s9, 0, 0.005, 1.06, 1.055, 1.065, "above");
         guard(s9, "prefill_tok_s", true, 0.902, 0.89, 0.915, true, true);
         guard(s9, "peak_rss_mb", false, 0.995, 0.98, 1.01, false, false);
         int64_t e9 = frontier(1587.88, r9, "accepted");
         move(e9, 1.06, Value());
         // The frontier moved: the parked change is measured a third time (attempt 2, less alpha).
         int64_t q =
             d.InsertSealed("remeasure_queue", {{"change_id", c2}, {"frontier_event_id", e9}, {"queued_at", at}})
                 .value();
         int64_t r10 = run(c2, "remeasure", 2, q);
         parity(r10, "head", true, 1.0, 0.0, std::string(64, 'b'), "b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1");
         samples(r10, 122);
         int64_t s10 = score(r10, "none", "none", 0.004, 1587.88, 1587.88, 30, "cannot reach the gate; parked", 2);
         stats(s10, 2, 0.00125, 1.004, 0.998, 1.01, "below");
         // An undeclared guard regression: rejected.
         int64_t c9 = change("change", "skip the final norm", 5.0, Value(), "");
         int64_t r11 = run(c9, "submit", 2);
         artifacts(r11, "9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b");
         parity(r11, "head", true, 1.0, 0.001, std::string(64, '9'), "9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b");
         samples(r11, 42);
         int64_t s11 = score(r11, "rejected-regression", "none", 0.05, 1587.88, 1587.88, 10,
                             "a guard regressed beyond the gate, undeclared: prefill_tok_s -20.00%", 2);
         stats(s11, 0, 0.005, 1.05, 1.045, 1.055, "above");
         guard(s11, "prefill_tok_s", true, 0.8, 0.78, 0.82, true, false);
         // No parity command: measured, unverified, never moves the frontier.
         int64_t c10 = change("change", "fused rope", 4.0, Value(), "", false, false);
         int64_t r12 = run(c10, "submit", 2);
         samples(r12, 42);
         int64_t s12 =
             score(r12, "unverified", "none", 0.04, 1587.88, 1587.88, 10,
                   "no parity evidence bound to the head's artifact: unverified, cannot move the frontier", 2);
         stats(s12, 0, 0.005, 1.04, 1.035, 1.045, "above");
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

// `verity ledger verify`'s tip= and records= for a ledger.
std::pair<std::string, std::string> VerifiedTip(const std::string& db) {
  auto v = test::Shell(test::VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  auto field = [&](const std::string& key) {
    const size_t p = v.out.rfind(key);
    if (p == std::string::npos) return std::string();
    const size_t e = v.out.find_first_of(" \n", p);
    return v.out.substr(p + key.size(), e - p - key.size());
  };
  return {field("tip="), field("records=")};
}

// The tip seals policy rows written with the time the ledger was created, so
// it differs between test runs: the golden file holds `<tip>` in its place.
std::string WithoutTip(std::string md, const std::string& tip) {
  for (size_t p = md.find(tip); !tip.empty() && p != std::string::npos; p = md.find(tip, p))
    md.replace(p, tip.size(), "<tip>");
  return md;
}

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) n++;
  return n;
}

TEST(Report, MatchesGoldenFileAndIsDeterministic) {
  const std::string dir = test::TempDir("report");
  const std::string db = ScriptedLedger(dir);
  const std::string a = Generate(db, dir + "/a.md");
  const std::string b = Generate(db, dir + "/b.md");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "two runs over one ledger must give identical bytes";
  const std::string actual = WithoutTip(a, VerifiedTip(db).first);
  const std::string golden_path = test::SourceDir() + "/tests/golden/report.md";
  std::string golden = test::ReadFile(golden_path);
  if (actual != golden) {
    test::WriteFile("/tmp/verity-report.actual.md", actual);
    ADD_FAILURE() << "report differs from " << golden_path
                  << "; the actual output (tip replaced by <tip>) is in /tmp/verity-report.actual.md (copy it over the "
                     "golden if intended)";
  }
  const std::string svg = test::ReadFile(dir + "/ladder-decode_tok_s-b0x0f1ngerpr1nt.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<path d=\"M "), std::string::npos) << "the ladder line is drawn";
}

TEST(Report, EverySectionIsPopulated) {
  const std::string dir = test::TempDir("report-sections");
  const std::string md = Generate(ScriptedLedger(dir), dir + "/r.md");
  for (const char* needle :
       {"## Policy",
        "**policy v1** (6 scores)",
        "**policy v2** (6 scores)",
        "**policy v3** (0 scores)",
        "**policy v4** (0 scores)",
        "**policy v5** (0 scores)",
        "**policy v6** (current; 0 scores)",
        "parity floor, tokens: the engine's greedy output equal to the base's",
        "step rule: a frontier step is a move from one artifact to another on a workload",
        "guard floors: a guard beyond the gate regresses only if also worse by more than _mb 4 MiB,",
        "gain rule: gain = median over ABBA rounds of (h1+h2)/(b1+b2)",
        "## Summary",
        "| decode_tok_s | `b0x0f1ngerpr1nt` | 1587.88 | 31.76 | change 8 (run 9, accepted) | 4 of 6 |",
        "## Frontier ladder",
        "](ladder-decode_tok_s-b0x0f1ngerpr1nt.svg)",
        "### Change 1: fast kernels",
        "bit identity claimed, not proved: no evidence hashing every logit row (all_rows_sha256) on the head or base "
        "side",
        "## The `none` catalog",
        "| 2 | 5 | remeasure | none | none | +0.30% | policy v1 (95% CI) | 1498.00 |",
        "| 3 | 10 | remeasure | none | none | +0.40% | below, attempt 2, alpha 0.00125 | 1587.88 |",
        "## Correctness rejections",
        "its speed was never measured: 0 samples recorded",
        "## Guard regressions",
        "## Unverified results",
        "| 10 fused rope | 12 | +4.00% |",
        "| unverified | 1 |",
        "| rejected-regression | 1 |",
        "## Reverts and reapplies",
        "| refused |",
        "yes: reapplied by change 7",
        "### Note on a retracted number: run 7",
        "What produced it: measured on a stale build",
        "What replaced it: change 7",
        "It no longer counts toward the frontier (ladder step 3 of decode_tok_s on `b0x0f1ngerpr1nt`: not counted)"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle;
}

// The changelog names the tip of the seal chain it was generated from, as
// `verity ledger verify` reports it.
TEST(Report, TipLineIsTheVerifiedTip) {
  const std::string dir = test::TempDir("report-tip");
  const std::string db = ScriptedLedger(dir);
  const std::string md = Generate(db, dir + "/r.md");
  const auto [tip, records] = VerifiedTip(db);
  ASSERT_EQ(tip.size(), 64u) << tip;
  EXPECT_NE(md.find("\nGenerated from ledger tip `" + tip + "` (" + records + " sealed records).\n"), std::string::npos)
      << md.substr(0, 400);
  EXPECT_LT(md.find("Generated from ledger tip"), md.find("## Summary")) << "near the top";
  // One more sealed record moves the tip, and the report follows it.
  {
    auto l = Ledger::Open(db);
    ASSERT_TRUE(l.ok());
    Db& d = (*l)->db();
    ASSERT_TRUE(d.Transaction([&]() -> Status {
                   return d
                       .InsertSealed("boxes", {{"fingerprint", std::string("another")}, {"detail", std::string("{}")}})
                       .status();
                 }).ok());
  }
  const std::string md2 = Generate(db, dir + "/r2.md");
  const auto [tip2, records2] = VerifiedTip(db);
  EXPECT_NE(tip2, tip);
  EXPECT_EQ(std::stoll(records2), std::stoll(records) + 1);
  EXPECT_NE(md2.find("Generated from ledger tip `" + tip2 + "` (" + records2 + " sealed records)."), std::string::npos);
}

// The ladder is the derived one: the retracted revert and the reapply of it
// are shown as recorded but not counted, with why, and drawn hollow.
TEST(Report, LadderShowsWhatCountsAndWhy) {
  const std::string dir = test::TempDir("report-ladder");
  const std::string md = Generate(ScriptedLedger(dir), dir + "/r.md");
  for (const char* needle :
       {"| 0 | 1 fast kernels | 1 | seed | — | — | yes | 1000.00 | seed |",
        "| 1 | 1 fast kernels | 1 | accepted | x1.0700 (+7.00%) | m | yes | 1000.00 → 1070.00 | accepted |",
        "| 3 | 6 Revert \"fast kernels\" | 7 | revert (retracted) | x1.0500 (+5.00%) | m | **no** | stays 1498.00 | "
        "run retracted |",
        "| 4 | 7 Reapply fast kernels | 8 | accepted | x1.0300 (+3.00%) | s | **no** | stays 1498.00 | its revert no "
        "longer counts",
        "| 5 | 8 batched prefill | 9 | accepted | x1.0600 (+6.00%) | m | yes | 1498.00 → 1587.88 | accepted |",
        "Ladder step 3 (revert) not counted: run retracted."})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle;
  EXPECT_EQ(md.find("1542.9"), std::string::npos)
      << "the stored running value of the uncounted reapply is not the frontier";
  const std::string svg = test::ReadFile(dir + "/ladder-decode_tok_s-b0x0f1ngerpr1nt.svg");
  // Every measured attempt is a marker (each count includes the legend's one).
  EXPECT_EQ(Count(svg, "r=\"5\" fill=\"#1f6feb\""), 5u) << "runs 1, 4, 8 and 9 accepted: filled";
  EXPECT_EQ(Count(svg, "fill=\"#ffffff\" stroke=\"#1f6feb\""), 5u) << "runs 2, 5 and 10 parked, run 6 refused: hollow";
  EXPECT_EQ(Count(svg, "fill=\"#ffffff\" stroke=\"#bf6a02\""), 3u) << "run 11 (guard) and 12 (unverified): not banked";
  EXPECT_EQ(Count(svg, "stroke=\"#cf222e\" stroke-width=\"2.2\""), 4u) << "run 3 failed parity: a cross (two strokes)";
  EXPECT_EQ(Count(svg, "r=\"5\" fill=\"#9a9a9a\""), 2u) << "run 7 retracted: grey";
  EXPECT_NE(svg.find("fill=\"#9a9a9a\">+5.0%</text>"), std::string::npos)
      << "the retracted step at the gain it claimed";
  EXPECT_NE(svg.find(">parity</text>"), std::string::npos);
  for (const char* label : {">#1<", ">#3<", ">#10<"}) EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_NE(svg.find("gate band: 2% of the frontier, above it"), std::string::npos);
  EXPECT_NE(svg.find("decode_tok_s (tok/s), higher is better"), std::string::npos);
}

// Guards: a declared regression is shown with its measured size; an undeclared
// one is a rejection; parity evidence names the build it came from.
TEST(Report, GuardsAndDeclaredRegressionsAreShown) {
  const std::string dir = test::TempDir("report-guards");
  const std::string md = Generate(ScriptedLedger(dir), dir + "/r.md");
  for (const char* needle :
       {"- declared regression: prefill_tok_s -9.8% (run 9, regressed)",
        "Guards: prefill_tok_s -9.80% (-11.00% .. -8.50%): regressed, declared up front; peak_rss_mb -0.50% (-2.00% .. "
        "+1.00%): held.",
        "| 8 batched prefill | 9 | accepted | prefill_tok_s | -9.80% | -11.00% .. -8.50% | yes |",
        "| 9 skip the final norm | 11 | rejected-regression | prefill_tok_s | -20.00% | -22.00% .. -18.00% | no |",
        "| 11 | submit | rejected-regression | none | +5.00% | +4.50% .. +5.50% | above, attempt 0, alpha 0.005 | 10 |",
        "evidence from build `c8b1d2e3f4a5`, artifact `cccccccccccccccc`, mode standard, 7 depths, window 8"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle;
}

// show and frontier, human and JSON, over the same read model.
TEST(ReadModel, ShowAndFrontierOverTheScriptedLedger) {
  const std::string dir = test::TempDir("report-show");
  const std::string db = ScriptedLedger(dir);
  auto show = test::Shell(test::VerityBin() + " show --ledger " + db + " 8");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  for (const char* needle :
       {"change 8: batched prefill [change] by alice", "  declared regressions: prefill_tok_s", "  state: accepted",
        "  run 9 (submit, box b0x0f1ngerpr1nt, complete): 42 samples (4 warm-up)",
        "    parity head standard: pass\n      evidence: build c8b1d2e3f4a5, artifact cccccccccccccccc, mode standard, "
        "7 depths, window 8",
        "    score: accepted tier m gain +6.00%", "(policy v2)",
        "      decision: above at attempt 0, alpha 0.005; median ratio 1.0600, bounds [1.0550, 1.0650]",
        "      guard prefill_tok_s -9.80% [-11.00%, -8.50%]: regressed (declared up front)",
        "      guard peak_rss_mb -0.50% [-2.00%, +1.00%]: not regressed"})
    EXPECT_NE(show.out.find(needle), std::string::npos) << "missing: " << needle << "\n" << show.out;
  auto j = nlohmann::json::parse(test::Shell(test::VerityBin() + " show --json --ledger " + db + " 8").out);
  EXPECT_EQ(j["change"]["accept_regressions"], nlohmann::json::array({"prefill_tok_s"}));
  const auto& sc = j["runs"][0]["scores"][0];
  EXPECT_EQ(sc["attempt"], 0);
  EXPECT_EQ(sc["decision"], "above");
  EXPECT_DOUBLE_EQ(sc["alpha"].get<double>(), 0.005);
  EXPECT_DOUBLE_EQ(sc["ratio_low"].get<double>(), 1.055);
  ASSERT_EQ(sc["guards"].size(), 2u);
  EXPECT_EQ(sc["guards"][0]["metric"], "prefill_tok_s");
  EXPECT_EQ(sc["guards"][0]["regressed"], true);
  EXPECT_EQ(sc["guards"][0]["declared"], true);
  EXPECT_NEAR(sc["guards"][0]["gain"].get<double>(), -0.098, 1e-12);
  const auto& p = j["runs"][0]["parity"][0];
  EXPECT_EQ(p["build_id"], "c8b1d2e3f4a5968778695a4b3c2d1e0f9a8b7c6d");
  EXPECT_EQ(p["artifact_sha256"], std::string(64, 'c'));
  EXPECT_EQ(p["depths"], 7);
  EXPECT_EQ(p["window"], 8);
  EXPECT_EQ(p["mode"], "standard");
  // An old (policy v1) score has no statistics: null, not made up.
  auto old = nlohmann::json::parse(test::Shell(test::VerityBin() + " show --json --ledger " + db + " 1").out);
  EXPECT_TRUE(old["runs"][0]["scores"][0]["attempt"].is_null());
  EXPECT_EQ(old["runs"][0]["scores"][0]["guards"].size(), 0u);
  EXPECT_EQ(old["runs"][0]["parity"][0]["evidence"], false);

  auto f = test::Shell(test::VerityBin() + " frontier --ledger " + db);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find("frontier: decode_tok_s on box b0x0f1ngerpr1nt = 1587.88 (gate 31.7576 under policy v6), set by "
                       "change 8 run 9 (accepted)"),
            std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("  not counted: change 6 run 7 (revert): run retracted"), std::string::npos) << f.out;
  auto fj = nlohmann::json::parse(test::Shell(test::VerityBin() + " frontier --json --ledger " + db).out);
  EXPECT_NEAR(fj["frontier"][0]["value"].get<double>(), 1587.88, 1e-9);
  EXPECT_EQ(fj["frontier"][0]["run"], 9);
  EXPECT_EQ(fj["frontier"][0]["counted_events"], 4);
  EXPECT_EQ(fj["frontier"][0]["steps"][3]["counted"], false);
}

// ---- charts: every SVG parses as XML and renders to a PNG of the canvas size ----

// Width and height from a PNG's IHDR chunk; {0, 0} when `bytes` is not a PNG.
std::pair<uint32_t, uint32_t> PngSize(const std::string& bytes) {
  if (bytes.size() < 24 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || bytes.compare(12, 4, "IHDR") != 0)
    return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; i++) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

// Parses `svg` as XML (Python's expat, /usr/bin/python3) and renders it with
// rsvg-convert (Debian librsvg2-bin, scripts/setup.sh) to `svg`.png; a missing
// tool is a failure, never a skip. Returns the PNG's bytes.
std::string RenderPng(const std::string& svg) {
  auto xml = test::Shell(
      "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; "
      "r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith(\"svg\"), r.tag' " +
      svg);
  EXPECT_EQ(xml.exit_code, 0) << svg << " is not well-formed SVG XML: " << xml.err;
  auto which = test::Shell("command -v rsvg-convert");
  EXPECT_EQ(which.exit_code, 0) << "rsvg-convert is missing: install librsvg2-bin (scripts/setup.sh)";
  if (which.exit_code != 0) return "";
  auto r = test::Shell("rsvg-convert -o " + svg + ".png " + svg);
  EXPECT_EQ(r.exit_code, 0) << "rsvg-convert " << svg << ": " << r.err;
  EXPECT_TRUE(r.err.empty()) << "rsvg-convert warned on " << svg << ": " << r.err;
  return test::ReadFile(svg + ".png");
}

// Renders every chart of a report directory; returns how many.
size_t RenderAll(const std::string& dir, size_t* ladders, size_t* series) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".svg") continue;
    const std::string png = RenderPng(e.path().string());
    const auto [w, h] = PngSize(png);
    EXPECT_GT(png.size(), 5000u) << name << ": a PNG with next to nothing drawn";
    EXPECT_EQ(w, 760u) << name;
    EXPECT_EQ(h, 440u) << name;
    n++;
    *ladders += name.rfind("ladder-", 0) == 0;
    *series += name.rfind("series-", 0) == 0;
  }
  std::printf("charts: rendered %zu SVGs to PNG (%zu ladders, %zu series)\n", n, *ladders, *series);
  return n;
}

// The scripted ledger's ladder holds every kind of attempt; its series a change point.
TEST(Charts, EveryChartParsesAndRendersToAPng) {
  const std::string dir = test::TempDir("report-png");
  const std::string md = Generate(ScriptedLedger(dir), dir + "/r.md");
  size_t ladders = 0, series = 0;
  EXPECT_EQ(RenderAll(dir, &ladders, &series), 2u);
  EXPECT_EQ(ladders, 1u);
  EXPECT_EQ(series, 1u);
  EXPECT_NE(md.find("](series-decode_tok_s-b0x0f1ngerpr1nt.svg)"), std::string::npos)
      << "the changelog embeds the series";
  const std::string svg = test::ReadFile(dir + "/series-decode_tok_s-b0x0f1ngerpr1nt.svg");
  EXPECT_EQ(Count(svg, "stroke-dasharray=\"6 4\""), 1u) << "one change point, one dashed line";
  EXPECT_NE(svg.find("+0.99% step (1012 to 1022)"), std::string::npos) << "the step size is labelled";
}

// The project's own changelog charts render too (they are what a reader sees).
TEST(Charts, TheProjectLedgersChartsRender) {
  const std::string dir = test::TempDir("project-png");
  ASSERT_EQ(test::Shell("cp " + test::SourceDir() + "/reports/*.svg " + dir).exit_code, 0);
  size_t ladders = 0, series = 0;
  EXPECT_GE(RenderAll(dir, &ladders, &series), 2u);
  EXPECT_GE(ladders, 1u);
  EXPECT_GE(series, 1u);
}

TEST(Charts, TicksAreRoundAndCoverTheRange) {
  const std::pair<double, double> ranges[] = {{2369.0, 2800.9}, {0.013, 0.0171}, {73.87, 106.3}, {-3, 3},
                                              {1.2e6, 2.6e6},   {99.0, 99.02},   {0, 1}};
  size_t checked = 0;
  for (const auto& [lo, hi] : ranges) {
    const auto t = reports::NiceTicks(lo, hi, 7);
    ASSERT_GE(t.size(), 2u);
    EXPECT_LE(t.size(), 7u) << lo << ".." << hi;
    EXPECT_LE(t.front(), lo + 1e-9 * (t[1] - t[0]));
    EXPECT_GE(t.back(), hi - 1e-9 * (t[1] - t[0]));
    const double step = t[1] - t[0], mag = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    const double m = step / mag;
    EXPECT_TRUE(std::fabs(m - 1) < 1e-6 || std::fabs(m - 2) < 1e-6 || std::fabs(m - 5) < 1e-6) << step;
    for (double v : t) EXPECT_NEAR(v / step, std::round(v / step), 1e-6) << v << " is not a multiple of " << step;
    checked++;
  }
  EXPECT_EQ(reports::NiceTicks(2369.0, 2800.9, 7), (std::vector<double>{2300, 2400, 2500, 2600, 2700, 2800, 2900}));
  EXPECT_EQ(checked, std::size(ranges));
}

// A lower-is-better time: the unit says so, the band lies below the frontier
// (the better side), and a faster attempt sits below the line.
TEST(Charts, LowerIsBetterLadderReadsCorrectly) {
  EXPECT_EQ(reports::MetricUnit("BM_Frontier_ns"), "ns");
  EXPECT_EQ(reports::MetricUnit("decode_tok_s"), "tok/s");
  EXPECT_EQ(reports::MetricUnit("sleep_ms"), "ms");
  EXPECT_EQ(reports::MetricUnit("frobs"), "");
  reports::LadderChart c;
  c.title = "BM_Frontier_ns frontier ladder";
  c.metric = "BM_Frontier_ns";
  c.gate_frac = 0.02;
  using reports::Mark;
  c.slots = {{"#1", 1000.0 / 1.10, 1000.0, 1000.0 / 1.10, Mark::kAccepted, false, "+10.00%"},
             {"#2", 1000.0 / 1.10, std::nullopt, 1000.0 / 1.10 / 1.01, Mark::kParked, false, "+1.00%"},
             {"#3", 1000.0 / 1.10, std::nullopt, 1000.0 / 1.10, Mark::kRejectedParity, false, "parity failed"},
             {"#4", 1000.0 / 1.10, std::nullopt, 1000.0 / 1.10 / 1.3, Mark::kNotBanked, true, "+30.00% unverified"}};
  const std::string svg = reports::LadderSvg(c);
  EXPECT_NE(svg.find("BM_Frontier_ns (ns), lower is better"), std::string::npos);
  EXPECT_NE(svg.find("gate band: 2% of the frontier, below it"), std::string::npos);
  const std::string dir = test::TempDir("ladder-ns");
  test::WriteFile(dir + "/ladder-ns.svg", svg);
  size_t ladders = 0, series = 0;
  EXPECT_EQ(RenderAll(dir, &ladders, &series), 1u);
  // The band's far edge (frontier / 1.02) is drawn lower on the canvas than the frontier line.
  const size_t band = svg.find("fill-opacity=\"0.16\" stroke=\"none\"");
  ASSERT_NE(band, std::string::npos);
  const std::string band_path = svg.substr(svg.rfind("<path d=\"", band), band - svg.rfind("<path d=\"", band));
  const size_t last_l = band_path.rfind(" L ");
  double bx = 0, by = 0;
  std::sscanf(band_path.c_str() + last_l, " L %lf %lf", &bx, &by);
  double fx = 0, fy = 0;
  std::sscanf(band_path.c_str() + band_path.find("M "), "M %lf %lf", &fx, &fy);
  EXPECT_GT(by, fy) << "the gate edge of a lower-is-better metric is below its frontier on the canvas: " << band_path;
}

TEST(Report, SinceAndChartsDirAndBadInput) {
  const std::string dir = test::TempDir("report-since");
  const std::string db = ScriptedLedger(dir);
  auto r = test::Shell(test::VerityBin() + " report --ledger " + db + " --out " + dir + "/s.md --since 4 --charts " +
                       dir + "/charts");
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

// A PR comment is markdown a stranger's strings reach: the title and refs are
// data, never markup or a mention.
TEST(PrComment, TheSubmittersStringsAreEscaped) {
  ledger::ChangeView v;
  v.change.id = 7;
  v.change.title = "*bold* | cell `code` <script> [x](y) line\nbreak";
  v.change.head_ref = "feat`x";
  v.change.base_ref = "main";
  const std::string md = reports::PrComment(v);
  EXPECT_NE(md.find("\\*bold\\*"), std::string::npos) << md;
  EXPECT_NE(md.find("\\|"), std::string::npos) << md;
  EXPECT_NE(md.find("\\<script>"), std::string::npos) << "HTML must be escaped: " << md;
  EXPECT_EQ(md.find("line\nbreak"), std::string::npos) << md;
  EXPECT_NE(md.find("Not scored yet"), std::string::npos) << md;
}

// docs/ci.md's four example pull-request comments are what `verity show N
// --markdown` renders from the project's ledger now (scripts/ci-comments.sh
// writes them); the test fails naming the change whose comment drifted.
TEST(ProjectLedger, PrCommentsInDocsCiAreWhatTheLedgerSays) {
  const std::string doc = test::ReadFile(test::SourceDir() + "/docs/ci.md");
  ASSERT_FALSE(doc.empty()) << "docs/ci.md is missing";
  const std::string open = "<!-- pr-comment ", close = "<!-- /pr-comment -->";
  const std::string dir = test::TempDir("pr-comments");
  ASSERT_EQ(test::Shell("cp " + test::SourceDir() + "/reports/ledger.db " + dir + "/ledger.db").exit_code, 0);
  int checked = 0;
  for (size_t at = doc.find(open); at != std::string::npos; at = doc.find(open, at + 1)) {
    const size_t id_end = doc.find(" -->\n", at);
    ASSERT_NE(id_end, std::string::npos) << "an unclosed marker in docs/ci.md";
    const std::string id = doc.substr(at + open.size(), id_end - at - open.size());
    const size_t body = id_end + 5, end = doc.find(close, body);
    ASSERT_NE(end, std::string::npos) << "change " << id << ": no " << close;
    auto r = test::Shell(test::VerityBin() + " show " + id + " --ledger " + dir + "/ledger.db --markdown");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(doc.substr(body, end - body), r.out)
        << "docs/ci.md's comment for change " << id << " is not what the ledger says: run scripts/ci-comments.sh";
    checked++;
  }
  EXPECT_EQ(checked, 4) << "docs/ci.md should show an accepted, a parked, a parity-rejected and a held change";
}

}  // namespace
}  // namespace verity

namespace verity {
namespace {

// The project's own ledger (reports/ledger.db) is sealed, verifies, and the
// committed changelog is exactly what it generates. A copy is used: `report`
// opens a ledger for writing (migrations) and the committed file must not change.
TEST(ProjectLedger, VerifiesAndRegeneratesTheCommittedChangelog) {
  const std::string src = test::SourceDir() + "/reports";
  const std::string dir = test::TempDir("project-ledger");
  ASSERT_EQ(test::Shell("cp " + src + "/ledger.db " + dir + "/ledger.db").exit_code, 0)
      << "reports/ledger.db is missing";
  auto v = test::Shell(test::VerityBin() + " ledger verify --ledger " + dir + "/ledger.db");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("verdict=PASS"), std::string::npos) << v.out;
  auto r = test::Shell(test::VerityBin() + " report --ledger " + dir + "/ledger.db --out " + dir + "/CHANGELOG.md");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("report: wrote"), std::string::npos) << r.out;
  const std::string committed = test::ReadFile(src + "/CHANGELOG.md");
  ASSERT_FALSE(committed.empty()) << "reports/CHANGELOG.md is missing";
  EXPECT_EQ(test::ReadFile(dir + "/CHANGELOG.md"), committed)
      << "reports/CHANGELOG.md is not what reports/ledger.db generates: run scripts/project-ledger.sh report";
}

// reports/ is the project's data, never code: the ledger and the site
// generated from it, each chart exactly what the ledger draws today.
TEST(ProjectLedger, ReportsHoldsTheLedgerAndItsSiteAndNoCode) {
  const std::string src = test::SourceDir() + "/reports";
  const std::string dir = test::TempDir("project-site");
  ASSERT_EQ(test::Shell("cp " + src + "/ledger.db " + dir + "/ledger.db").exit_code, 0)
      << "reports/ledger.db is missing";
  auto r = test::Shell(test::VerityBin() + " report --ledger " + dir + "/ledger.db --out " + dir + "/CHANGELOG.md");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto generated = FilesOf(dir);
  int charts = 0, entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    entries++;
    if (e.is_directory()) {
      EXPECT_EQ(name, "dashboard") << "reports/" << name << "/ is not part of the site: code lives in render/";
      continue;
    }
    if (name == "ledger.db" || name == "ledger.db-wal" || name == "ledger.db-shm" || name == "CHANGELOG.md") continue;
    EXPECT_TRUE(name.size() > 4 && name.substr(name.size() - 4) == ".svg")
        << "reports/" << name << " is neither the ledger nor the site it generates: code lives in render/";
    auto it = generated.find(name);
    EXPECT_TRUE(it != generated.end() && it->second == test::ReadFile(e.path().string()))
        << "reports/" << name << " is not what reports/ledger.db draws: run scripts/project-ledger.sh report";
    charts++;
  }
  for (const auto& [name, bytes] : generated)
    if (name.size() > 4 && name.substr(name.size() - 4) == ".svg")
      EXPECT_TRUE(std::filesystem::exists(src + "/" + name)) << "reports/" << name << " is missing";
  EXPECT_GT(charts, 0);
  std::printf("reports/: %d entries, the ledger, its changelog, dashboard/ and %d charts, each what the ledger draws\n",
              entries, charts);
}

TEST(ProjectLedger, TheCommittedDashboardIsWhatTheLedgerGenerates) {
  const std::string src = test::SourceDir() + "/reports";
  const std::string dir = test::TempDir("project-dashboard");
  ASSERT_EQ(test::Shell("cp " + src + "/ledger.db " + dir + "/ledger.db").exit_code, 0)
      << "reports/ledger.db is missing";
  auto r = test::Shell(test::VerityBin() + " report --ledger " + dir + "/ledger.db --html " + dir + "/dashboard");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::is_directory(src + "/dashboard")) << "reports/dashboard is missing";
  const auto want = FilesOf(dir + "/dashboard"), got = FilesOf(src + "/dashboard");
  EXPECT_GT(want.size(), 7u);
  for (const auto& [name, bytes] : want) {
    auto it = got.find(name);
    EXPECT_TRUE(it != got.end() && it->second == bytes)
        << "reports/dashboard/" << name
        << " is not what reports/ledger.db generates: run scripts/project-ledger.sh report";
  }
  for (const auto& [name, bytes] : got) EXPECT_EQ(want.count(name), 1u) << "reports/dashboard/" << name << " is stale";
}

}  // namespace
}  // namespace verity

namespace verity {
namespace {

// A scripted ledger plus a change whose title and reason are markup.
std::string HostileLedger(const std::string& dir) {
  const std::string db = ScriptedLedger(dir);
  auto l = Ledger::Open(db);
  EXPECT_TRUE(l.ok());
  (void)(*l)
      ->db()
      .InsertSealed("changes", {{"kind", std::string("change")},
                                {"title", std::string("<script>alert(1)</script> & \"quoted\"")},
                                {"author", std::string("<b>mallory</b>")},
                                {"predict_pct", 1.0},
                                {"claim_bit_identical", int64_t{0}},
                                {"metric", std::string("decode_tok_s")},
                                {"base_cmd", std::string("base </script>")},
                                {"head_cmd", std::string("head")},
                                {"created_at", std::string("2026-11-29T12:00:00.000Z")}})
      .value();
  return db;
}

TEST(Dashboard, TheSameLedgerGivesTheSameBytesAndMarkupStaysData) {
  const std::string dir = test::TempDir("dashboard-bytes");
  const std::string db = HostileLedger(dir);
  for (const char* out : {"/a", "/b"}) {
    auto r = test::Shell(test::VerityBin() + " report --ledger " + db + " --html " + dir + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("report: wrote the dashboard " + dir + out + "/index.html ("), std::string::npos) << r.out;
  }
  const auto a = FilesOf(dir + "/a"), b = FilesOf(dir + "/b");
  ASSERT_EQ(a, b);
  for (const char* f : {"index.html", "data.js", "dashboard.js", "dashboard.css", "change.js", "uPlot.iife.min.js",
                        "uPlot.min.css", "uPlot.LICENSE"})
    EXPECT_EQ(a.count(f), 1u) << f;
  // Every change has its page; the hostile one's strings are escaped text.
  int pages = 0;
  for (const auto& [name, bytes] : a) pages += name.rfind("change-", 0) == 0 && name.size() > 12;
  EXPECT_GE(pages, 2);
  std::string hostile;
  for (const auto& [name, bytes] : a)
    if (name.rfind("change-", 0) == 0 && bytes.find("mallory") != std::string::npos) hostile = bytes;
  ASSERT_FALSE(hostile.empty());
  EXPECT_NE(hostile.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;"), std::string::npos);
  EXPECT_EQ(hostile.find("<script>alert"), std::string::npos);
  EXPECT_EQ(hostile.find("<b>mallory"), std::string::npos);
  EXPECT_EQ(hostile.find("base </script>"), std::string::npos);
  EXPECT_EQ(a.at("data.js").find("<script>alert"), std::string::npos);
  EXPECT_NE(a.at("data.js").find("\\u003cscript>alert(1)"), std::string::npos);
}

TEST(Dashboard, BadArgumentsAreNamedErrors) {
  const std::string dir = test::TempDir("dashboard-bad");
  const std::string db = ScriptedLedger(dir);
  test::WriteFile(dir + "/afile", "x");
  auto into_file = test::Shell(test::VerityBin() + " report --ledger " + db + " --html " + dir + "/afile");
  EXPECT_NE(into_file.exit_code, 0);
  EXPECT_NE(into_file.err.find(dir + "/afile"), std::string::npos) << into_file.err;
  auto neither = test::Shell(test::VerityBin() + " report --ledger " + db);
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.err.find("--out FILE.md, --html DIR"), std::string::npos) << neither.err;
  auto since_alone = test::Shell(test::VerityBin() + " report --ledger " + db + " --html " + dir + "/site --since 4");
  EXPECT_NE(since_alone.exit_code, 0);
  EXPECT_NE(since_alone.err.find("they need --out FILE.md"), std::string::npos) << since_alone.err;
}

// The dashboard in a real browser: headless Chromium driven by puppeteer-core
// loads every page with no console error, finds the ledger's points, hovers
// and clicks them, follows every link and tries every verdict filter
// (tests/dashboard/check.mjs). Screenshots stay in the build tree to look at.
TEST(Dashboard, EveryPageLoadsInHeadlessChromium) {
  const std::string dir = test::TempDir("dashboard-browser");
  const std::string db = HostileLedger(dir);
  auto r = test::Shell(test::VerityBin() + " report --ledger " + db + " --html " + dir + "/site");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string shots = std::filesystem::current_path().string() + "/dashboard-screenshots";
  auto c =
      test::Shell(test::SourceDir() + "/tests/dashboard/check.sh " + test::SourceDir() + " " + dir + "/site " + shots);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find(" 0 console errors, "), std::string::npos) << c.out << c.err;
  EXPECT_NE(c.out.find(", 0 failures"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find(" 0 hovers"), std::string::npos) << c.out;  // the scripted ledger has points to hover
  EXPECT_TRUE(std::filesystem::exists(shots + "/index.png"));
}

}  // namespace
}  // namespace verity
