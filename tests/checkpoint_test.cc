// Checkpoints as people ship them: a directory converted by another tool runs
// the golden text; every way of being incomplete fails loudly, in the loader
// and in the audit; MoE keeps parity; the probe and preflight prove they ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "verify/audit.h"
#include "verify/parity.h"
#include "engine/engine.h"
#include "tests/test_util.h"

namespace verity {
namespace {
namespace fs = std::filesystem;
using test::Model;
using test::Shell;
using test::VerityBin;

std::string Tool(const std::string& name) { return "python3 " + test::SourceDir() + "/tests/tools/" + name; }

// stories260K converted by the independent Python converter: 3 shards, the final norm alone in the last.
std::string External(const std::string& tag, const std::string& extra = "") {
  const std::string dir = test::TempDir(tag) + "/hf";
  auto r = Shell(Tool("llama2c_to_hf.py") + " " + Model("stories260K.bin") + " " + dir + " --shards 3 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

test::CommandResult Audit(const std::string& dir, const std::string& flags = "") {
  return Shell(VerityBin() + " audit " + dir + " " + flags);
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

void ExpectAuditFails(const std::string& dir, const std::string& needle) {
  auto a = Audit(dir);
  EXPECT_NE(a.exit_code, 0) << a.out;
  EXPECT_EQ(LastLine(a.out).rfind("audit: tensors=", 0), 0u) << "the summary line is always last: " << a.out;
  EXPECT_NE(LastLine(a.out).find("verdict=FAIL"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find(needle), std::string::npos) << "audit output lacks '" << needle << "': " << a.out;
}

void ExpectLoadFails(const std::string& dir, const std::string& needle) {
  auto r = Shell(VerityBin() + " generate --model " + dir + " --tokenizer " + Model("tok512.bin") + " --steps 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << "generate must refuse, not print: " << r.out;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(Checkpoint, ExternallyConvertedShardsRunTheGoldenText) {
  const std::string dir = External("ext");
  auto g = Shell(VerityBin() + " generate --model " + dir + " --tokenizer " + Model("tok512.bin") +
                 " --steps 200 --temperature 0");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, test::ReadFile(Model("stories260K.greedy200.txt")));
  auto a = Audit(dir);
  EXPECT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(LastLine(a.out), "audit: tensors=47 shards=3/3 missing=0 fatal=0 verdict=PASS");
  auto p = Shell(VerityBin() + " parity --model " + dir);
  EXPECT_EQ(p.exit_code, 0) << p.out;
}

TEST(Checkpoint, VerityConvertRoundTripsAndUsesHalvesRope) {
  const std::string dir = test::TempDir("conv") + "/hf";
  ASSERT_EQ(
      Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + dir + " --shards 2").exit_code,
      0);
  auto g = Shell(VerityBin() + " generate --model " + dir + " --tokenizer " + Model("tok512.bin") +
                 " --steps 200 --temperature 0");
  EXPECT_EQ(g.out, test::ReadFile(Model("stories260K.greedy200.txt")));
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config.rope_style, RopeStyle::kHalves);
  // A bf16 conversion loads (and is checked by parity, not by the golden text).
  const std::string bf = test::TempDir("bf16") + "/hf";
  ASSERT_EQ(
      Shell(VerityBin() + " convert --model " + Model("stories260K.bin") + " --out " + bf + " --dtype bf16").exit_code,
      0);
  EXPECT_EQ(Audit(bf).exit_code, 0);
  EXPECT_TRUE(LoadModel(bf).ok());
}

TEST(Checkpoint, WithoutItsLastShardTheFinalNormIsFatal) {
  const std::string dir = External("noshard");
  fs::remove(dir + "/model-00003-of-00003.safetensors");
  ExpectAuditFails(dir, "FATAL model.norm.weight (norm)");
  ExpectLoadFails(dir,
                  "required tensor model.norm.weight (norm) is in model-00003-of-00003.safetensors, which is missing");
}

TEST(Checkpoint, EachWayOfBeingBrokenIsNamed) {
  {
    const std::string dir = External("noindex");
    fs::remove(dir + "/model.safetensors.index.json");
    ExpectAuditFails(dir, "model.safetensors.index.json is missing");
    ExpectLoadFails(dir, "neither model.safetensors.index.json nor model.safetensors");
  }
  {
    const std::string dir = External("trunc");
    fs::resize_file(dir + "/model-00001-of-00003.safetensors",
                    fs::file_size(dir + "/model-00001-of-00003.safetensors") - 100);
    ExpectAuditFails(dir, "(truncated)");
    ExpectLoadFails(dir, "(truncated)");
  }
  {
    const std::string dir = External("shape", "--bad-shape model.layers.0.self_attn.k_proj.weight");
    // Checked against the config before anything is sized from it: the key and the tensor named.
    ExpectAuditFails(dir,
                     "num_key_value_heads x head_dim (4 x 8) is 32 but tensor model.layers.0.self_attn.k_proj.weight "
                     "has shape [64x32]");
    ExpectLoadFails(dir,
                    "num_key_value_heads x head_dim (4 x 8) is 32 but tensor model.layers.0.self_attn.k_proj.weight "
                    "has shape [64x32]");
  }
  {
    const std::string dir = External("eps");
    std::string cfg = test::ReadFile(dir + "/config.json");
    size_t at = cfg.find("\"rms_norm_eps\"");
    ASSERT_NE(at, std::string::npos);
    cfg.erase(at, cfg.find('\n', at) - at + 1);
    test::WriteFile(dir + "/config.json", cfg);
    ExpectAuditFails(dir, "required key 'rms_norm_eps' is missing");
    ExpectLoadFails(dir, "required key 'rms_norm_eps' is missing");
  }
  {
    // Found by the hf_config fuzz target: a float key beyond float range was read as inf.
    const std::string dir = External("theta");
    std::string cfg = test::ReadFile(dir + "/config.json");
    size_t at = cfg.find("\"rope_theta\"");
    ASSERT_NE(at, std::string::npos);
    const size_t value = cfg.find(':', at) + 1;
    cfg.replace(value, cfg.find_first_of(",\n}", value) - value, " 1e86");
    test::WriteFile(dir + "/config.json", cfg);
    ExpectLoadFails(dir, "config.json: key 'rope_theta' is 1e+86, beyond float range");
  }
  {
    const std::string dir = External("dtype");
    std::string cfg = test::ReadFile(dir + "/config.json");
    cfg.replace(cfg.find("\"float32\""), 9, "\"bfloat16\"");
    test::WriteFile(dir + "/config.json", cfg);
    ExpectAuditFails(
        dir,
        "model.embed_tokens.weight: dtype F32 in model-00001-of-00003.safetensors, config torch_dtype implies BF16");
  }
  {
    const std::string dir = External("unreadable");
    test::WriteFile(dir + "/model.safetensors.index.json", "{not json");
    ExpectAuditFails(dir, "model.safetensors.index.json: not valid JSON");
  }
}

std::string MoeDir(const std::string& tag) {
  const std::string dir = test::TempDir(tag) + "/moe";
  auto r =
      Shell(VerityBin() + " synth --seed 5 --shards 1 --out " + dir +
            " --config '{\"dim\":64,\"hidden_dim\":96,\"n_layers\":2,\"n_heads\":4,\"n_kv_heads\":2,"
            "\"vocab_size\":320,\"seq_len\":64,\"shared_classifier\":false,\"n_experts\":4,\"n_experts_per_tok\":2}'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

// A synth directory's files, hashed: each file's SHA-256 under its name, in
// name order, hashed again.
std::string DirHash(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string lines;
  for (const std::string& n : names) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    lines += n + ":" + Sha256Hex(bytes) + "\n";
  }
  return Sha256Hex(lines);
}

// verity synth's bytes are what other checks compare (device-check's 1B and
// 7B synths, the families against NumPy and llama.cpp): a change to the
// writer that keeps the values keeps these hashes, on one thread or three.
// Pinned on 2026-12-07 from the writer before it reused its buffers and
// split rows over threads (28 configurations compared byte for byte with it;
// a 10000-row classifier here splits over the threads).
TEST(Checkpoint, SynthWritesTheBytesItAlwaysHas) {
  const std::pair<std::string, std::string> cases[] = {
      {"--like qwen3 --dtype bf16 --shards 2", "425a14ca599e88ae749b830b063afd4c013682cff54fcae25f0a93f8d8f8bf78"},
      {"--like phi3 --dtype f32", "ebc6a3322173b3584294e1a646dede2821833a6101b3c28eefb4d58afcc0a2fd"},
      {"--like gemma2 --dtype bf16", "6ad4247592f25700b54125bbc2f3688acb45c675c438a6846a62a5692fd27d88"},
      {"--dtype bf16 --shards 2 --config '{\"dim\":64,\"hidden_dim\":160,\"n_layers\":2,\"n_heads\":4,"
       "\"n_kv_heads\":2,\"vocab_size\":10000,\"seq_len\":32,\"shared_classifier\":false}'",
       "b3f45a1ac5b28993b739a62f01e7e1feeb11aab32210e4a9281a27e59bc6d526"}};
  int checked = 0;
  for (const auto& [args, want] : cases)
    for (const char* threads : {"1", "3"}) {
      const std::string dir = test::TempDir("synth-bytes") + "/m" + std::to_string(checked);
      auto r = Shell("VERITY_THREADS=" + std::string(threads) + " " + VerityBin() + " synth --out " + dir + " " + args);
      ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
      EXPECT_EQ(DirHash(dir), want) << args << " on " << threads << " thread(s)";
      checked++;
    }
  std::printf("synth bytes: %d directories hashed as pinned\n", checked);
}

TEST(Moe, FastKeepsParityWithTheReference) {
  const std::string dir = MoeDir("moe-parity");
  auto p = Shell(VerityBin() + " parity --model " + dir);
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  // worst mean KL <= 1e-6
  auto m = LoadModel(dir);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->config.n_experts, 4);
  ParityOptions opt;
  auto rep = RunParity(**m, opt);
  ASSERT_TRUE(rep.ok());
  EXPECT_LE(rep->worst_mean_kl, 1e-6);
  EXPECT_EQ(rep->worst_top1, 1.0);
}

TEST(Moe, MissingExpertsAreAllowedOnlyWhenDeclaredElsewhere) {
  const std::string dir = MoeDir("moe-audit");
  EXPECT_EQ(Audit(dir).exit_code, 0);
  const std::string experts = test::TempDir("moe-noexp") + "/d";
  ASSERT_EQ(Shell(Tool("st_filter.py") + " " + dir + " " + experts + " --drop 'experts\\.[0-9]+\\.'").exit_code, 0);
  ExpectAuditFails(experts, "FATAL model.layers.0.block_sparse_moe.experts.0.w1.weight (expert)");
  auto ok = Audit(experts, "--experts-elsewhere");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(LastLine(ok.out), "audit: tensors=41 shards=1/1 missing=24 fatal=0 verdict=PASS");
  EXPECT_NE(ok.out.find("ALLOWED model.layers.1.block_sparse_moe.experts.3.w2.weight"), std::string::npos);
  // ...and if and only if nothing else is missing: a router gone is fatal regardless.
  const std::string router = test::TempDir("moe-norouter") + "/d";
  ASSERT_EQ(Shell(Tool("st_filter.py") + " " + dir + " " + router +
                  " --drop 'experts\\.[0-9]+\\.|layers\\.1\\.block_sparse_moe\\.gate'")
                .exit_code,
            0);
  auto bad = Audit(router, "--experts-elsewhere");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("FATAL model.layers.1.block_sparse_moe.gate.weight (router)"), std::string::npos) << bad.out;
  ExpectLoadFails(experts, "required tensor model.layers.0.block_sparse_moe.experts.0.w1.weight (expert) is missing");
}

TEST(Probe, ZeroedFinalNormLoadsCleanlyButFailsTheProbe) {
  const std::string dir = External("zero", "--zero model.norm.weight");
  EXPECT_EQ(Audit(dir).exit_code, 0) << "structurally complete";
  const std::string probes = Model("stories260K.probes.json");
  auto good = Shell(VerityBin() + " probe --model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin"));
  EXPECT_EQ(good.exit_code, 0) << good.out;
  EXPECT_EQ(LastLine(good.out), "probe: passed=3/3 verdict=PASS");
  auto bad =
      Shell(VerityBin() + " probe --model " + dir + " --tokenizer " + Model("tok512.bin") + " --probes " + probes);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(LastLine(bad.out), "probe: passed=0/3 verdict=FAIL");
  // Scheduled mode alerts on stderr, exits non-zero, restarts nothing.
  auto sched = Shell(VerityBin() + " probe --model " + dir + " --tokenizer " + Model("tok512.bin") + " --probes " +
                     probes + " --every 0 --count 3");
  EXPECT_NE(sched.exit_code, 0);
  EXPECT_NE(sched.err.find("ALERT: coherence probe failed"), std::string::npos) << sched.err;
  auto ok_sched = Shell(VerityBin() + " probe --model " + Model("stories260K.bin") + " --tokenizer " +
                        Model("tok512.bin") + " --every 0 --count 2");
  EXPECT_EQ(ok_sched.exit_code, 0);
  EXPECT_NE(ok_sched.out.find("probe: round 1/2 passed=3/3"), std::string::npos);
}

TEST(Preflight, PassesOnlyWhenBothGuardsRanAndSaidPass) {
  const std::string dir = External("pre");
  const std::string probes = " --probes " + Model("stories260K.probes.json");
  const std::string base = VerityBin() + " preflight --model " + dir + " --tokenizer " + Model("tok512.bin") + probes;
  auto ok = Shell(base);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(LastLine(ok.out), "preflight: audit=PASS probe=PASS verdict=PASS");
  // The audit disabled: exits 0 and prints nothing. That is not a clean audit.
  auto silent = Shell(base + " --audit-cmd true");
  EXPECT_NE(silent.exit_code, 0);
  EXPECT_NE(silent.out.find("audit printed no summary line"), std::string::npos) << silent.out;
  EXPECT_EQ(LastLine(silent.out), "preflight: audit=FAIL probe=PASS verdict=FAIL");
  // The audit crashing (killed) reads FAIL too.
  auto crash = Shell(base + " --audit-cmd 'kill -SEGV $$'");
  EXPECT_NE(crash.exit_code, 0);
  EXPECT_EQ(LastLine(crash.out), "preflight: audit=FAIL probe=PASS verdict=FAIL");
  // An unreadable index: the audit runs, says FAIL, and so does preflight.
  test::WriteFile(dir + "/model.safetensors.index.json", "garbage");
  auto idx = Shell(base);
  EXPECT_NE(idx.exit_code, 0);
  EXPECT_NE(idx.out.find("audit: tensors=47 shards=0/0 missing=0 fatal=1 verdict=FAIL"), std::string::npos) << idx.out;
}

}  // namespace
}  // namespace verity
