// measure/project_config.h: the repository's own verity.toml reads as the
// ref flow uses it, every field's mistake is an error naming the file, line
// and key, and templates expand exactly.
#include "measure/project_config.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace verity::measure {
namespace {

const char* kMinimal = R"(
[build]
commands = ["make"]
artifact = "run"

[workload.decode]
bench = "{artifact} {model}"
metric = "decode_tok_s"
)";

TEST(ProjectConfig, TheRepositorysOwnConfigReads) {
  auto c = LoadProjectConfig(test::SourceDir() + "/verity.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->artifact, "build/cli/verity");
  ASSERT_EQ(c->build_commands.size(), 2u);
  EXPECT_EQ(c->build_timeout_s, 3600);
  EXPECT_EQ(c->default_workload, "decode");
  auto decode = c->Workload("");
  ASSERT_TRUE(decode.ok());
  EXPECT_EQ((*decode)->metric, "decode_tok_s");
  EXPECT_EQ((*decode)->steps, 256);
  EXPECT_EQ((*decode)->guards, std::vector<std::string>{"prefill_tok_s"});
  auto serve = c->Workload("serve-c8");
  ASSERT_TRUE(serve.ok()) << serve.status().message();
  EXPECT_EQ((*serve)->metric, "serve_tok_s");
  ASSERT_TRUE(c->parity.has_value());
  EXPECT_EQ(c->parity->kind, "verity");
  EXPECT_NE(c->parity->against_command.find("{against}"), std::string::npos);
  auto missing = c->Workload("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no workload 'nope' (known: decode, serve-c8)"), std::string::npos)
      << missing.status().message();
}

TEST(ProjectConfig, AMinimalConfigHasItsOneWorkloadAsDefault) {
  auto c = ParseProjectConfig(kMinimal, "v.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->default_workload, "decode");
  EXPECT_FALSE(c->parity.has_value());
  EXPECT_EQ(c->build_timeout_s, 0);
}

// The external kinds read their own keys (docs/config.md).
TEST(ProjectConfig, TokensAndLogitsKindsRead) {
  auto t = ParseProjectConfig(std::string(kMinimal) +
                                  "[parity]\nkind = \"tokens\"\ncommand = \"{artifact} -t 0\"\n"
                                  "golden = \"greedy.txt\"\n",
                              "v.toml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->parity->kind, "tokens");
  EXPECT_EQ(t->parity->golden, "greedy.txt");
  auto l = ParseProjectConfig(std::string(kMinimal) +
                                  "[parity]\nkind = \"logits\"\n"
                                  "command = \"{verity} x {tokens} {logits_out} {config_dir}\"\n"
                                  "tokens = \"ids.txt\"\nvocab_size = 512\nreference = \"r.f32\"\n",
                              "v.toml");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->parity->vocab_size, 512);
  EXPECT_EQ(l->parity->tokens, "ids.txt");
  EXPECT_EQ(l->parity->reference, "r.f32");
  auto example = LoadProjectConfig(test::SourceDir() + "/docs/examples/llama2.c/verity.toml");
  ASSERT_TRUE(example.ok()) << example.status().message();
  EXPECT_EQ(example->parity->kind, "tokens");
}

// Each mistake names the file, the line where TOML puts it, and the key.
TEST(ProjectConfig, EveryMistakeIsANamedError) {
  const std::string base = kMinimal;
  struct Case {
    std::string text, says;
  };
  const Case cases[] = {
      {"not toml = = 1", "v.toml:1: not valid TOML"},
      {"colour = \"red\"\n" + base,
       "v.toml:1: colour: unknown key (known here: build, default_workload, parity, workload)"},
      {base + "colour = \"red\"\n", "v.toml:9: workload.decode.colour: unknown key"},
      {base + "[parity]\nkind = \"verity\"\ncommand = \"x\"\nextra = 1\n", "parity.extra: unknown key"},
      {"[workload.a]\nbench = \"x\"\nmetric = \"m\"\n", "build: required table, missing"},
      {"[build]\ncommands = []\nartifact = \"a\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\n",
       "build.commands: must hold at least one entry"},
      {"[build]\ncommands = [\"make\", 3]\nartifact = \"a\"\n", "build.commands[1]: expected a non-empty string"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"/abs/run\"\n",
       "build.artifact: must be a path inside the worktree"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"../run\"\n", "build.artifact: must be a path inside the worktree"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\ntimeout_s = \"long\"\n",
       "v.toml:4: build.timeout_s: expected an integer, got a string"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\ntimeout_s = 0\n",
       "build.timeout_s: expected an integer from 1"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n", "workload: required table, missing"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nmetric = \"m\"\n",
       "workload.a.bench: required, missing"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"{artifact} {modle}\"\nmetric = "
       "\"m\"\n",
       "workload.a.bench: workload.a.bench: {modle} is not a variable here"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"{artifact} {against}\"\nmetric = "
       "\"m\"\n",
       "{against} is not a variable here"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"{artifact\"\nmetric = \"m\"\n",
       "a '{' that never closes"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\nsteps = 0\n",
       "workload.a.steps: expected an integer from 1 to 1000000, got 0"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\nmin_seconds = "
       "9000\n",
       "workload.a.min_seconds: expected a number from 0.01 to 600"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\nguards = "
       "[\"m\"]\n",
       "'m' is the workload's metric, not a guard"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\nthreds = 2\n",
       "workload.a.threds: unknown key"},
      {"[build]\ncommands = [\"make\"]\nartifact = \"run\"\n[workload.a]\nbench = \"x\"\nmetric = \"m\"\n"
       "[workload.b]\nbench = \"y\"\nmetric = \"m\"\n",
       "default_workload: required when there is more than one workload"},
      {"default_workload = \"c\"\n" + base, "default_workload: v.toml: no workload 'c' (known: decode)"},
      {base + "[parity]\nkind = \"bytes\"\ncommand = \"x\"\n", "parity.kind: 'bytes' is not a parity evidence kind"},
      // Each kind has its own keys; another kind's is unknown, not ignored.
      {base + "[parity]\nkind = \"tokens\"\ncommand = \"x\"\nagainst_command = \"{against}\"\n",
       "parity.against_command: unknown key (known here: command, golden, kind)"},
      {base + "[parity]\nkind = \"verity\"\ncommand = \"x\"\ngolden = \"g.txt\"\n", "parity.golden: unknown key"},
      {base + "[parity]\nkind = \"tokens\"\ncommand = \"x\"\ngolden = 3\n",
       "parity.golden: expected a string, got an integer"},
      {base + "[parity]\nkind = \"tokens\"\ncommand = \"{artifact} {logits_out}\"\n",
       "{logits_out} is not a variable here"},
      {base + "[parity]\nkind = \"tokens\"\n", "parity.command: required, missing"},
      {base + "[parity]\nkind = \"logits\"\ncommand = \"{artifact} {tokens}\"\ntokens = \"ids\"\nvocab_size = 512\n",
       "parity.command: must use {logits_out}"},
      {base + "[parity]\nkind = \"logits\"\ncommand = \"{artifact} {logits_out}\"\nvocab_size = 512\n",
       "parity.tokens: required, missing"},
      {base + "[parity]\nkind = \"logits\"\ncommand = \"{artifact} {logits_out}\"\ntokens = \"ids\"\n",
       "parity.vocab_size: required, missing"},
      {base + "[parity]\nkind = \"logits\"\ncommand = \"{artifact} {logits_out}\"\ntokens = \"ids\"\nvocab_size = 0\n",
       "parity.vocab_size: expected an integer from 1 to 10000000, got 0"},
      {base + "[parity]\nkind = \"logits\"\ncommand = \"{artifact} {logits_out}\"\ntokens = \"ids\"\nvocab_size = "
              "9\ngolden = \"g\"\n",
       "parity.golden: unknown key (known here: command, kind, reference, tokens, vocab_size)"},
      {base + "[parity]\nkind = \"verity\"\ncommand = \"x\"\nagainst_command = \"y\"\n",
       "parity.against_command: must use {against}"},
  };
  for (const Case& c : cases) {
    auto r = ParseProjectConfig(c.text, "v.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.text << "\n-> " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("v.toml", 0), 0u) << r.status().message();
  }
}

TEST(ProjectConfig, TemplatesExpandExactly) {
  const std::map<std::string, std::string> vars = {{"artifact", "'/w/run'"}, {"model", "'m.bin'"}};
  auto e = ExpandTemplate("{artifact} -m {model} --json '{{\"a\": 1}}'", vars, "t");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(*e, "'/w/run' -m 'm.bin' --json '{\"a\": 1}'");
  auto bad = ExpandTemplate("x }", vars, "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t: a '}' without its '{'"), std::string::npos);
  auto unknown = ExpandTemplate("{steps}", vars, "t");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("{steps} is not a variable here (known: {artifact}, {model})"),
            std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace verity::measure
