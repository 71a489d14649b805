// Parity evidence for engines that are not verity (parity kinds "tokens" and
// "logits", docs/config.md): the comparisons (verify/external_parity.h), the
// producers `verity parity-tokens` and `parity-logits` end to end on shell
// commands standing in for an engine, and the ledger's judgement of their
// records against each kind's floor in policy v5 (and none before it).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "base/sha256.h"
#include "ledger/evidence.h"
#include "ledger/policy.h"
#include "measure/measure.h"
#include "tests/ledger_test_util.h"
#include "tests/test_util.h"
#include "verify/external_parity.h"

namespace verity {
namespace {

using test::Shell;
using test::VerityBin;

TEST(ExternalParity, IdenticalOutputsHaveNoDifference) {
  const OutputIdentity r = CompareOutputs("Once upon a time", "Once upon a time");
  EXPECT_TRUE(r.identical);
  EXPECT_EQ(r.first_diff, -1);
  EXPECT_EQ(r.head_bytes, 16u);
}

TEST(ExternalParity, TheFirstDifferingByteAndBothSnippetsAreNamed) {
  const OutputIdentity r = CompareOutputs("Lily was happy.\nShe smiled", "Lily was happy.<0x0A>She smiled");
  EXPECT_FALSE(r.identical);
  EXPECT_EQ(r.first_diff, 15);
  EXPECT_NE(r.head_snippet.find("happy.\\x0aShe"), std::string::npos) << r.head_snippet;
  EXPECT_NE(r.base_snippet.find("happy.<0x0A>She"), std::string::npos) << r.base_snippet;
  // An output that stops early differs where it stops.
  const OutputIdentity cut = CompareOutputs("Once upon", "Once upon a time");
  EXPECT_FALSE(cut.identical);
  EXPECT_EQ(cut.first_diff, 9);
}

std::string Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  test::WriteFile(dir + "/" + name, bytes);
  return dir + "/" + name;
}

std::string Q(const std::string& s) { return measure::ShellQuote(s); }

TEST(ExternalParity, ParityTokensPassesEqualOutputAndRefusesADifferingByte) {
  const std::string dir = test::TempDir("parity-tokens");
  const std::string engine = Write(dir, "engine", "#!/bin/sh\nexit 0\n");
  const std::string golden = Write(dir, "golden.txt", "The cat sat on the mat.\n");
  const std::string base = VerityBin() + " parity-tokens --artifact " + Q(engine) + " --build-id abc ";
  auto same = Shell(base + "--command " + Q("printf 'The cat sat on the mat.\\n'") + " --golden " + Q(golden));
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.err.find("24 bytes against " + golden + ": identical verdict=PASS"), std::string::npos) << same.err;
  auto differ = Shell(base + "--command " + Q("printf 'The cat sat on the hat.\\n'") + " --base-command " +
                      Q("cat " + Q(golden)));
  EXPECT_EQ(differ.exit_code, 1);
  EXPECT_NE(
      differ.err.find("first differing byte at offset 19 (head ' sat on the hat.\\x0a', base ' sat on the mat.\\x0a')"),
      std::string::npos)
      << differ.err;
  measure::CommandOutput out{differ.exit_code, false, differ.out, differ.err, 0.0};
  auto ev = measure::ParseParity(out, "head parity command");
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_EQ(ev->kind, "tokens");
  EXPECT_EQ(ev->identity.first_diff, 19);
  EXPECT_EQ(ev->artifact_sha256.size(), 64u) << "the evidence names the artifact it covers";
  // Usage mistakes are named, and a failing engine is no evidence.
  auto both = Shell(base + "--command true --golden " + Q(golden) + " --base-command true");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("give exactly one of --base-command and --golden"), std::string::npos) << both.err;
  auto crash = Shell(base + "--command 'exit 3' --golden " + Q(golden));
  EXPECT_EQ(crash.exit_code, 1);
  EXPECT_NE(crash.err.find("the head's command exited 3"), std::string::npos) << crash.err;
  EXPECT_TRUE(crash.out.empty());
}

measure::ParityEvidence Identity(long long bytes, bool identical, long long first_diff) {
  measure::ParityEvidence e;
  e.kind = "tokens";
  e.mode = "standard";
  e.ok = identical;
  e.exit_code = identical ? 0 : 1;
  e.identity.against = "golden";
  e.identity.head_bytes = e.identity.base_bytes = bytes;
  e.identity.identical = identical;
  e.identity.first_diff = first_diff;
  e.identity.head_snippet = "hat";
  e.identity.base_snippet = "mat";
  return e;
}

TEST(ExternalParity, TheLedgerJudgesTokenIdentityAgainstItsFloor) {
  const ledger::Policy v5 = ledger::PolicyV5();
  ASSERT_EQ(v5.ParityFloorFor("tokens")->min_bytes, 256);
  EXPECT_EQ(ledger::JudgeParity(v5, Identity(465, true, -1), "standard"), "");
  const std::string short_out = ledger::JudgeParity(v5, Identity(100, true, -1), "standard");
  EXPECT_NE(short_out.find("thin evidence: 100 bytes compared equal, the policy needs at least 256"), std::string::npos)
      << short_out;
  const std::string differ = ledger::JudgeParity(v5, Identity(465, false, 300), "standard");
  EXPECT_NE(differ.find("differs from the golden's at byte offset 300 (head 'hat', golden 'mat')"), std::string::npos)
      << differ;
  const std::string deep = ledger::JudgeParity(v5, Identity(465, true, -1), "deep");
  EXPECT_NE(deep.find("deep evidence compares 465 bytes, needs 2x the floor of 256"), std::string::npos) << deep;
  // Before v5 no floor was stated for the kind: no such evidence counts.
  const std::string v4 = ledger::JudgeParity(ledger::PolicyV4(), Identity(465, true, -1), "standard");
  EXPECT_NE(v4.find("policy v4 states no floor for parity evidence of kind 'tokens'"), std::string::npos) << v4;
}

// T rows of V floats, a clear argmax per row (so top-1 is decided), placed by the seed.
std::vector<float> Logits(int T, int V, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(T) * V);
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < V; i++) v[static_cast<size_t>(t) * V + i] = u(rng);
    v[static_cast<size_t>(t) * V + (t * 7 + seed) % V] = 8.0f;
  }
  return v;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

struct LogitsCase {
  std::string dir, tokens, ref, engine;
  static constexpr int kT = 64, kV = 16;
  LogitsCase() : dir(test::TempDir("parity-logits")) {
    std::string ids;
    for (int i = 0; i < kT; i++) ids += std::to_string(i % kV) + " ";
    tokens = Write(dir, "ids.txt", ids);
    ref = Write(dir, "ref.f32", Bytes(Logits(kT, kV, 1)));
    engine = Write(dir, "engine", "#!/bin/sh\n");
  }
  // `verity parity-logits` with an engine that writes `bytes` to {logits_out}.
  test::CommandResult Run(const std::string& bytes) const {
    const std::string out = Write(dir, "engine-out.f32", bytes);
    return Shell(VerityBin() + " parity-logits --artifact " + Q(engine) + " --build-id abc --tokens " + Q(tokens) +
                 " --vocab " + std::to_string(kV) + " --reference " + Q(ref) + " --command " +
                 Q("cp " + Q(out) + " \"$VERITY_LOGITS_OUT\""));
  }
};

TEST(ExternalParity, ParityLogitsScoresDepthsAsVerityParityDoes) {
  LogitsCase c;
  auto same = c.Run(Bytes(Logits(LogitsCase::kT, LogitsCase::kV, 1)));
  ASSERT_EQ(same.exit_code, 0) << same.err;
  measure::CommandOutput out{0, false, same.out, same.err, 0.0};
  auto ev = measure::ParseParity(out, "head parity command");
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_EQ(ev->kind, "logits");
  EXPECT_GE(ev->depths.size(), 7u);
  EXPECT_EQ(ev->worst_top1, 1.0);
  EXPECT_EQ(ledger::JudgeParity(ledger::PolicyV5(), *ev, "standard"), "");
  // Other logits: top-1 breaks at every depth, and the record says FAIL.
  auto other = c.Run(Bytes(Logits(LogitsCase::kT, LogitsCase::kV, 2)));
  EXPECT_EQ(other.exit_code, 1) << other.err;
  EXPECT_NE(other.err.find("verdict=FAIL"), std::string::npos) << other.err;
}

TEST(ExternalParity, ALogitsFileOfTheWrongSizeIsANamedError) {
  LogitsCase c;
  std::string rows = Bytes(Logits(LogitsCase::kT, LogitsCase::kV, 1));
  auto cut = c.Run(rows.substr(0, rows.size() - 4));
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("candidate logits file"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("4092 bytes, expected 64 rows x vocab_size 16 x 4 = 4096 bytes (truncated)"),
            std::string::npos)
      << cut.err;
  EXPECT_TRUE(cut.out.empty()) << "no evidence is printed for a file that cannot be read";
  auto wide = c.Run(Bytes(Logits(LogitsCase::kT, 32, 1)));
  EXPECT_EQ(wide.exit_code, 1);
  EXPECT_NE(wide.err.find("a vocab mismatch: it divides into 64 rows of 32 floats, not vocab_size 16"),
            std::string::npos)
      << wide.err;
}

// Through `verity submit`: token-identity evidence that is identical but
// shorter than the floor is refused on parity; identical and long enough, it
// passes the gate and binds to the bench only when the bench ran the same
// artifact (fake_bench states the sha it is given).
TEST(ExternalParity, SubmitJudgesTokenIdentityByTheFloorAndTheArtifact) {
  const test::Case c = test::Fresh("parity-tokens-submit");
  const std::string engine = Write(c.dir, "engine", "#!/bin/sh\n");
  const std::string sha = Sha256File(engine).value();
  const std::string short_text = Write(c.dir, "short.txt", "Once upon a time.\n");
  const std::string long_text = Write(c.dir, "long.txt", std::string(300, 'a') + "\n");
  const std::string tokens = VerityBin() + " parity-tokens --artifact " + Q(engine) + " --build-id fake-build ";
  auto gate = [&](const std::string& text) {
    return tokens + "--command " + Q("cat " + Q(text)) + " --golden " + Q(text);
  };
  auto thin = test::Submit(c.db, "short greedy text", 0, test::Bench(c.dir, "b", 1000, 0.001, 1),
                           test::Bench(c.dir, "h", 1000, 0.001, 2), gate(short_text));
  EXPECT_EQ(thin.j["verdict"], "rejected-parity") << thin.cmd.out << thin.cmd.err;
  EXPECT_NE(thin.cmd.out.find("thin evidence: 18 bytes compared equal, the policy needs at least 256"),
            std::string::npos)
      << thin.cmd.out;
  auto other = test::Submit(c.db, "another artifact benched", 0, test::Bench(c.dir, "b2", 1000, 0.001, 3),
                            test::Bench(c.dir, "h2", 1000, 0.001, 4), gate(long_text));
  EXPECT_EQ(other.j["verdict"], "rejected-parity") << other.cmd.out;
  EXPECT_NE(other.cmd.out.find("the evidence does not cover what was benchmarked"), std::string::npos) << other.cmd.out;
  auto bound = test::Submit(c.db, "the artifact benched", 0, test::Bench(c.dir, "b3", 1000, 0.001, 5, "--sha " + sha),
                            test::Bench(c.dir, "h3", 1000, 0.001, 6, "--sha " + sha), gate(long_text));
  EXPECT_EQ(bound.cmd.err.find("unverified"), std::string::npos) << bound.cmd.err;
  EXPECT_NE(
      bound.cmd.err.find("token identity: 301 bytes against the golden's 301, identical (standard), exit 0: pass"),
      std::string::npos)
      << bound.cmd.err;
  EXPECT_EQ(bound.j["verdict"], "none") << bound.cmd.out << "\n" << bound.cmd.err;
}

// The ref flow with parity kind "logits": a tiny git repository whose
// "engine" (a shell script) writes prepared logits to {logits_out}, judged by
// a config outside it. The same logits on both sides pass (and the run is
// measured); another engine's logits fail top-1 and the change is rejected.
TEST(ExternalParity, TheRefFlowRunsTheLogitsKindFromAConfig) {
  LogitsCase lc;
  const std::string dir = lc.dir, repo = dir + "/engine-repo";
  const std::string other = Write(dir, "other.f32", Bytes(Logits(LogitsCase::kT, LogitsCase::kV, 2)));
  auto engine = [&](const std::string& logits) {
    return "#!/bin/sh\n# bench: a fixed speed; else: copy the logits to $2\n"
           "[ \"$1\" = bench ] && { echo 'achieved tok/s: 1000' >&2; exit 0; }\ncp " +
           Q(logits) + " \"$2\"\n";
  };
  auto commit = [&](const std::string& script, const std::string& msg) {
    Write(repo, "run.sh", script);
    auto r = Shell("cd " + Q(repo) + " && git add run.sh && git -c user.name=t -c user.email=t@t commit -qm " + Q(msg) +
                   " && git rev-parse HEAD");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, 40);
  };
  ASSERT_EQ(Shell("git init -q " + Q(repo)).exit_code, 0);
  const std::string c1 = commit(engine(lc.ref), "first"), c2 = commit(engine(lc.ref) + "# a comment\n", "same logits");
  const std::string c3 = commit(engine(other), "other logits");
  const std::string config = Write(dir, "verity.toml", R"([build]
commands = ["cp run.sh run && chmod +x run"]
artifact = "run"
[workload.w]
bench = "{verity} adapt --from stderr --metric 'decode_tok_s=achieved tok/s: ([0-9.]+)' --artifact {artifact} --build-id \"$(git -C {worktree} rev-parse HEAD)\" --workload w -- {artifact} bench"
metric = "decode_tok_s"
[parity]
kind = "logits"
command = "{artifact} {tokens} {logits_out}"
tokens = "ids.txt"
vocab_size = 16
)");
  auto submit = [&](const std::string& base, const std::string& head) {
    return Shell("VERITY_WORKTREES=" + dir + "/wt VERITY_LOCK_DIR=" + dir + " " + VerityBin() + " submit --ledger " +
                 dir + "/l.db --title t --predict 0 --config " + Q(config) + " --repo " + Q(repo) + " --base " + base +
                 " --head " + head);
  };
  auto same = submit(c1, c2);
  EXPECT_NE(
      same.err.find("logits file: worst top-1 1, worst mean KL 0 over 7 depths (standard, window 8), exit 0: pass"),
      std::string::npos)
      << same.err;
  EXPECT_NE(same.out.find("verdict=none"), std::string::npos) << same.out << same.err;
  auto moved = submit(c2, c3);
  EXPECT_NE(moved.out.find("verdict=rejected-parity"), std::string::npos) << moved.out << moved.err;
  EXPECT_NE(moved.out.find("worst top-1 0 / mean KL"), std::string::npos) << moved.out;
}

}  // namespace
}  // namespace verity
