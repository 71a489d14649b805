// Inputs the rules pin down (issue 24, holes 9, 11 and 12): metric units from
// one explicit table, a finite range for every number a bench prints, evidence
// depths checked before they count, the parity dtype matched to the workload's,
// the box re-read at every sample, the lock a measurement held recorded, and
// the parity JSON stored byte for byte with duplicate keys refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "base/sha256.h"
#include "ledger/evidence.h"
#include "ledger/ledger.h"
#include "ledger/policy.h"
#include "ledger/score.h"
#include "measure/gbench.h"
#include "measure/measure.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

using ledger::MetricDirection;

measure::CommandOutput Printed(const std::string& out, int exit_code = 0) {
  measure::CommandOutput o;
  o.exit_code = exit_code;
  o.out = out;
  return o;
}

const std::string kBuild = R"("build":{"id":"b","artifact_sha256":")" + std::string(64, 'a') + R"("})";

std::string BenchJson(const std::string& metrics, const std::string& ok = R"("ok":true)") {
  return R"({"schema":"verity.bench/1",)" + kBuild + "," + ok + R"(,"metrics":{)" + metrics + "}}";
}

// Seven depths spread to 512, window 8, 8 positions each, plus `extra` depth entries.
std::string ParityJson(const std::string& extra = "", const std::string& ok = R"("ok":true)") {
  std::string depths;
  for (int i = 1; i <= 7; i++)
    depths += (i > 1 ? "," : "") + std::string(R"({"depth":)") + std::to_string(i == 7 ? 512 : i * 73) +
              R"(,"positions":8,"top1":1,"mean_kl":0})";
  return R"({"schema":"verity.parity/1", "mode":"standard","tokens":512,"window":8,"depths":[)" + depths + extra +
         R"(],"logits_sha256":")" + std::string(64, 'b') + R"(",)" + kBuild + "," + ok + "}\n";
}

measure::ParityEvidence Evidence() {
  measure::ParityEvidence e;
  for (int i = 1; i <= 7; i++) e.depths.push_back({i == 7 ? 512 : i * 73, 1.0, 0.0, 0.0, 8});
  e.worst_top1 = 1.0;
  e.worst_mean_kl = 0.0;
  e.window = 8;
  e.tokens = 512;
  e.mode = "standard";
  e.ok = true;
  return e;
}

// ---- 9a. Units: one table; a per-second throughput is a rate; ambiguity refused.

TEST(MetricUnits, ThroughputPerSecondIsARateNotSeconds) {
  // read_mb_s ends in "_s": read as seconds, a 20% throughput drop scored as a +26% gain.
  EXPECT_EQ(MetricDirection("read_mb_s"), std::optional<bool>(true));
  EXPECT_EQ(MetricDirection("x_gb_s"), std::optional<bool>(true));
  EXPECT_EQ(MetricDirection("decode_tok_s"), std::optional<bool>(true));
  EXPECT_EQ(MetricDirection("latency_s"), std::optional<bool>(false));
}

TEST(MetricUnits, AmbiguousPerSecondNamesAreRefused) {
  for (const char* name : {"read_kb_s", "x_tokens_s", "x_bytes_s", "x_mib_s", "x_ops_s"})
    EXPECT_FALSE(MetricDirection(name).has_value()) << name << " could be seconds or a rate per second";
}

TEST(MetricUnits, EveryMetricTheEngineAndTheAdaptersEmitIsInTheTable) {
  // verity bench's metrics (protocol/verity_bench.h) and the gbench/hyperfine adapters' "<name>_ns".
  for (const char* name : {"decode_tok_s", "prefill_tok_s", "prefill_gflops", "peak_rss_mb"})
    EXPECT_TRUE(MetricDirection(name).has_value()) << name;
  EXPECT_EQ(MetricDirection(measure::GbenchMetricName("BM_matmul/256/threads:2")), std::optional<bool>(false));
  EXPECT_EQ(MetricDirection(measure::GbenchMetricName("BM_copy_bytes_s")), std::optional<bool>(false));
}

// ---- 9b. A finite range that sums cannot overflow.

TEST(MetricRange, AValueWhoseSumsOverflowIsRefusedNamingMetricAndValue) {
  auto r = measure::ParseBench(Printed(BenchJson(R"("decode_tok_s":1e308)")), "decode_tok_s", "head bench command");
  ASSERT_FALSE(r.ok()) << "1e308 + 1e308 is inf: the seed and the frontier would read inf";
  EXPECT_NE(r.status().message().find("decode_tok_s"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1e+308"), std::string::npos) << r.status().message();
  auto guard = measure::ParseBench(Printed(BenchJson(R"("decode_tok_s":100,"peak_rss_mb":1e-300)")), "decode_tok_s",
                                   "head bench command");
  ASSERT_FALSE(guard.ok()) << "a ratio over 1e-300 overflows";
  EXPECT_NE(guard.status().message().find("peak_rss_mb"), std::string::npos) << guard.status().message();
  EXPECT_TRUE(measure::ParseBench(Printed(BenchJson(R"("decode_tok_s":6000,"x_ns":1e12)")), "decode_tok_s", "b").ok());
}

// ---- 9c. Evidence depths: distinct, 1..tokens, positions <= window, window present, 64-bit checked.

TEST(EvidenceDepths, OnlyDistinctDepthsWithinTheContextCount) {
  const ledger::Policy p = ledger::PolicyV3();
  ASSERT_EQ(ledger::JudgeParity(p, Evidence(), "standard"), "");
  auto negative = Evidence();
  negative.depths.push_back({-5, 1.0, 0.0, 0.0, 8});
  EXPECT_NE(ledger::JudgeParity(p, negative, "standard").find("depth -5"), std::string::npos)
      << ledger::JudgeParity(p, negative, "standard");
  auto six_and_negative = Evidence();
  six_and_negative.depths[0].depth = -73;  // six real depths and a negative one are not seven
  EXPECT_NE(ledger::JudgeParity(p, six_and_negative, "standard"), "");
  auto beyond = Evidence();
  beyond.depths[3].depth = 600;
  beyond.depths.push_back({512, 1.0, 0.0, 0.0, 8});
  EXPECT_NE(ledger::JudgeParity(p, beyond, "standard").find("depth 600"), std::string::npos)
      << ledger::JudgeParity(p, beyond, "standard");
  auto repeated = Evidence();
  repeated.depths.push_back(repeated.depths[2]);
  EXPECT_NE(ledger::JudgeParity(p, repeated, "standard").find("twice"), std::string::npos)
      << ledger::JudgeParity(p, repeated, "standard");
}

TEST(EvidenceDepths, PositionsBeyondTheWindowAndAMissingWindowFail) {
  const ledger::Policy p = ledger::PolicyV3();
  auto wide = Evidence();
  wide.depths[4].positions = 64;  // more positions scored than the window asked for
  EXPECT_NE(ledger::JudgeParity(p, wide, "standard").find("window"), std::string::npos)
      << ledger::JudgeParity(p, wide, "standard");
  auto no_window = Evidence();
  no_window.window = 0;
  EXPECT_NE(ledger::JudgeParity(p, no_window, "standard").find("window"), std::string::npos)
      << ledger::JudgeParity(p, no_window, "standard");
}

TEST(EvidenceDepths, ASixtyFourBitDepthIsRangeCheckedBeforeNarrowing) {
  // 2^32 + 512 cast to int is 512: the last context position.
  auto r = measure::ParseParity(Printed(ParityJson(R"(,{"depth":4294967808,"positions":8,"top1":1,"mean_kl":0})")),
                                "head parity command");
  ASSERT_FALSE(r.ok()) << "depth 4294967808 parsed as " << (r.ok() ? r->depths.back().depth : 0);
  EXPECT_NE(r.status().message().find("4294967808"), std::string::npos) << r.status().message();
  auto positions = measure::ParseParity(
      Printed(ParityJson(R"(,{"depth":9,"positions":4294967304,"top1":1,"mean_kl":0})")), "head parity command");
  EXPECT_FALSE(positions.ok());
}

// ---- 12. raw_json byte for byte; duplicate keys refused.

TEST(RawJson, ParityEvidenceIsKeptByteForByteAsPrinted) {
  const std::string printed = ParityJson();
  auto r = measure::ParseParity(Printed(printed), "head parity command");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->raw, printed);
}

TEST(RawJson, ARecordWithADuplicateKeyIsRefused) {
  auto parity = measure::ParseParity(Printed(ParityJson("", R"("ok":false,"ok":true)")), "head parity command");
  ASSERT_FALSE(parity.ok()) << "the first \"ok\": false would be lost";
  EXPECT_NE(parity.status().message().find("\"ok\""), std::string::npos) << parity.status().message();
  EXPECT_NE(parity.status().message().find("head parity command"), std::string::npos) << parity.status().message();
  auto bench = measure::ParseBench(Printed(BenchJson(R"("decode_tok_s":100)", R"("ok":false,"ok":true)")),
                                   "decode_tok_s", "head bench command");
  ASSERT_FALSE(bench.ok());
  EXPECT_NE(bench.status().message().find("\"ok\""), std::string::npos) << bench.status().message();
  auto nested = measure::ParseBench(Printed(BenchJson(R"("decode_tok_s":100,"decode_tok_s":1e6)")), "decode_tok_s",
                                    "head bench command");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("decode_tok_s"), std::string::npos) << nested.status().message();
  // The same key in two different objects is no duplicate.
  EXPECT_TRUE(measure::ParseParity(Printed(ParityJson()), "p").ok());
}

// ---- 9d. The parity dtype matches the workload's, or is declared.

Submitted DtypeRun(const Case& c, const std::string& tag, const std::string& bench_dtype, const std::string& parity,
                   const std::string& extra = "") {
  static int seed = 9100;
  seed += 2;
  const std::string model = " --model m.bin --dtype " + bench_dtype, state = std::to_string(seed);
  return Submit(c.db, tag, 7, Bench(c.dir, state + "-b", 1000, 0.003, seed, model),
                Bench(c.dir, state + "-h", 1070, 0.003, seed + 1, model), parity, extra);
}

std::string NoteOf(const Submitted& s) { return s.j.contains("note") ? s.j["note"].get<std::string>() : s.cmd.err; }

TEST(ParityDtype, AQ8WorkloadOnF32EvidenceIsRejectedNamingBoth) {
  const Case c = Fresh("inputs-dtype");
  auto s = DtypeRun(c, "q8 on f32", "q8_0", Parity("--dtype f32"));
  ASSERT_TRUE(s.j.contains("verdict")) << s.cmd.out << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "rejected-parity") << NoteOf(s);
  EXPECT_NE(NoteOf(s).find("q8_0"), std::string::npos) << NoteOf(s);
  EXPECT_NE(NoteOf(s).find("f32"), std::string::npos) << NoteOf(s);
  // Evidence that states no dtype covers no dtype.
  auto unstated = DtypeRun(c, "q8 on unstated", "q8_0", Parity("--no-dtype"));
  EXPECT_EQ(unstated.j["verdict"], "rejected-parity") << NoteOf(unstated);
  // Matched: accepted.
  auto same = DtypeRun(c, "q8 on q8", "q8_0", Parity("--dtype q8_0"));
  EXPECT_EQ(same.j["verdict"], "accepted") << NoteOf(same);
}

// Issue 41, finding 3: a record that states its workload as a string, with
// no model field, still names its dtype; f32 evidence is refused on it.
TEST(ParityDtype, AWorkloadStringAloneNamesTheDtype) {
  const Case c = Fresh("inputs-dtype-workload");
  const std::string w = " --workload " + Quote("stories260K.bin q8_0 1t pp256+tg256");
  auto s = Submit(c.db, "q8 workload string on f32", 7, Bench(c.dir, "wb", 1000, 0.003, 9301, w),
                  Bench(c.dir, "wh", 1070, 0.003, 9302, w), Parity("--dtype f32"));
  ASSERT_TRUE(s.j.contains("verdict")) << s.cmd.out << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "rejected-parity") << NoteOf(s);
  EXPECT_NE(NoteOf(s).find("q8_0"), std::string::npos) << NoteOf(s);
  // The parser, for each layout: the field, the model's default, the stated
  // workload's one dtype word, and a disagreement that no evidence matches.
  auto dtype = [](const std::string& fields) {
    measure::CommandOutput out;
    out.exit_code = 0;
    out.out = "{\"schema\":\"verity.bench/1\",\"ok\":true,\"build\":{\"id\":\"b\",\"artifact_sha256\":\"" +
              std::string(64, 'a') + "\"},\"metrics\":{\"decode_tok_s\":10}" + fields + "}";
    auto b = measure::ParseBench(out, "decode_tok_s", "bench", "cmd");
    EXPECT_TRUE(b.ok()) << fields << ": " << b.status().message();
    return b.ok() ? b->dtype : std::string("error");
  };
  EXPECT_EQ(dtype(",\"workload\":\"stories260K.bin q8_0 1t pp256+tg256\""), "q8_0");
  EXPECT_EQ(dtype(",\"workload\":\"m bf16 2t\",\"dtype\":\"bf16\""), "bf16");
  EXPECT_EQ(dtype(",\"workload\":\"m q8_0 2t\",\"dtype\":\"f32\""), "dtype?");
  EXPECT_EQ(dtype(",\"workload\":\"m q8_0 f32 2t\""), "dtype?");
  EXPECT_EQ(dtype(",\"model\":\"m.bin\""), "f32");
  EXPECT_EQ(dtype(",\"model\":\"m.bin\",\"dtype\":\"q8_0\",\"threads\":1"), "q8_0");
  EXPECT_EQ(dtype(",\"workload\":\"ledger_bench\""), "");
  EXPECT_EQ(dtype(""), "");
}

TEST(ParityDtype, AnIntendedMismatchIsDeclaredAndRecorded) {
  const Case c = Fresh("inputs-dtype-declared");
  auto s = DtypeRun(c, "q8 on declared f32", "q8_0", Parity("--dtype f32"), "--reference-dtype f32");
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "accepted") << NoteOf(s);
  auto rows = LedgerSql(c.db, "SELECT dtype FROM change_reference_dtypes");
  EXPECT_EQ(rows.out, "f32\n") << rows.err;
  // A declaration is of one dtype: other evidence is still refused, naming all three.
  auto other = DtypeRun(c, "q8 on bf16, f32 declared", "q8_0", Parity("--dtype bf16"), "--reference-dtype f32");
  EXPECT_EQ(other.j["verdict"], "rejected-parity") << NoteOf(other);
  EXPECT_NE(NoteOf(other).find("bf16"), std::string::npos) << NoteOf(other);
  auto bad = DtypeRun(c, "bad flag", "q8_0", Parity(), "--reference-dtype ''");
  EXPECT_NE(bad.cmd.exit_code, 0);
  EXPECT_NE(bad.cmd.err.find("--reference-dtype"), std::string::npos) << bad.cmd.err;
}

// ---- 11. The box is re-read at every sample; the lock a measurement held is recorded.

measure::Box FakeBox(const std::string& cpu) {
  measure::Box b;
  b.detail = R"({"cpu":")" + cpu + R"("})";
  b.fingerprint = Sha256Hex(b.detail).substr(0, 16);
  return b;
}

ledger::ChangeRequest Plus7Request(const Case& c, const std::string& tag) {
  ledger::ChangeRequest req;
  req.title = tag;
  req.predict_pct = 7;
  req.base_cmd = Bench(c.dir, "b", 1000, 0.003, 11);
  req.head_cmd = Bench(c.dir, "h", 1070, 0.003, 12);
  req.parity_cmd = Parity();
  return req;
}

TEST(BoxDuringARun, ABoxThatChangesUnderARunFailsIt) {
  const Case c = Fresh("inputs-box-change");
  auto l = ledger::Ledger::Open(c.db);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ledger::MeasureOptions opt;
  opt.lock_dir = c.dir;
  int reads = 0;
  // The box is swapped (a governor change, a driver update) after a few reads.
  opt.read_box = [&] { return FakeBox(++reads > 6 ? "other cpu" : "first cpu"); };
  auto o = (*l)->Submit(Plus7Request(c, "box changes"), opt);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->verdict, ledger::Verdict::kFailed) << o->note;
  EXPECT_NE(o->note.find(FakeBox("first cpu").fingerprint), std::string::npos) << o->note;
  EXPECT_NE(o->note.find(FakeBox("other cpu").fingerprint), std::string::npos) << o->note;
  EXPECT_GT(reads, 6) << "the box was read only " << reads << " times";
}

TEST(BoxDuringARun, TheLockAMeasurementHeldIsRecordedWithItsHolder) {
  const Case c = Fresh("inputs-box-lock");
  auto l = ledger::Ledger::Open(c.db);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ledger::MeasureOptions opt;
  opt.lock_dir = c.dir;
  opt.read_box = [] { return FakeBox("steady cpu"); };
  auto o = (*l)->Submit(Plus7Request(c, "lock recorded"), opt);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->verdict, ledger::Verdict::kAccepted) << o->note;
  auto rows = (*l)->db().Query("SELECT path, holder_pid, holder_host FROM run_box_locks WHERE run_id = ?", {o->run});
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(ledger::AsText((*rows)[0][0]), c.dir + "/verity-box-" + FakeBox("steady cpu").fingerprint + ".lock");
  EXPECT_EQ(ledger::AsInt((*rows)[0][1]), getpid());
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(ledger::AsText((*rows)[0][2]), std::string(host));
}

}  // namespace
}  // namespace verity::test
