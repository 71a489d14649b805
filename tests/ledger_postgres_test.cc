// The PostgreSQL store on a real server (the pg fixture's throwaway cluster):
// a copy of the project's ledger there and back keeps its tip, tampering and
// dropped triggers are named by verify, a submitter role cannot rewrite
// history, and a dropped connection or a server restart mid-submission loses
// nothing. Registered only as pg.* (VERITY_TEST_PG_STATE set).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ledger/ledger.h"
#include "tests/ledger_bench_util.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {
using ledger::Ledger;

std::string DbUrl(const std::string& server, const std::string& name) {
  return server.substr(0, server.rfind('/') + 1) + name;
}
std::string WithUser(const std::string& url, const std::string& user) {
  return "postgresql://" + user + url.substr(url.find('@'));
}
std::string NameOf(const std::string& url) { return url.substr(url.rfind('/') + 1); }

// `verity ledger verify`'s tip, or "" when it does not PASS.
std::string VerifiedTip(const std::string& ledger) {
  auto v = Shell(VerityBin() + " ledger verify --ledger " + ledger);
  EXPECT_EQ(v.exit_code, 0) << ledger << "\n" << v.out << v.err;
  const auto at = v.out.find("tip=");
  if (v.exit_code != 0 || at == std::string::npos) return "";
  return v.out.substr(at + 4, 64);
}

// A submission on `db` whose head bench runs `action` before its call number `n`.
CommandResult SubmitWithHook(const std::string& dir, const std::string& db, int n, const std::string& action) {
  WriteFile(dir + "/hook.sh", "n=$(( $(cat " + dir + "/hook.n 2>/dev/null || echo 0) + 1 )); echo $n > " + dir +
                                  "/hook.n\n[ \"$n\" -eq " + std::to_string(n) + " ] && { " + action + "; } >" + dir +
                                  "/hook.out 2>&1\nexec \"$@\"\n");
  return Shell("VERITY_LOCK_DIR=" + dir + " " + VerityBin() + " submit --json --ledger " + db +
               " --title hooked --predict 3.5 --base-cmd " +
               Quote(Bench(dir, "base", 1000, 0.005, 1)) + " --head-cmd " +
               Quote("sh " + dir + "/hook.sh " + Bench(dir, "head", 1035, 0.005, 2)) + " --parity-cmd " +
               Quote(Parity()));
}

// Every sample of the scored run arrived: 2 warm-up, 4 a round.
void ExpectTheWholeRun(const std::string& db, const CommandResult& submitted) {
  const int rounds = nlohmann::json::parse(submitted.out)["rounds"];
  auto show = JsonOf(VerityBin() + " show --json --ledger " + db + " 1");
  EXPECT_EQ(show["runs"][0]["status"], "complete") << show.dump();
  EXPECT_EQ(show["runs"][0]["samples"], 2 + 4 * rounds) << show.dump();
  EXPECT_EQ(show["runs"][0]["warmup_samples"], 2);
  EXPECT_GE(rounds, 10);
}

TEST(PostgresStore, ProjectLedgerCopiesToPostgresAndBackWithTheSameTip) {
  const std::string dir = TempDir("copy"), project = SourceDir() + "/reports/ledger.db";
  const std::string tip = VerifiedTip(project);
  ASSERT_EQ(tip.size(), 64u) << project << " does not verify";
  const std::string pg = FreshLedger(dir), back = dir + "/back.db";
  auto to = Shell(VerityBin() + " ledger copy --from " + project + " --to " + pg);
  ASSERT_EQ(to.exit_code, 0) << to.out << to.err;
  EXPECT_NE(to.out.find("tip=" + tip + " verdict=PASS"), std::string::npos) << to.out;
  EXPECT_EQ(VerifiedTip(pg), tip) << "the same records give the same tip on PostgreSQL";
  auto from = Shell(VerityBin() + " ledger copy --from " + pg + " --to " + back);
  ASSERT_EQ(from.exit_code, 0) << from.out << from.err;
  EXPECT_EQ(VerifiedTip(back), tip) << "and back in a file";
  // The readers see the same ledger on either store.
  for (const std::string what : {"frontier --json", "history --json", "show --json 1", "show --json 40", "drift",
                                  "history predictions"}) {
    auto a = Shell(VerityBin() + " " + what + " --ledger " + project);
    auto b = Shell(VerityBin() + " " + what + " --ledger " + pg);
    EXPECT_EQ(a.exit_code, 0) << what << a.err;
    EXPECT_EQ(a.out, b.out) << what << " differs between the file and its PostgreSQL copy\n" << b.err;
  }
  // The changelog too, but for the ledger's name in its preamble.
  ASSERT_EQ(Shell(VerityBin() + " report --ledger " + project + " --out " + dir + "/a.md").exit_code, 0);
  ASSERT_EQ(Shell(VerityBin() + " report --ledger " + pg + " --out " + dir + "/b.md").exit_code, 0);
  std::string a = ReadFile(dir + "/a.md"), b = ReadFile(dir + "/b.md");
  const std::string name = "`" + pg.substr(pg.rfind('/') + 1) + "`";
  ASSERT_NE(b.find(name), std::string::npos);
  b.replace(b.find(name), name.size(), "`ledger.db`");
  EXPECT_TRUE(a == b) << "the changelog differs between the file and its PostgreSQL copy";
  auto again = Shell(VerityBin() + " ledger copy --from " + project + " --to " + pg);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds a ledger"), std::string::npos) << again.err;
  std::printf("copy: %s -> PostgreSQL -> file, tip %s on all three\n", project.c_str(), tip.c_str());
}

TEST(PostgresStore, BadUrlsAndUnreachableServersAreNamedErrors) {
  const std::string nowhere = "postgresql://verity@%2Fnonexistent%2Fsock/ledger";
  auto v = Shell(VerityBin() + " ledger verify --ledger " + nowhere);
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.err.find(nowhere + ": cannot connect to the PostgreSQL ledger"), std::string::npos) << v.err;
  // From VERITY_LEDGER, with a password that must not be printed.
  auto s = Shell("VERITY_LEDGER=postgres://who:hunter2@%2Fnonexistent/x " + VerityBin() + " history");
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_NE(s.err.find("postgres://who:***@%2Fnonexistent/x: cannot connect"), std::string::npos) << s.err;
  EXPECT_EQ(s.err.find("hunter2"), std::string::npos) << s.err;
  auto missing = Shell(VerityBin() + " ledger verify --ledger " + DbUrl(PostgresServerUrl(), "no_such_db"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("\"no_such_db\" does not exist"), std::string::npos) << missing.err;
  auto garbled = Shell(VerityBin() + " ledger migrate --ledger 'postgresql://[::1'");
  EXPECT_EQ(garbled.exit_code, 1);
  EXPECT_NE(garbled.err.find("postgresql://[::1: cannot connect"), std::string::npos) << garbled.err;
  // A database that would convert or reorder bytes is refused, saying how to make one.
  const std::string server = PostgresServerUrl(), u8 = "u8_" + std::to_string(::getpid());
  ASSERT_EQ(LedgerSql(server, "CREATE DATABASE " + u8 + " ENCODING 'UTF8' LOCALE 'C' TEMPLATE template0").exit_code, 0);
  auto enc = Shell(VerityBin() + " ledger migrate --ledger " + DbUrl(server, u8));
  EXPECT_EQ(enc.exit_code, 1);
  EXPECT_NE(enc.err.find("encoding UTF8"), std::string::npos) << enc.err;
  EXPECT_NE(enc.err.find("createdb --encoding=SQL_ASCII --locale=C --template=template0"), std::string::npos);
}

TEST(PostgresStore, TamperingAndDisabledTriggersAreNamedByVerify) {
  const std::string dir = TempDir("tamper"), db = FreshLedger(dir);
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  ASSERT_EQ(VerifiedTip(db).size(), 64u);
  // The triggers refuse even the server's superuser; TRUNCATE too.
  for (const std::string sql : {"UPDATE samples SET value = 1", "DELETE FROM scores", "TRUNCATE run_failures CASCADE"}) {
    auto r = LedgerSql(db, sql);
    EXPECT_NE(r.exit_code, 0) << sql;
    EXPECT_NE(r.err.find("is append-only"), std::string::npos) << sql << ": " << r.err;
  }
  // Each edit on its own copy (made by `ledger copy`, which verifies it first).
  const std::pair<std::string, std::string> edits[] = {
      {"ALTER TABLE samples DISABLE TRIGGER samples_no_update",
       "trigger samples_no_update on samples: differs from the one the migrations create"},
      {"DROP TRIGGER scores_no_delete ON scores", "trigger scores_no_delete on scores: missing"},
      {"ALTER TABLE samples DISABLE TRIGGER samples_no_update; UPDATE samples SET value = value * 1.01 WHERE id = 7; "
       "ALTER TABLE samples ENABLE TRIGGER samples_no_update",
       "samples#7 (chain seq"},
      {"ALTER TABLE samples DISABLE TRIGGER samples_no_delete; DELETE FROM metric_samples WHERE sample_id = 3; "
       "DELETE FROM samples WHERE id = 3; ALTER TABLE samples ENABLE TRIGGER samples_no_delete",
       "samples#3"},
      {"INSERT INTO triage (id, key, state, by, reason, at) VALUES (99, 'k', 'wontfix', 'x', 'y', 'z')",
       "triage#99: record was never sealed"},
      {"CREATE OR REPLACE FUNCTION changes_no_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; $$",
       "trigger changes_no_update on changes: differs"}};
  for (const auto& [sql, named] : edits) {
    const std::string copy = FreshLedger(dir);
    ASSERT_EQ(Shell(VerityBin() + " ledger copy --from " + db + " --to " + copy).exit_code, 0);
    // As the server's superuser, whose session may skip triggers and foreign keys.
    auto t = LedgerSql(copy, "SET session_replication_role = replica; " + sql);
    ASSERT_EQ(t.exit_code, 0) << sql << ": " << t.err;
    auto v = Shell(VerityBin() + " ledger verify --ledger " + copy);
    EXPECT_EQ(v.exit_code, 1) << sql;
    EXPECT_NE(v.out.find("first broken record: " + named), std::string::npos) << sql << "\n" << v.out;
    EXPECT_NE(v.out.find("verdict=FAIL"), std::string::npos);
  }
  std::printf("tamper: %zu edits of a PostgreSQL ledger, each named by verify\n", std::size(edits));
}

// Every byte value, NULs and invalid UTF-8 included, is stored and read back
// whole and sealed as SQLite seals it: the copy to a file has the same tip and
// reads back the same bytes.
TEST(PostgresStore, EveryByteRoundTripsAndSealsAsInSqlite) {
  const std::string dir = TempDir("bytes"), db = FreshLedger(dir), file = dir + "/copy.db";
  std::string every;
  for (int i = 0; i < 256; i++) every += static_cast<char>(i);
  const std::vector<std::string> values = {every + every, std::string(3, '\0'), "\x01\x02\x01", "\x01", "x\0y\xff\xfe",
                                           ""};
  {
    auto l = Ledger::Open(db);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ledger::Db& d = (*l)->db();
    ASSERT_TRUE(d.Transaction([&]() -> Status {
                   for (size_t i = 0; i < values.size(); i++)
                     VERITY_RETURN_IF_ERROR(
                         d.InsertSealed("boxes", {{"fingerprint", "b" + std::to_string(i)}, {"detail", values[i]}}).status());
                   return OkStatus();
                 }).ok());
    for (size_t i = 0; i < values.size(); i++) {
      auto rows = d.Query("SELECT fingerprint, detail FROM boxes WHERE detail = ?", {values[i]});
      ASSERT_TRUE(rows.ok()) << rows.status().message();
      ASSERT_EQ(rows->size(), 1u) << "value " << i << " is found by its whole bytes";
      EXPECT_EQ(ledger::AsText((*rows)[0][0]), "b" + std::to_string(i));
      EXPECT_TRUE(ledger::AsText((*rows)[0][1]) == values[i]) << "value " << i << " read back whole";
    }
  }
  const std::string tip = VerifiedTip(db);
  ASSERT_EQ(Shell(VerityBin() + " ledger copy --from " + db + " --to " + file).exit_code, 0);
  EXPECT_EQ(VerifiedTip(file), tip);
  auto f = Ledger::Open(file);
  ASSERT_TRUE(f.ok());
  auto rows = (*f)->db().Query("SELECT detail FROM boxes WHERE fingerprint LIKE 'b%' ORDER BY id");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), values.size());
  for (size_t i = 0; i < values.size(); i++) EXPECT_TRUE(ledger::AsText((*rows)[i][0]) == values[i]) << i;
}

// What docs/ledger.md ("The PostgreSQL store") tells an owner to run for submitters.
void CreateSubmitter(const std::string& db, const std::string& role, bool may_insert) {
  const std::string sql = "CREATE ROLE " + role + " LOGIN; GRANT CONNECT ON DATABASE " + NameOf(db) + " TO " + role +
                          "; GRANT USAGE ON SCHEMA public TO " + role + "; GRANT SELECT" +
                          (may_insert ? ", INSERT" : "") + " ON ALL TABLES IN SCHEMA public TO " + role;
  auto r = LedgerSql(db, sql);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(PostgresStore, ASubmitterRoleWritesButCannotUpdateOrDelete) {
  const std::string dir = TempDir("role"), db = FreshLedger(dir), role = "submitter_" + std::to_string(::getpid());
  ASSERT_EQ(Shell(VerityBin() + " ledger migrate --ledger " + db).exit_code, 0);  // the owner creates the schema
  CreateSubmitter(db, role, true);
  const std::string as = WithUser(db, role);
  auto s = Submit(as, "by a submitter", 3.5, Bench(dir, "b", 1000, 0.005, 1), Bench(dir, "h", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "accepted");
  for (const std::string sql : {"UPDATE scores SET gain = 1", "DELETE FROM samples", "TRUNCATE samples CASCADE",
                                "ALTER TABLE samples DISABLE TRIGGER samples_no_update", "DROP TRIGGER samples_no_update ON samples"}) {
    auto r = LedgerSql(as, sql);
    EXPECT_NE(r.exit_code, 0) << sql;
    EXPECT_TRUE(r.err.find("permission denied") != std::string::npos ||
                r.err.find("must be owner") != std::string::npos)
        << sql << ": " << r.err;
  }
  EXPECT_EQ(VerifiedTip(as).size(), 64u);
}

TEST(PostgresStoreFaults, ASubmitterWithoutWritePrivilegesGetsAClearError) {
  const std::string dir = TempDir("reader"), db = FreshLedger(dir), role = "reader_" + std::to_string(::getpid());
  ASSERT_EQ(Shell(VerityBin() + " ledger migrate --ledger " + db).exit_code, 0);
  CreateSubmitter(db, role, false);
  auto s = Submit(WithUser(db, role), "no rights", 3.5, Bench(dir, "b", 1000, 0.005, 1), Bench(dir, "h", 1035, 0.005, 2),
                  Parity());
  EXPECT_EQ(s.cmd.exit_code, 1);
  EXPECT_NE(s.cmd.err.find("permission denied for table changes"), std::string::npos) << s.cmd.err;
  EXPECT_NE(s.cmd.err.find("needs SELECT and INSERT"), std::string::npos) << s.cmd.err;
  EXPECT_EQ(LedgerSql(db, "SELECT count(*) FROM changes").out, "0\n");
  EXPECT_EQ(VerifiedTip(db).size(), 64u);
  std::printf("faults: a role without INSERT was refused with a named error; nothing recorded, verify PASS\n");
}

TEST(PostgresStoreFaults, AConnectionDroppedMidSubmissionLosesNothing) {
  const std::string dir = TempDir("terminate"), db = FreshLedger(dir);
  // Before the head's 6th bench (round 2), the server ends verity's session.
  auto r = SubmitWithHook(dir, db, 6,
                          "psql -X -qAt -c \"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                          "application_name = 'verity' AND datname = '" + NameOf(db) + "'\" " + db);
  EXPECT_EQ(ReadFile(dir + "/hook.out"), "1\n") << "one verity session was terminated";
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["verdict"], "accepted");
  ExpectTheWholeRun(db, r);
  EXPECT_EQ(VerifiedTip(db).size(), 64u);
  std::printf("faults: a session terminated before round 2 of %d: every sample recorded, verify PASS\n",
              nlohmann::json::parse(r.out)["rounds"].get<int>());
}

TEST(PostgresStoreFaults, AServerRestartBetweenRoundsLosesNothing) {
  // Its own cluster: restarting the shared one would cut every other test off.
  const std::string dir = TempDir("restart"), state = dir + "/cluster";
  const std::string script = SourceDir() + "/scripts/pg-test-cluster.sh";
  ASSERT_EQ(Shell(script + " start " + state).exit_code, 0);
  struct Stop {
    std::string cmd;
    ~Stop() { Shell(cmd); }
  } stop{script + " stop " + state};
  const std::string server = ReadFile(state + "/url").substr(0, ReadFile(state + "/url").find('\n'));
  ASSERT_EQ(LedgerSql(server, "CREATE DATABASE restarted").exit_code, 0);
  const std::string db = DbUrl(server, "restarted");
  auto r = SubmitWithHook(dir, db, 6, script + " restart " + state);
  EXPECT_NE(ReadFile(dir + "/hook.out").find("pg-test-cluster: restarted"), std::string::npos) << ReadFile(dir + "/hook.out");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectTheWholeRun(db, r);
  EXPECT_EQ(VerifiedTip(db).size(), 64u);
  std::printf("faults: the server restarted before round 2: the submission reconnected, every sample recorded, "
              "verify PASS\n");
}

// Every ledger benchmark, once, on a small ledger on the server (--pg): the
// PostgreSQL figures come from the same code as SQLite's, and a benchmark
// that errors there is a guard that did not run.
TEST(PostgresStore, EveryLedgerBenchmarkRunsOnPostgres) {
  const auto benchmarks = EveryLedgerBenchmarkOnce(LEDGER_BENCH, "--pg=" + PostgresServerUrl());
  std::set<std::string> ran;
  for (const auto& b : benchmarks) {
    const std::string name = b["name"];
    ran.insert(name.substr(0, name.find('/')));
    if (name.rfind("BM_ConcurrentSubmitters", 0) == 0) EXPECT_EQ(b["submissions"], 16) << b.dump();
  }
  std::printf("ledger_bench --pg: %zu benchmarks ran on PostgreSQL without an error\n", ran.size());
  auto bad = Shell(std::string(LEDGER_BENCH) + " --pg=/not/a/url");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--pg must be a postgresql:// URL"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace verity::test
