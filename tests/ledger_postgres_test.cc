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
               " --title hooked --predict 3.5 --base-cmd " + Quote(Bench(dir, "base", 1000, 0.005, 1)) +
               " --head-cmd " + Quote("sh " + dir + "/hook.sh " + Bench(dir, "head", 1035, 0.005, 2)) +
               " --parity-cmd " + Quote(Parity()));
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
  for (const std::string what :
       {"frontier --json", "history --json", "show --json 1", "show --json 40", "drift", "history predictions"}) {
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
  for (const std::string sql :
       {"UPDATE samples SET value = 1", "DELETE FROM scores", "TRUNCATE run_failures CASCADE"}) {
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
      {"CREATE OR REPLACE FUNCTION changes_no_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; "
       "$$",
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
  const std::vector<std::string> values = {every + every, std::string(3, '\0'), "\x01\x02\x01",
                                           "\x01",        "x\0y\xff\xfe",       ""};
  {
    auto l = Ledger::Open(db);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ledger::Db& d = (*l)->db();
    ASSERT_TRUE(
        d.Transaction([&]() -> Status {
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
  auto s =
      Submit(as, "by a submitter", 3.5, Bench(dir, "b", 1000, 0.005, 1), Bench(dir, "h", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  EXPECT_EQ(s.j["verdict"], "accepted");
  for (const std::string sql :
       {"UPDATE scores SET gain = 1", "DELETE FROM samples", "TRUNCATE samples CASCADE",
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
  auto s = Submit(WithUser(db, role), "no rights", 3.5, Bench(dir, "b", 1000, 0.005, 1),
                  Bench(dir, "h", 1035, 0.005, 2), Parity());
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
                          "application_name = 'verity' AND datname = '" +
                              NameOf(db) + "'\" " + db);
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
  EXPECT_NE(ReadFile(dir + "/hook.out").find("pg-test-cluster: restarted"), std::string::npos)
      << ReadFile(dir + "/hook.out");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectTheWholeRun(db, r);
  EXPECT_EQ(VerifiedTip(db).size(), 64u);
  std::printf(
      "faults: the server restarted before round 2: the submission reconnected, every sample recorded, "
      "verify PASS\n");
}

// The project ledger copied once (`ledger copy` verifies it) into a template
// database; each case gets its own copy of that (CREATE DATABASE ... TEMPLATE:
// a file copy on the server, far faster than another `ledger copy`).
std::string ProjectLedgerCopy(const std::string& tag) {
  static std::string tmpl;
  const std::string server = PostgresServerUrl();
  if (tmpl.empty()) {
    const std::string into = FreshLedger(TempDir("schema"));
    auto c = Shell(VerityBin() + " ledger copy --from " + SourceDir() + "/reports/ledger.db --to " + into);
    EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
    tmpl = NameOf(into);
  }
  static int n = 0;
  const std::string name = "s" + std::to_string(::getpid()) + "_" + tag + std::to_string(n++);
  auto made = LedgerSql(server, "CREATE DATABASE " + name + " TEMPLATE " + tmpl);
  EXPECT_EQ(made.exit_code, 0) << made.err;
  static CreatedDatabases created;  // after Shell's own statics: destroyed before them
  created.server = server;
  created.names.push_back(name);
  return DbUrl(server, name);
}

// Each edit of a PostgreSQL ledger's schema changes no sealed cell, and each
// changes what a reader is told (an index the planner trusts that lies or may
// not be used, a trigger that no longer fires, a rule eating inserts, a
// row-level-security policy hiding retractions from every role but a
// superuser, an object added beside the ledger's own): verify names it, and a
// reader refuses the ledger.
TEST(PostgresSchema, EveryObjectAReaderTrustsIsCompared) {
  const std::string differs = ": its definition differs from the one the migrations create";
  const std::string added = ": not one the migrations create";
  const std::pair<std::string, std::string> edits[] = {
      {"DROP INDEX retractions_by_run; CREATE INDEX retractions_by_run ON retractions (run_id) WHERE id < 0",
       "schema: index retractions_by_run on retractions" + differs},
      {"DROP INDEX samples_by_run; CREATE INDEX samples_by_run ON samples (id)",
       "schema: index samples_by_run on samples" + differs},
      {"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'runs_by_change'::regclass",
       "schema: index runs_by_change on runs" + differs},
      {"UPDATE pg_index SET indisready = false WHERE indexrelid = 'scores_by_run'::regclass",
       "schema: index scores_by_run on scores" + differs},
      {"DO $$ DECLARE t text; BEGIN SELECT tgname INTO t FROM pg_trigger WHERE tgrelid = 'retractions'::regclass AND "
       "tgisinternal LIMIT 1; EXECUTE format('ALTER TABLE retractions DISABLE TRIGGER %I', t); END $$",
       "schema: table retractions on retractions" + differs},
      {"CREATE OR REPLACE FUNCTION retractions_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; "
       "END; $$",
       "trigger retractions_no_delete on retractions: differs"},
      {"CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END; $$; CREATE TRIGGER "
       "samples_no_update BEFORE UPDATE ON runs FOR EACH STATEMENT EXECUTE FUNCTION nothing()",
       "trigger samples_no_update: two triggers have this name"},
      {"CREATE RULE retractions_vanish AS ON INSERT TO retractions DO INSTEAD NOTHING",
       "schema: rule retractions_vanish on retractions" + added},
      {"CREATE VIEW open_retractions AS SELECT * FROM retractions WHERE false",
       "schema: view open_retractions on open_retractions" + added},
      {"ALTER TABLE retractions ENABLE ROW LEVEL SECURITY; ALTER TABLE retractions FORCE ROW LEVEL SECURITY; "
       "CREATE POLICY hide_retractions ON retractions USING (false)",
       "schema: table retractions on retractions" + differs},
      {"CREATE POLICY hide_retractions ON retractions USING (false)",
       "schema: policy hide_retractions on retractions" + added},
      {"CREATE FUNCTION run_is_retracted(bigint) RETURNS boolean LANGUAGE sql AS 'SELECT false'",
       "schema: function run_is_retracted(bigint)" + added},
      {"CREATE OPERATOR === (LEFTARG = text, RIGHTARG = text, FUNCTION = texteq)",
       "schema: operator ===(text, text)" + added},
      {"CREATE TYPE verdict AS ENUM ('accepted')", "schema: type verdict" + added},
      {"ALTER TABLE seal_chain ALTER COLUMN alg SET DEFAULT 'hmac-sha256'",
       "schema: table seal_chain on seal_chain" + differs},
      {"ALTER TABLE changes DROP CONSTRAINT changes_kind_check", "schema: table changes on changes" + differs},
      {"ALTER TABLE retractions SET UNLOGGED", "schema: table retractions on retractions" + differs},
      // A child in another schema: its rows are read as the parent's.
      {"CREATE SCHEMA elsewhere; CREATE TABLE elsewhere.more_retractions () INHERITS (retractions)",
       "schema: table retractions on retractions" + differs}};
  for (const auto& [sql, named] : edits) {
    const std::string db = ProjectLedgerCopy("e");
    auto e = LedgerSql(db, sql);
    ASSERT_EQ(e.exit_code, 0) << sql << ": " << e.err;
    auto v = Shell(VerityBin() + " ledger verify --ledger " + db);
    EXPECT_EQ(v.exit_code, 1) << sql << "\n" << v.out << v.err;
    EXPECT_NE(v.out.find("first broken record: " + named), std::string::npos) << sql << "\n" << v.out << v.err;
    EXPECT_NE(v.out.find("verdict=FAIL"), std::string::npos) << v.out;
    auto f = Shell(VerityBin() + " frontier --ledger " + db);
    EXPECT_EQ(f.exit_code, 1) << sql << "\n" << f.out << f.err;
    EXPECT_NE(f.err.find("ledger verify FAILs: " + named), std::string::npos) << sql << "\n" << f.err;
    EXPECT_NE(f.err.find("frontier refuses"), std::string::npos) << f.err;
  }
  std::printf("schema: %zu edits of a PostgreSQL ledger's schema, each named by verify and refused by frontier\n",
              std::size(edits));
}

// An index that does not hold every row of its table, though its definition
// says it does: built partial while one row was left out, then its predicate
// erased from pg_index (PostgreSQL's writable_schema). The schema compares
// equal; amcheck (bt_index_check, heapallindexed) names the index.
TEST(PostgresSchema, AnIndexMissingARowIsNamedByAmcheck) {
  const std::string db = ProjectLedgerCopy("a");
  auto plain = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find(" amcheck=not-installed verdict=PASS"), std::string::npos) << plain.out;
  ASSERT_EQ(LedgerSql(db, "CREATE EXTENSION amcheck").exit_code, 0) << "amcheck ships with Debian's postgresql";
  const std::string btrees =
      LedgerSql(db,
                "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = "
                "c.relam WHERE a.amname = 'btree' AND c.relnamespace = 'public'::regnamespace")
          .out;
  auto checked = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find(" amcheck=ran(" + btrees.substr(0, btrees.find('\n')) + ") verdict=PASS"),
            std::string::npos)
      << checked.out << "(" << btrees << " btree indexes)";
  auto lie = LedgerSql(db,
                       "CREATE INDEX partial ON samples (run_id) WHERE id <> 7; DROP INDEX samples_by_run; "
                       "ALTER INDEX partial RENAME TO samples_by_run; UPDATE pg_index SET indpred = NULL WHERE "
                       "indexrelid = 'samples_by_run'::regclass");
  ASSERT_EQ(lie.exit_code, 0) << lie.err;
  // A reader's query through the index misses the row.
  const std::string count = "SELECT count(*) FROM samples WHERE run_id = (SELECT run_id FROM samples WHERE id = 7)";
  EXPECT_NE(LedgerSql(db, "SET enable_seqscan = off; SET enable_bitmapscan = off; " + count).out,
            LedgerSql(db, "SET enable_indexscan = off; SET enable_bitmapscan = off; " + count).out);
  auto v = Shell(VerityBin() + " ledger verify --ledger " + db);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("first broken record: schema: the store's integrity check fails: amcheck's bt_index_check fails "
                       "on index samples_by_run: heap tuple"),
            std::string::npos)
      << v.out << v.err;
  EXPECT_NE(v.out.find(" amcheck=failed verdict=FAIL"), std::string::npos) << v.out;
  auto f = Shell(VerityBin() + " frontier --ledger " + db);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.err.find("amcheck's bt_index_check fails on index samples_by_run"), std::string::npos) << f.err;
}

// Verify replays the migrations in pg_temp: a role without TEMP on the
// database gets a named error saying what to grant, from verify and from a
// reader alike, never a PASS.
TEST(PostgresSchema, VerifyWithoutTheTempPrivilegeIsANamedError) {
  const std::string db = ProjectLedgerCopy("t"), role = "notemp_" + std::to_string(::getpid());
  CreateSubmitter(db, role, false);
  ASSERT_EQ(LedgerSql(db, "REVOKE TEMP ON DATABASE " + NameOf(db) + " FROM PUBLIC").exit_code, 0);
  const std::string as = WithUser(db, role);
  const std::string named = "role " + role + " lacks the TEMP privilege on database " + NameOf(db) +
                            ": GRANT TEMP ON DATABASE " + NameOf(db) + " TO " + role;
  auto v = Shell(VerityBin() + " ledger verify --ledger " + as);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  EXPECT_NE(v.err.find(named), std::string::npos) << v.err;
  EXPECT_EQ(v.out.find("verdict=PASS"), std::string::npos) << v.out;
  auto f = Shell(VerityBin() + " frontier --ledger " + as);
  EXPECT_EQ(f.exit_code, 1) << f.out;
  EXPECT_NE(f.err.find(named), std::string::npos) << f.err;
  // Granted, the same role verifies (amcheck is not there to run).
  ASSERT_EQ(LedgerSql(db, "GRANT TEMP ON DATABASE " + NameOf(db) + " TO " + role).exit_code, 0);
  auto ok = Shell(VerityBin() + " ledger verify --ledger " + as);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find(" amcheck=not-installed verdict=PASS"), std::string::npos) << ok.out;
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
