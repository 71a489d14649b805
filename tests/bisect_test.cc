// `verity bisect` on temporary git repositories of a tiny fake project: a
// CMake project (no compiler: it configures a bash script into
// build/cli/verity) whose `verity bench` prints a verity.bench/1 record with
// build id = its commit and decode_tok_s = the commit's `speed` file with
// +-0.5% noise, and whose `verity parity --json` passes or fails as the
// commit's `parity` file says. Each commit builds in well under a second.
#include <gtest/gtest.h>

#include <map>

#include "base/strings.h"
#include "ledger/ledger.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

const char* kTopCMake = "cmake_minimum_required(VERSION 3.16)\nproject(fake NONE)\nadd_subdirectory(cli)\n";

const char* kCliCMake = R"(file(READ ${CMAKE_SOURCE_DIR}/speed SPEED)
string(STRIP "${SPEED}" SPEED)
file(READ ${CMAKE_SOURCE_DIR}/parity PARITY)
string(STRIP "${PARITY}" PARITY)
execute_process(COMMAND git rev-parse HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE SHA OUTPUT_STRIP_TRAILING_WHITESPACE)
configure_file(verity.in ${CMAKE_CURRENT_BINARY_DIR}/verity @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
add_custom_target(verity)
)";

const char* kBrokenCliCMake = "message(FATAL_ERROR \"deliberately broken commit\")\n";

// The fake binary: speaks the bench and parity protocols for its commit.
const char* kVerityIn = R"SH(#!/bin/bash
SHA=@SHA@
SPEED=@SPEED@
PARITY=@PARITY@
ART=$(sha256sum "$0" | cut -c1-64)
case "$1" in
  bench)
    V=$(awk -v s="$SPEED" -v r="$RANDOM" 'BEGIN { printf "%.3f", s * (1 + (r % 1001 - 500) / 100000) }')
    DT=f32; PREV=""
    for a in "$@"; do [ "$PREV" = --dtype ] && DT=$a; PREV=$a; done
    printf '{"schema":"verity.bench/1","build":{"id":"%s","artifact_sha256":"%s"},"workload":"fake %s","metrics":{"decode_tok_s":%s},"ok":true}\n' "$SHA" "$ART" "$DT" "$V"
    ;;
  parity)
    if [ "$2" = --help ]; then echo "parity: fast vs reference"; exit 0; fi
    echo "$@" >> "$(dirname "$0")/parity-args"
    if [ "$PARITY" = ok ]; then T=1; KL=0; OK=true; CODE=0; else T=0.2; KL=3.5; OK=false; CODE=1; fi
    D=""
    for i in 1 2 3 4 5 6 7; do D="$D${D:+,}{\"depth\":$((i * 64)),\"positions\":8,\"top1\":$T,\"mean_kl\":$KL,\"max_kl\":$KL}"; done
    printf '{"schema":"verity.parity/1","mode":"standard","tokens":448,"window":8,"depths":[%s],"worst":{"top1":%s,"mean_kl":%s},"logits_sha256":"%064d","nonfinite":[],"build":{"id":"%s","artifact_sha256":"%s"},"ok":%s}\n' "$D" "$T" "$KL" 0 "$SHA" "$ART" "$OK"
    exit $CODE
    ;;
  *) echo "fake verity: unknown command $1" >&2; exit 2 ;;
esac
)SH";

// The fake repository's project config: verity's own decode workload and
// parity, without its guard (the fake bench prints one metric).
const char* kVerityToml = R"(
[build]
commands = ["cmake -S . -B build", "cmake --build build --target verity"]
artifact = "build/cli/verity"

[workload.decode]
bench = "{artifact} bench --model {model} --steps {steps} --backend fast --dtype {dtype} --min-seconds {min_seconds}"
metric = "decode_tok_s"
steps = 256
dtype = "f32"
min_seconds = 0.5

[parity]
kind = "verity"
command = "{artifact} parity --model {model} --backend fast --json --dtype {dtype}"
against_command = "{artifact} parity --model {model} --backend fast --json --dtype {dtype} --against {against}"
)";

// What commit i (1..n) changes; commit 0 is the good one (speed 1000, parity ok, builds).
struct Edit {
  std::string speed, parity;
  bool broken = false, fixed = false;
};

struct Repo {
  std::string dir, repo, cache, db, model;
  std::vector<std::string> shas;  // [0] = good, [i] = commit i
};

Repo MakeRepo(const std::string& tag, int n, const std::map<int, Edit>& edits) {
  Repo r;
  r.dir = TempDir(tag);
  r.repo = r.dir + "/repo";
  r.cache = r.dir + "/worktrees";
  r.db = FreshLedger(r.dir);
  r.model = r.dir + "/model.bin";
  WriteFile(r.model, "fake model");
  EXPECT_EQ(Shell("mkdir -p " + r.repo + "/cli && git -C " + r.repo + " init -q && git -C " + r.repo +
                  " config user.email t@example.com && git -C " + r.repo + " config user.name t")
                .exit_code,
            0);
  WriteFile(r.repo + "/CMakeLists.txt", kTopCMake);
  WriteFile(r.repo + "/cli/CMakeLists.txt", kCliCMake);
  WriteFile(r.repo + "/cli/verity.in", kVerityIn);
  WriteFile(r.repo + "/verity.toml", kVerityToml);
  WriteFile(r.repo + "/speed", "1000\n");
  WriteFile(r.repo + "/parity", "ok\n");
  auto commit = [&](const std::string& subject) {
    auto c = Shell("cd " + r.repo + " && git add -A && git commit -qm " + Quote(subject) + " && git rev-parse HEAD");
    EXPECT_EQ(c.exit_code, 0) << c.err;
    r.shas.push_back(TrimRight(c.out));
  };
  commit("good start");
  for (int i = 1; i <= n; i++) {
    WriteFile(r.repo + "/notes", "commit " + std::to_string(i) + "\n");
    std::string subject = "commit " + std::to_string(i);
    auto it = edits.find(i);
    if (it != edits.end()) {
      const Edit& e = it->second;
      if (!e.speed.empty()) WriteFile(r.repo + "/speed", e.speed + "\n"), subject += " speed " + e.speed;
      if (!e.parity.empty()) WriteFile(r.repo + "/parity", e.parity + "\n"), subject += " parity " + e.parity;
      if (e.broken) WriteFile(r.repo + "/cli/CMakeLists.txt", kBrokenCliCMake), subject += " breaks the build";
      if (e.fixed) WriteFile(r.repo + "/cli/CMakeLists.txt", kCliCMake), subject += " fixes the build";
    }
    commit(subject);
  }
  return r;
}

CommandResult RunBisect(const Repo& r, const std::string& extra = "") {
  return Shell("VERITY_WORKTREES=" + r.cache + " VERITY_LOCK_DIR=" + r.dir + " " + VerityBin() + " bisect --ledger " +
               r.db + " --repo " + r.repo + " --good " + r.shas.front() + " --bad " + r.shas.back() + " --model " +
               r.model + " --steps 16 " + extra);
}

// Counts rows of a ledger table.
int64_t Count(const std::string& db, const std::string& sql) {
  auto l = ledger::Ledger::Open(db);
  EXPECT_TRUE(l.ok());
  if (!l.ok()) return -1;
  auto rows = (*l)->db().Query(sql);
  EXPECT_TRUE(rows.ok()) << rows.status().message();
  return rows.ok() ? ledger::AsInt((*rows)[0][0]) : -1;
}

// The ledger holds the session and its steps, every search step with its run,
// none of it in `runs` or the frontier, and the seal chain verifies.
void ExpectRecorded(const Repo& r, const nlohmann::json& result) {
  auto h = JsonOf(VerityBin() + " history bisect --json --ledger " + r.db);
  ASSERT_EQ(h["bisect_sessions"].size(), 1u);
  const auto& s = h["bisect_sessions"][0];
  EXPECT_EQ(s["kind"], result["kind"]);
  EXPECT_EQ(s["culprit"], result["culprit"]);
  EXPECT_EQ(s["steps"].size(), result["steps"].size());
  for (const auto& st : s["steps"]) EXPECT_GT(st["run"].get<int>(), 0) << st.dump();
  EXPECT_EQ(Count(r.db, "SELECT count(*) FROM bisect_steps"), static_cast<int64_t>(result["steps"].size()));
  EXPECT_EQ(Count(r.db, "SELECT count(*) FROM bisect_runs WHERE purpose = 'bisect'"),
            static_cast<int64_t>(result["steps"].size()));
  EXPECT_EQ(Count(r.db, "SELECT count(*) FROM runs"), 0) << "a bisect measurement is not a submission";
  EXPECT_EQ(Count(r.db, "SELECT count(*) FROM frontier_events"), 0) << "a bisect run never moves or seeds a frontier";
  auto v = Shell(VerityBin() + " ledger verify --ledger " + r.db);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("verdict=PASS"), std::string::npos) << v.out;
  auto text = Shell(VerityBin() + " history bisect --ledger " + r.db);
  EXPECT_NE(text.out.find("bisect sessions (1):"), std::string::npos) << text.out;
}

TEST(Bisect, NamesTheSlowCommitAmongEight) {
  Repo r = MakeRepo("bisect-speed", 8, {{5, {"900", "", false, false}}});
  auto res = RunBisect(r, "--json");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  auto j = nlohmann::json::parse(res.out);
  EXPECT_EQ(j["kind"], "speed");
  EXPECT_EQ(j["culprit"], r.shas[5]) << res.err;
  EXPECT_EQ(j["skipped"], 0);
  EXPECT_EQ(j["search_steps"], 3) << "8 commits take 3 steps";
  // The culprit's evidence: about -10% with bounds below the -2% threshold.
  bool found = false;
  for (const auto& s : j["steps"]) {
    if (s["commit"] != r.shas[5]) continue;
    found = true;
    EXPECT_EQ(s["verdict"], "bad");
    EXPECT_EQ(s["decided_by"], "bounds");
    EXPECT_NEAR(s["ratio"].get<double>(), 0.9, 0.01);
    EXPECT_LT(s["ci"][1].get<double>(), 0.98);
  }
  EXPECT_TRUE(found);
  EXPECT_NE(j["summary"].get<std::string>().find("bisect: first bad commit " + r.shas[5] + " commit 5 speed 900: -"),
            std::string::npos)
      << j["summary"];
  EXPECT_NE(j["summary"].get<std::string>().find("3 steps, 0 skipped"), std::string::npos) << j["summary"];
  EXPECT_NE(res.err.find("bisect step 3 (speed)"), std::string::npos) << "each step is said as it happens:\n"
                                                                      << res.err;
  ExpectRecorded(r, j);
  // Every commit was built once, into its own cached worktree.
  EXPECT_EQ(Shell("test -x " + r.cache + "/" + r.shas[5] + "/build/cli/verity").exit_code, 0);
}

// --dtype reaches every commit's bench and parity: the fake bench names the
// dtype it was asked for in its workload, the fake parity logs its arguments.
TEST(Bisect, RunsEveryCommitInTheAskedDtype) {
  Repo r = MakeRepo("bisect-dtype", 4, {{2, {"900", "", false, false}}});
  auto res = RunBisect(r, "--json --dtype q8_0");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  auto j = nlohmann::json::parse(res.out);
  EXPECT_EQ(j["culprit"], r.shas[2]) << res.err;
  EXPECT_EQ(j["workload"], "fake q8_0") << j.dump();
  const std::string args = ReadFile(r.cache + "/" + r.shas[2] + "/build/cli/parity-args");
  EXPECT_NE(args.find("--dtype q8_0"), std::string::npos) << args;
  auto bad = RunBisect(r, "--dtype fp8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("fp8"), std::string::npos) << bad.err;
}

TEST(Bisect, NamesTheCommitThatBreaksParity) {
  Repo r = MakeRepo("bisect-parity", 8, {{3, {"", "fail", false, false}}});
  auto res = RunBisect(r, "--json");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  auto j = nlohmann::json::parse(res.out);
  EXPECT_EQ(j["kind"], "correctness") << "a parity failure is a correctness culprit, not a speed one";
  EXPECT_EQ(j["culprit"], r.shas[3]);
  for (const auto& s : j["steps"]) {
    if (s["verdict"] == "parity-fail") {
      EXPECT_TRUE(s["ratio"].is_null()) << "its speed is never measured";
    }
  }
  EXPECT_NE(j["summary"].get<std::string>().find("first commit failing parity " + r.shas[3]), std::string::npos)
      << j["summary"];
  EXPECT_NE(j["summary"].get<std::string>().find("a correctness break, not a speed one"), std::string::npos);
  ExpectRecorded(r, j);

  // A parity break met during a speed search (broken at 4, fixed at 5; slow at 7)
  // stops it: the first commit failing parity is named, as a correctness break.
  Repo m = MakeRepo("bisect-parity-mid", 8,
                    {{4, {"", "fail", false, false}}, {5, {"", "ok", false, false}}, {7, {"900", "", false, false}}});
  auto mres = RunBisect(m, "--json");
  ASSERT_EQ(mres.exit_code, 0) << mres.err;
  auto mj = nlohmann::json::parse(mres.out);
  EXPECT_EQ(mj["kind"], "correctness");
  EXPECT_EQ(mj["culprit"], m.shas[4]) << mres.err;
  EXPECT_NE(mj["summary"].get<std::string>().find("found while searching for a decode_tok_s regression"),
            std::string::npos)
      << mj["summary"];
}

TEST(Bisect, SkipsAnUnbuildableCommitAndSaysSo) {
  // Broken at 4 (fixed at 5), slow at 6: the answer is still exact.
  Repo r = MakeRepo("bisect-skip", 8,
                    {{4, {"", "", true, false}}, {5, {"", "", false, true}}, {6, {"900", "", false, false}}});
  auto res = RunBisect(r);
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_NE(res.out.find("bisect: first bad commit " + r.shas[6]), std::string::npos) << res.out << res.err;
  EXPECT_NE(res.out.find(", 1 skipped"), std::string::npos) << res.out;
  EXPECT_NE(res.err.find(r.shas[4].substr(0, 12) + " commit 4 breaks the build: untestable"), std::string::npos)
      << res.err;
  EXPECT_NE(res.err.find("skipped: building"), std::string::npos) << res.err;

  // Broken and slow at 4 (fixed at 5): the culprit is 4 or 5, and the answer says so.
  Repo a = MakeRepo("bisect-ambiguous", 8, {{4, {"900", "", true, false}}, {5, {"", "", false, true}}});
  auto ares = RunBisect(a, "--json");
  ASSERT_EQ(ares.exit_code, 0) << ares.err;
  auto aj = nlohmann::json::parse(ares.out);
  EXPECT_TRUE(aj["culprit"].is_null());
  EXPECT_EQ(aj["candidates"], nlohmann::json({a.shas[4], a.shas[5]}));
  EXPECT_NE(aj["summary"].get<std::string>().find("is one of 2: " + a.shas[4].substr(0, 12) + " (untestable), " +
                                                  a.shas[5].substr(0, 12)),
            std::string::npos)
      << aj["summary"];
}

TEST(Bisect, RefusesABadEndThatIsNotSlower) {
  Repo r = MakeRepo("bisect-none", 2, {});
  auto res = RunBisect(r);
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_NE(res.err.find("nothing to bisect: --bad " + r.shas.back() + " (" + r.shas.back().substr(0, 12) +
                         ") is not measurably slower than --good"),
            std::string::npos)
      << res.err;
  EXPECT_NE(res.err.find("by more than 2%"), std::string::npos) << res.err;
  auto h = JsonOf(VerityBin() + " history bisect --json --ledger " + r.db);
  ASSERT_EQ(h["bisect_sessions"].size(), 1u);
  EXPECT_EQ(h["bisect_sessions"][0]["kind"], "nothing");
  EXPECT_EQ(h["bisect_sessions"][0]["steps"].size(), 2u) << "both endpoint checks are recorded";

  // A good end must be an ancestor on the bad end's first-parent line.
  auto back = Shell("VERITY_WORKTREES=" + r.cache + " " + VerityBin() + " bisect --ledger " + r.db + " --repo " +
                    r.repo + " --good " + r.shas.back() + " --bad " + r.shas.front() + " --model " + r.model);
  EXPECT_EQ(back.exit_code, 1);
  EXPECT_NE(back.err.find("is not an ancestor of --bad"), std::string::npos) << back.err;
}

}  // namespace
}  // namespace verity::test
