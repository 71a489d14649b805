// The git-ref flow on a temporary repository: each ref is built once into a
// cached worktree and benchmarked with its own binary; the recorded build ids
// are the commits; a binary reporting another commit (stale) is refused.
#include <gtest/gtest.h>

#include "base/strings.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

TEST(RefSubmit, BuildsEachRefAndVerifiesTheArtifact) {
  const std::string dir = TempDir("refs");
  const std::string repo = dir + "/repo", cache = dir + "/worktrees", db = dir + "/l.db";
  // A repository holding this project's committed tree, plus one docs-only commit.
  auto clone =
      Shell("git clone -q " + SourceDir() + " " + repo + " && cd " + repo +
            " && git config user.email t@example.com && git config user.name t && echo '# ref test' >> README.md"
            " && git commit -qam 'docs only'");
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  const std::string base_sha = TrimRight(Shell("git -C " + repo + " rev-parse HEAD~1").out);
  const std::string head_sha = TrimRight(Shell("git -C " + repo + " rev-parse HEAD").out);
  const std::string submit = "cd " + repo + " && VERITY_WORKTREES=" + cache + " " + VerityBin() +
                             " submit --json --ledger " + db +
                             " --title 'docs only' --predict 0 --base HEAD~1 --head HEAD"
                             " --model models/stories260K.bin --steps 64 --min-seconds 0.2";
  auto r = Shell(submit);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["verdict"], "failed");
  EXPECT_NE(j["verdict"], "unverified") << "the head's own verity parity is the gate";
  auto show = JsonOf(VerityBin() + " show --json --ledger " + db + " " + std::to_string(j["change"].get<int>()));
  EXPECT_EQ(show["change"]["base_sha"], base_sha);
  EXPECT_EQ(show["change"]["head_sha"], head_sha);
  EXPECT_EQ(show["change"]["base_ref"], "HEAD~1");
  // Each side's own bench, with the sample length asked for.
  for (const char* side : {"base_cmd", "head_cmd"}) {
    const std::string cmd = show["change"][side];
    EXPECT_NE(cmd.find(" bench --model "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --steps 64 --backend fast --dtype 'f32' --min-seconds 0.2"), std::string::npos) << cmd;
  }
  // The model has independent reference logits pinned beside it: the head's
  // parity is against them, not against its own reference path.
  const std::string parity = show["change"]["parity_cmd"];
  EXPECT_NE(parity.find("--against"), std::string::npos) << parity;
  EXPECT_NE(parity.find("models/stories260K.ref-logits.bin"), std::string::npos) << parity;
  ASSERT_EQ(show["runs"][0]["artifacts"].size(), 2u);
  for (const auto& a : show["runs"][0]["artifacts"])
    EXPECT_EQ(a["build_id"], a["side"] == "base" ? base_sha : head_sha) << "verify the artifact, not the transport";

  // A stale artifact: the head's cached binary replaced by the base's (newer
  // than its objects, so the incremental build keeps it). It reports the base commit.
  ASSERT_EQ(Shell("cp " + cache + "/" + base_sha + "/build/cli/verity " + cache + "/" + head_sha + "/build/cli/verity")
                .exit_code,
            0);
  auto stale = Shell(submit);
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_NE(stale.err.find("stale build"), std::string::npos) << stale.err;
  EXPECT_NE(stale.err.find(head_sha), std::string::npos);
}

// The ref flow's bench options build its commands; with commands given
// instead they would be ignored, so they are refused by name.
TEST(RefSubmit, RefOnlyOptionsWithCommandsAreNamedErrors) {
  const std::string db = TempDir("ref-only") + "/l.db";
  for (const std::string extra :
       {"--min-seconds 2", "--dtype f32", "--model models/stories260K.bin", "--steps 64", "--repo .",
        "--against models/stories260K.ref-logits.bin", "--config verity.toml", "--workload decode"}) {
    auto r = Shell(VerityBin() + " submit --ledger " + db +
                   " --title t --predict 0 --base-cmd true --head-cmd true"
                   " --parity-cmd true " +
                   extra);
    EXPECT_EQ(r.exit_code, 1) << extra;
    const std::string flag = extra.substr(0, extra.find(' '));
    EXPECT_NE(r.err.find(flag + " goes with --base/--head refs"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace verity::test
