// The protocol's promises, over many generated records: what a writer
// prints, the reader reads back whole (the fields, and the JSON again byte
// for byte); verity bench's full record survives --from-json; NaN is never
// printed as a number that could pass; malformed records are refused naming
// the field. Links verity_protocol alone: no engine, no ledger.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "protocol/bench_record.h"
#include "protocol/json_object.h"
#include "protocol/parity_record.h"
#include "protocol/verity_bench.h"

namespace verity::protocol {
namespace {

constexpr int kRecords = 400;

std::string Hex64(std::mt19937& g) {
  static const char* kHex = "0123456789abcdef";
  std::string s(64, '0');
  for (char& c : s) c = kHex[g() % 16];
  return s;
}

// A positive number spread over the whole allowed range [1e-12, 1e15].
double InRange(std::mt19937& g) { return std::pow(10.0, std::uniform_real_distribution<double>(-12.0, 15.0)(g)); }

std::string Word(std::mt19937& g) {
  static const char* kWords[] = {"stories260K.bin", "q8_0", "f32", "bf16", "serve", "7b", "x", "gbench", "llama"};
  return kWords[g() % 9];
}

BenchRecord RandomBench(std::mt19937& g) {
  BenchRecord r;
  r.build = {"build-" + std::to_string(g() % 1000), Hex64(g)};
  r.ok = g() % 4 != 0;
  const int n = 1 + g() % 5;
  for (int i = 0; i < n; i++) r.metrics["m" + std::to_string(g() % 9) + "_tok_s"] = InRange(g);
  if (g() % 3 == 0) {
    r.workload = Word(g) + " " + Word(g);
  } else {
    r.model = "models/" + Word(g);
    if (g() % 2) r.dtype = Word(g);
    if (g() % 2) r.backend = g() % 2 ? "cuda" : "fast";
    r.threads = 1 + g() % 8, r.prompt_tokens = g() % 4096, r.gen_tokens = g() % 4096;
    if (g() % 2) r.batch = 1 + g() % 32;
  }
  if (g() % 2) r.bytes_per_token = InRange(g);
  if (g() % 2) r.extra["adapter"] = {{"kind", "regex"}, {"n", static_cast<int>(g() % 7)}};
  if (g() % 2) r.extra["roofline"] = {{"achieved_gb_s", InRange(g)}};
  return r;
}

void ExpectSameBench(const BenchRecord& a, const BenchRecord& b) {
  EXPECT_EQ(a.build.id, b.build.id);
  EXPECT_EQ(a.build.artifact_sha256, b.build.artifact_sha256);
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.metrics, b.metrics);
  EXPECT_EQ(a.workload, b.workload);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.gen_tokens, b.gen_tokens);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.bytes_per_token, b.bytes_per_token);
}

TEST(BenchRecord, EveryWrittenRecordReadsBackWholeAndPrintsTheSameJson) {
  std::mt19937 g(20261206);
  int checked = 0;
  for (int i = 0; i < kRecords; i++) {
    const BenchRecord r = RandomBench(g);
    const nlohmann::json j = ToJson(r);
    // Through the text, as a command prints it and the ledger parses it.
    auto parsed = ParseObjectText(j.dump(), "record " + std::to_string(i), kBenchSchema);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    auto back = BenchRecordFromJson(*parsed, "record " + std::to_string(i));
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << j.dump();
    ExpectSameBench(r, *back);
    EXPECT_EQ(ToJson(*back).dump(), j.dump());
    checked++;
  }
  std::printf("bench records: %d generated, each read back whole and printed again byte for byte\n", checked);
}

TEST(BenchRecord, TheWorkloadKeyIsTheStatedOneOrTheFieldsOne) {
  BenchRecord r;
  r.build = {"b", "a"};
  r.metrics = {{"decode_tok_s", 10.0}};
  r.model = "some/dir/stories260K.bin", r.dtype = "q8_0", r.threads = 2, r.prompt_tokens = 256, r.gen_tokens = 64;
  EXPECT_EQ(WorkloadKey(ToJson(r)), "stories260K.bin q8_0 2t pp256+tg64");
  r.batch = 8, r.backend = "cuda";
  EXPECT_EQ(WorkloadKey(ToJson(r)), "stories260K.bin q8_0 2t pp256+tg64 x8 cuda");
  EXPECT_EQ(DtypeKey(ToJson(r), WorkloadKey(ToJson(r))), "q8_0");
  r.dtype.reset();  // records from before dtype existed keep their f32 key
  EXPECT_EQ(WorkloadKey(ToJson(r)), "stories260K.bin f32 2t pp256+tg64 x8 cuda");
  r.workload = "llama-bench 7b q4_k 16t";  // a stated workload is taken at its word
  EXPECT_EQ(WorkloadKey(ToJson(r)), "llama-bench 7b q4_k 16t");
  // ... and a dtype field disagreeing with the one it names is trusted by neither.
  r.dtype = "f32";
  EXPECT_EQ(DtypeKey(ToJson(r), WorkloadKey(ToJson(r))), "dtype?");
  // A malformed field is named in the key and printed back as it came.
  nlohmann::json j = ToJson(r);
  j.erase("workload");
  j["threads"] = 2.5;
  EXPECT_EQ(WorkloadKey(j), "stories260K.bin f32 threads?t pp256+tg64 x8 cuda");
  auto back = BenchRecordFromJson(j, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->threads.has_value());
  EXPECT_EQ(ToJson(*back), j);
}

TEST(BenchRecord, MalformedRecordsAreRefusedNamingTheField) {
  BenchRecord r;
  r.build = {"b", "a"};
  r.metrics = {{"decode_tok_s", 10.0}};
  const nlohmann::json good = ToJson(r);
  struct Case {
    std::function<void(nlohmann::json&)> spoil;
    std::string says;
  };
  const Case cases[] = {
      {[](nlohmann::json& j) { j["schema"] = "verity.bench/2"; },
       "printed schema 'verity.bench/2', expected verity.bench/1"},
      {[](nlohmann::json& j) { j.erase("schema"); }, "without a \"schema\" field"},
      {[](nlohmann::json& j) { j["build"].erase("artifact_sha256"); }, "no build.id / build.artifact_sha256"},
      {[](nlohmann::json& j) { j["build"]["id"] = 7; }, "no build.id / build.artifact_sha256"},
      {[](nlohmann::json& j) { j.erase("metrics"); }, "no metrics object"},
      {[](nlohmann::json& j) { j["metrics"]["x"] = 0.0; }, "metric 'x' is not a positive finite number"},
      {[](nlohmann::json& j) { j["metrics"]["x"] = nullptr; }, "metric 'x' is not a positive finite number"},
      {[](nlohmann::json& j) { j["metrics"]["x"] = "12"; }, "metric 'x' is not a positive finite number"},
      {[](nlohmann::json& j) { j["metrics"]["x"] = 1e300; }, "metric 'x' is 1e+300, outside the ledger's range"},
      {[](nlohmann::json& j) {
         j["roofline"] = {{"bytes_per_token", -1}};
       },
       "roofline.bytes_per_token is not a positive finite number"},
  };
  int refused = 0;
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.spoil(j);
    auto r2 = BenchRecordFromJson(j, "the head bench");
    ASSERT_FALSE(r2.ok()) << j.dump();
    EXPECT_NE(r2.status().message().find(c.says), std::string::npos) << r2.status().message();
    EXPECT_EQ(r2.status().message().rfind("the head bench", 0), 0u) << r2.status().message();
    refused++;
  }
  EXPECT_FALSE(ParseObjectText(R"({"ok": true, "ok": false})", "w", kBenchSchema).ok());
  EXPECT_FALSE(ParseObjectText("[1]", "w", kBenchSchema).ok());
  EXPECT_FALSE(ParseObjectText("  \n", "w", kBenchSchema).ok());
  std::printf("bench records: %d malformed ones refused, each naming its field\n", refused + 3);
}

VerityBenchRecord RandomVerityBench(std::mt19937& g) {
  VerityBenchRecord r;
  r.build_id = "c0ffee", r.artifact_sha256 = Hex64(g), r.model = "models/" + Word(g);
  r.backend = g() % 2 ? "fast" : "reference", r.dtype = g() % 2 ? "f32" : "q4_k_m";
  r.threads = 1 + g() % 4, r.prompt_tokens = g() % 512, r.gen_tokens = 1 + g() % 512, r.warmup_tokens = g() % 99;
  r.batch = 1 + g() % 4, r.generations = g() % 50, r.min_seconds = 0.5;
  r.decode_tok_s = InRange(g), r.prefill_tok_s = InRange(g), r.prefill_gflops = InRange(g);
  auto maybe = [&](std::optional<double>* v) {
    if (g() % 2) *v = InRange(g);
  };
  for (auto* v : {&r.peak_rss_mb, &r.weights_mb, &r.kv_cache_mb, &r.rss_limit_mb, &r.baseline_rss_mb,
                  &r.decode_position_mad_pct, &r.runqueue_wait_pct, &r.read_gb_s, &r.fraction, &r.kv_bytes_per_token,
                  &r.achieved_gb_s_with_kv, &r.fraction_with_kv})
    maybe(v);
  r.decode_mad_pct = 1.5, r.samples = static_cast<int>(g() % 10000);
  r.bytes_per_token = InRange(g), r.achieved_gb_s = InRange(g);
  if (g() % 2) r.cpus = {1, 0};
  r.per_thread = g() % 2, r.box = "60eab79661eb3bb8";
  if (g() % 2) r.pool = PoolCounts{g(), g(), g(), g(), g()};
  if (g() % 2) {
    r.simd_target = "AVX3_DL", r.stream_prefetch = g() % 2 == 0;
    if (g() % 2) r.stream_prefetch_hint = *r.stream_prefetch ? "nta" : "off";
  } else if (g() % 2) {
    r.cuda_batch_mma = g() % 2 == 0;
    if (g() % 2)  // absent in records written before 2026-12-07
      r.cuda_switches = CudaSwitches{g() % 2 == 0, g() % 2 == 0, g() % 2 == 0,
                                     g() % 2 == 0, g() % 2 == 0, 16 * static_cast<int>(1 + g() % 512)};
  }
  if (g() % 2) {  // absent in records written before 2026-12-07
    std::uniform_real_distribution<double> secs(0.0, 30.0);
    r.phases = RunPhases{secs(g), secs(g), secs(g), secs(g), secs(g), secs(g)};
  }
  return r;
}

TEST(VerityBench, TheFullRecordSurvivesFromJsonAndTheLedgerReadsItsEnvelope) {
  std::mt19937 g(7);
  for (int i = 0; i < kRecords; i++) {
    const VerityBenchRecord r = RandomVerityBench(g);
    const nlohmann::json j = ToJson(r);
    auto back = VerityBenchFromJson(nlohmann::json::parse(j.dump()), "from-json");
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << j.dump();
    EXPECT_EQ(ToJson(*back).dump(), j.dump());
    // The ledger's reading of the same record.
    auto env = BenchRecordFromJson(j, "ledger");
    ASSERT_TRUE(env.ok()) << env.status().message();
    EXPECT_TRUE(env->ok);
    EXPECT_EQ(env->metrics.at("decode_tok_s"), r.decode_tok_s);
    EXPECT_EQ(env->bytes_per_token, r.bytes_per_token);
    const std::string name = r.model.substr(r.model.find('/') + 1);
    EXPECT_EQ(WorkloadKey(j), name + " " + r.dtype + " " + std::to_string(r.threads) + "t pp" +
                                  std::to_string(r.prompt_tokens) + "+tg" + std::to_string(r.gen_tokens) +
                                  (r.batch > 1 ? " x" + std::to_string(r.batch) : ""));
  }
  std::printf("verity bench records: %d round-tripped through --from-json and read by the ledger\n", kRecords);
}

// The cuda switches a record names: each variable set away from its default, in one order.
TEST(VerityBench, CudaSwitchesSetNamesEachVariableAwayFromItsDefault) {
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{}), "defaults");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{true, false, false, true, true}), "VERITY_CUDA_FLASH_PREFILL=1");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, true, false, true, true}), "VERITY_CUDA_Q8_INT16=1");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, false, true, true, true}), "VERITY_CUDA_NORM_FUSED=1");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, false, false, false, true}), "VERITY_CUDA_PDL=0");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, false, false, true, false}), "VERITY_CUDA_L2_PREFETCH=0");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{true, true, true, false, false}),
            "VERITY_CUDA_FLASH_PREFILL=1 VERITY_CUDA_Q8_INT16=1 VERITY_CUDA_NORM_FUSED=1 VERITY_CUDA_PDL=0 "
            "VERITY_CUDA_L2_PREFETCH=0");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, false, false, true, true, 2048}), "VERITY_CUDA_PREFILL_BLOCK=2048");
  EXPECT_EQ(CudaSwitchesSet(CudaSwitches{false, false, false, true, true, 512}), "defaults");
}

// The phases' line: each in the record's order, and their sum.
TEST(VerityBench, RunPhasesLineNamesEachPhaseAndTheirSum) {
  EXPECT_EQ(RunPhasesLine(RunPhases{0.41, 1.02, 0.0, 0.9, 1.2, 1.5}),
            "backend 0.41 s, model load 1.02 s, decoder 0.00 s, first prompt 0.90 s, warm-up 1.20 s, timed 1.50 s "
            "(5.03 s in all)");
}

TEST(VerityBench, FromJsonNamesTheFieldItCannotRead) {
  std::mt19937 g(3);
  VerityBenchRecord r = RandomVerityBench(g);
  r.simd_target = "AVX2", r.stream_prefetch = true, r.stream_prefetch_hint = "nta";
  const nlohmann::json good = ToJson(r);
  for (auto [path, value, says] :
       {std::tuple<const char*, nlohmann::json, const char*>{"/affinity/cpus", "0,1",
                                                             "'affinity.cpus' is missing or not an array"},
        {"/spread/samples", 1.5, "'spread.samples' is missing or not an integer"},
        {"/kernels/stream_prefetch_hint", "off", "'kernels.stream_prefetch_hint' is missing or not nta or t0"},
        {"/pool", 3, "'pool' is missing or not an object or null"},
        {"/kernels", nlohmann::json{{"cuda_batch_mma", 1}}, "'kernels.cuda_batch_mma' is missing or not a boolean"},
        {"/kernels", nlohmann::json{{"cuda_batch_mma", true}, {"cuda_switches", {{"q8_int16", true}}}},
         "'kernels.cuda_switches.flash_prefill' is missing or not a boolean"},
        {"/kernels", nlohmann::json{{"cuda_batch_mma", true}, {"cuda_switches", 1}},
         "'kernels.cuda_switches' is missing or not an object"},
        {"/kernels",
         nlohmann::json{{"cuda_batch_mma", true},
                        {"cuda_switches",
                         {{"flash_prefill", false},
                          {"q8_int16", false},
                          {"norm_fused", false},
                          {"dependent_launch", true},
                          {"l2_whole_rows", true},
                          {"prefill_block", "2048"}}}},
         "'kernels.cuda_switches.prefill_block' is missing or not a multiple of 16 from 16 to 8192"},
        {"/phases", 2, "'phases' is missing or not an object or null"},
        {"/phases", nlohmann::json{{"backend_s", 1.0}}, "'phases.load_s' is missing or not a number >= 0"},
        {"/phases",
         nlohmann::json{{"backend_s", 1.0},
                        {"load_s", 1.0},
                        {"decoder_s", 0.0},
                        {"first_prompt_s", -1.0},
                        {"warmup_s", 1.0},
                        {"timed_s", 1.0}},
         "'phases.first_prompt_s' is missing or not a number >= 0"},
        {"/box", nullptr, "'box' is missing or not a string"}}) {
    nlohmann::json j = good;
    j[nlohmann::json::json_pointer(path)] = value;
    auto back = VerityBenchFromJson(j, "--from-json f");
    ASSERT_FALSE(back.ok()) << path;
    EXPECT_NE(back.status().message().find(says), std::string::npos) << back.status().message();
  }
}

ParityRecord RandomParity(std::mt19937& g) {
  ParityRecord r;
  const int kind = g() % 3;
  r.kind = kind == 0 ? "verity" : kind == 1 ? "logits" : "tokens";
  r.mode = g() % 2 ? "standard" : "deep";
  if (g() % 2) r.build_id = "b" + std::to_string(g() % 100), r.artifact_sha256 = Hex64(g);
  if (g() % 2) r.dtype = g() % 2 ? "bf16" : "q8_0";
  r.ok = g() % 2;
  if (r.kind == "tokens") {
    auto& x = r.identity;
    x.against = g() % 2 ? "base" : "golden";
    x.identical = g() % 2;
    x.head_bytes = g() % 5000;
    x.base_bytes = x.identical ? x.head_bytes : g() % 5000;
    x.first_diff = x.identical ? -1 : g() % 100;
    x.head_sha256 = Hex64(g), x.base_sha256 = Hex64(g);
    if (x.against == "golden") x.golden = "golden.txt";
    if (!x.identical) x.head_snippet = "ab", x.base_snippet = "ac";
    r.worst_top1 = r.worst_mean_kl = NAN;
    return r;
  }
  r.tokens = 64 + g() % 448, r.window = 1 + g() % 16;
  r.worst_top1 = 1.0, r.worst_mean_kl = 0.0;
  const int n = 1 + g() % 4;
  for (int i = 0; i < n; i++) {
    ParityRecord::Depth d;
    d.depth = 1 + static_cast<int>(g() % 512), d.top1 = (g() % 101) / 100.0;
    d.mean_kl = InRange(g) * 1e-10, d.max_kl = d.mean_kl * 2, d.positions = static_cast<int>(g() % 16);
    d.worst_position = static_cast<int>(g() % 512), d.logits_sha256 = Hex64(g);
    r.depths.push_back(d);
    r.worst_top1 = std::min(r.worst_top1, d.top1), r.worst_mean_kl = std::max(r.worst_mean_kl, d.mean_kl);
  }
  r.logits_sha256 = Hex64(g);
  if (g() % 2) r.all_rows_sha256 = Hex64(g);
  if (g() % 4 == 0) r.nonfinite = {"candidate logits: position " + std::to_string(g() % 100)};
  if (g() % 2) r.extra["thresholds"] = {{"min_top1", 0.95}, {"max_mean_kl", 0.05}};
  return r;
}

TEST(ParityRecord, EveryWrittenRecordReadsBackWhole) {
  std::mt19937 g(42);
  int kinds[3] = {0, 0, 0};
  for (int i = 0; i < kRecords; i++) {
    const ParityRecord r = RandomParity(g);
    const nlohmann::json j = ToJson(r);
    auto parsed = ParseObjectText(j.dump(), "parity", kParitySchema);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    auto back = ParityRecordFromJson(*parsed, "parity");
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << j.dump();
    EXPECT_EQ(back->kind, r.kind);
    EXPECT_EQ(back->mode, r.mode);
    EXPECT_EQ(back->dtype, r.dtype);
    EXPECT_EQ(back->build_id, r.build_id);
    EXPECT_EQ(back->artifact_sha256, r.artifact_sha256);
    EXPECT_EQ(back->ok, r.ok);
    EXPECT_EQ(back->nonfinite, r.nonfinite);
    EXPECT_EQ(back->tokens, r.tokens);
    EXPECT_EQ(back->window, r.window);
    EXPECT_EQ(back->logits_sha256, r.logits_sha256);
    EXPECT_EQ(back->all_rows_sha256, r.all_rows_sha256);
    ASSERT_EQ(back->depths.size(), r.depths.size());
    for (size_t k = 0; k < r.depths.size(); k++) {
      EXPECT_EQ(back->depths[k].depth, r.depths[k].depth);
      EXPECT_EQ(back->depths[k].top1, r.depths[k].top1);
      EXPECT_EQ(back->depths[k].mean_kl, r.depths[k].mean_kl);
      EXPECT_EQ(back->depths[k].max_kl, r.depths[k].max_kl);
      EXPECT_EQ(back->depths[k].positions, r.depths[k].positions);
    }
    if (r.kind == "tokens") {
      EXPECT_TRUE(std::isnan(back->worst_top1));
      EXPECT_EQ(back->identity.identical, r.identity.identical);
      EXPECT_EQ(back->identity.first_diff, r.identity.first_diff);
      EXPECT_EQ(back->identity.head_sha256, r.identity.head_sha256);
      EXPECT_EQ(back->identity.golden, r.identity.golden);
    } else {
      EXPECT_EQ(back->worst_top1, r.worst_top1);
      EXPECT_EQ(back->worst_mean_kl, r.worst_mean_kl);
    }
    EXPECT_EQ(back->extra, r.extra);
    kinds[r.kind == "verity" ? 0 : r.kind == "logits" ? 1 : 2]++;
  }
  std::printf("parity records: %d verity, %d logits, %d tokens, each read back whole\n", kinds[0], kinds[1], kinds[2]);
}

TEST(ParityRecord, ANaNIsPrintedAsNullAndReadAsAFailNeverAsANumber) {
  std::mt19937 g(5);
  ParityRecord r;
  do r = RandomParity(g);
  while (r.kind == "tokens");
  r.nonfinite.clear();
  r.depths[0].mean_kl = NAN;
  r.worst_mean_kl = 0.0;  // a writer's worst that missed it: the reader recomputes
  const nlohmann::json printed = nlohmann::json::parse(ToJson(r).dump());
  EXPECT_TRUE(printed["depths"][0]["mean_kl"].is_null()) << printed.dump();
  auto back = ParityRecordFromJson(printed, "p");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(std::isnan(back->worst_mean_kl));
  ASSERT_FALSE(back->nonfinite.empty());
  EXPECT_EQ(back->nonfinite[0], "depths[0].mean_kl");
}

TEST(ParityRecord, IdentityFactsThatDisagreeAreRefused) {
  ParityRecord r;
  r.kind = "tokens", r.identity.against = "base", r.identity.identical = true;
  r.identity.head_bytes = 10, r.identity.base_bytes = 11;  // identical, yet two lengths
  auto back = ParityRecordFromJson(ToJson(r), "tokens evidence");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("disagree"), std::string::npos) << back.status().message();
  r.identity.base_bytes = 10;
  EXPECT_TRUE(ParityRecordFromJson(ToJson(r), "tokens evidence").ok());
}

}  // namespace
}  // namespace verity::protocol
