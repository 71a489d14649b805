// The seal chain (issue 9, holes 10 and 11): any bytes survive sealing and
// verification; `ledger verify` prints one summary line with the chain's tip,
// and --expect-tip detects truncation; seals can be keyed (HMAC-SHA256 under
// VERITY_LEDGER_KEY); verify is read-only; an old ledger migrates and verifies.
// Issue 24 (holes 5, 6, 10): under a key every seal is keyed; the storage class
// of every cell is sealed; verify checks the migration table and the
// append-only triggers, and `show` and `report` refuse a ledger that fails it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <sstream>

#include "base/sha256.h"
#include "ledger/ledger.h"
#include "ledger/migrations.h"
#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {
using ledger::AsText;
using ledger::Ledger;
using ledger::Value;

struct Verified {
  CommandResult cmd;
  int64_t records = -1, schema = -1;  // schema: objects compared with a replay of the migrations
  std::string tip, check, verdict;    // check: the store's own ("integrity_check=ran", "amcheck=ran(55)")
};

// Runs `ledger verify` and parses its one summary line (asserted to be the last
// line, and the only one of its kind).
Verified Verify(const std::string& db, const std::string& extra = "", const std::string& env = "") {
  Verified v;
  v.cmd = Shell(env + VerityBin() + " ledger verify --ledger " + db + " " + extra);
  // The line says what the store's own check did (SQLite integrity_check=...,
  // PostgreSQL amcheck=...).
  static const std::regex kLine(
      "^verify: records=(\\d+) schema=compared\\((\\d+)\\) tip=([0-9a-f]{64}|genesis) "
      "((?:integrity_check|amcheck)=[a-z0-9()-]+) verdict=(PASS|FAIL)$");
  int summaries = 0;
  std::string last;
  std::istringstream in(v.cmd.out);
  for (std::string line; std::getline(in, line);) {
    last = line;
    std::smatch m;
    if (std::regex_match(line, m, kLine)) {
      summaries++;
      v.records = std::stoll(m[1]);
      v.schema = std::stoll(m[2]);
      v.tip = m[3];
      v.check = m[4];
      v.verdict = m[5];
    }
  }
  EXPECT_EQ(summaries, 1) << "exactly one summary line:\n" << v.cmd.out << v.cmd.err;
  EXPECT_TRUE(std::regex_match(last, kLine)) << "the summary line comes last:\n" << v.cmd.out;
  EXPECT_EQ(v.cmd.exit_code, v.verdict == "PASS" ? 0 : 1) << "exit 0 only on PASS:\n" << v.cmd.out << v.cmd.err;
  if (v.verdict == "PASS") {  // a PASS says that its checks ran
    EXPECT_GT(v.schema, 0) << v.cmd.out;
    EXPECT_TRUE(v.check == "integrity_check=ran" || v.check.rfind("amcheck=ran(", 0) == 0 ||
                v.check == "amcheck=not-installed" || v.check == "amcheck=not-permitted")
        << v.cmd.out;
  }
  return v;
}

std::string Sql(const std::string& db, const std::string& sql) {
  auto r = Shell("sqlite3 " + db + " " + Quote(sql));
  EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.err;
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string FileSha(const std::string& path) {
  auto h = Sha256File(path);
  EXPECT_TRUE(h.ok()) << h.status().message();
  return h.ok() ? h.value() : "";
}

// A copy of the ledger the release before issue 9 wrote (tests/data/README.md); "" when missing.
std::string Schema2Copy(const std::string& dir) {
  const std::string from = SourceDir() + "/tests/data/ledger-schema2.db", to = dir + "/old.db";
  if (!std::filesystem::exists(from)) {
    ADD_FAILURE() << from << " is missing (note: .gitignore's *.db pattern keeps it out of git)";
    return "";
  }
  std::filesystem::copy_file(from, to);
  return to;
}

// Strings no C API may cut short: a NUL inside, invalid UTF-8, a 1 MB line.
std::string NastyBytes() {
  std::string s = "before";
  s += '\0';
  s += "after-nul \xff\xfe invalid utf-8 ";
  s += std::string(1 << 20, 'x');
  s += '\0';
  s += "\xc3\x28 end\n";
  return s;
}

// --- hole 10: any bytes ---------------------------------------------------

// Every REAL ever sealed was printed with printf's %.17g; SealNumber must
// print the same bytes or every existing seal breaks. Random bit patterns
// (every exponent, subnormals), values near the precision's rounding edges,
// and the special values.
TEST(SealNumber, IsPrintfsSeventeenDigitsByteForByte) {
  std::mt19937_64 rng(17);
  std::vector<double> xs = {0.0,
                            -0.0,
                            1.0,
                            -1.0,
                            0.1,
                            1e16,
                            1e17,
                            123456789012345678.0,
                            9.999999999999999e22,
                            5e-324,
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::min(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::nan(""),
                            -std::nan("")};
  for (int i = 0; i < 300000; i++) {
    const uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    xs.push_back(d);
  }
  std::uniform_real_distribution<double> human(0.0, 2000.0);
  for (int i = 0; i < 100000; i++) xs.push_back(human(rng));  // bench-like values
  int differ = 0;
  for (double d : xs) {
    char want[64], got[64];
    const int n = std::snprintf(want, sizeof want, "%.17g", d);
    const size_t m = ledger::SealNumber(d, got, sizeof got);
    if (std::string(want, n) != std::string(got, m) && differ++ < 5)
      ADD_FAILURE() << "printf '" << std::string(want, n) << "' SealNumber '" << std::string(got, m) << "'";
  }
  std::printf("seal numbers: %zu doubles printed as printf's %%.17g, %d differ\n", xs.size(), differ);
  EXPECT_EQ(differ, 0);
}

TEST(SealBytes, AnyBytesRoundTripThroughInsertSealedAndVerify) {
  const std::string dir = TempDir("bytes"), path = dir + "/l.db";
  const std::string nasty = NastyBytes();
  const std::string nul_only(3, '\0');
  {
    auto l = Ledger::Open(path);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ledger::Db& d = (*l)->db();
    ASSERT_TRUE(
        d.Transaction([&]() -> Status {
           VERITY_RETURN_IF_ERROR(d.InsertSealed("boxes", {{"fingerprint", std::string("nasty")}, {"detail", nasty}}));
           VERITY_RETURN_IF_ERROR(
               d.InsertSealed("boxes", {{"fingerprint", std::string("nuls")}, {"detail", nul_only}}));
           return d.InsertSealed("boxes", {{"fingerprint", std::string("empty")}, {"detail", std::string()}}).status();
         }).ok());
    auto rows = d.Query("SELECT detail, length(CAST(detail AS BLOB)) FROM boxes ORDER BY id");
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_TRUE(AsText((*rows)[0][0]) == nasty)
        << "read back " << AsText((*rows)[0][0]).size() << " of " << nasty.size() << " bytes";
    EXPECT_EQ(ledger::AsInt((*rows)[0][1]), static_cast<int64_t>(nasty.size())) << "stored in full";
    EXPECT_TRUE(AsText((*rows)[1][0]) == nul_only);
    EXPECT_EQ(AsText((*rows)[2][0]), "");
    // A string parameter is bound whole as well (a WHERE on the full bytes finds it).
    auto found = d.Query("SELECT fingerprint FROM boxes WHERE detail = ?", {nasty});
    ASSERT_TRUE(found.ok());
    ASSERT_EQ(found->size(), 1u);
    EXPECT_EQ(AsText((*found)[0][0]), "nasty");
    auto v = (*l)->Verify();
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_TRUE(v->ok) << v->first_broken;
  }
  // The canonical text keeps every byte: strings that differ only past a NUL differ.
  EXPECT_NE(ledger::CanonicalRow({"a"}, {Value(std::string("x\0y", 3))}),
            ledger::CanonicalRow({"a"}, {Value(std::string("x"))}));
  auto v = Verify(path);
  EXPECT_EQ(v.verdict, "PASS") << v.cmd.out << v.cmd.err;
  EXPECT_EQ(std::to_string(v.records), Sql(path, "SELECT count(*) FROM seal_chain"))
      << "the policy rows and three boxes";
  EXPECT_EQ(Sql(path, "SELECT count(*) FROM seal_chain WHERE tbl = 'boxes'"), "3");
}

TEST(SealBytes, SubmissionsWhoseCommandsPrintNulInvalidUtf8AndAHugeLineStillVerify) {
  // Each failure message keeps the tail of what the command printed; the NUL and
  // the invalid UTF-8 are in that tail, after a 1 MB line.
  const std::string huge = "head -c 1048576 /dev/zero | tr '\\000' x";
  struct Case {
    const char* name;
    std::string head_cmd, parity_cmd, table;
  };
  const std::string dir0 = TempDir("nasty");
  const Case cases[] = {
      {"bench dies printing on stderr",
       "printf 'crash\\000after-nul \\377\\376 ' >&2; " + huge +
           " >&2; printf ' tail\\000end\\377\\376\\n' >&2; exit 3",
       Parity(), "run_failures"},
      {"bench prints no JSON on stdout",
       "printf 'not json \\000 \\377\\376 '; " + huge + "; printf ' tail\\000end\\377\\376\\n'", Parity(),
       "run_failures"},
      {"parity prints garbage", Bench(dir0, "head", 1000, 0.01, 2),
       "printf 'parity garbage \\000 \\377\\376 '; " + huge + "; printf ' tail\\000end\\377\\376\\n'",
       "parity_results"},
  };
  for (const auto& c : cases) {
    const std::string dir = TempDir("nasty"), db = FreshLedger(dir);
    // Plain output, not --json: the JSON rendering of such a message is not this test's subject.
    auto s = Shell(VerityBin() + " submit --ledger " + db + " --title " + Quote(c.name) + " --predict 1 --base-cmd " +
                   Quote(Bench(dir, "base", 1000, 0.01, 1)) + " --head-cmd " + Quote(c.head_cmd) + " --parity-cmd " +
                   Quote(c.parity_cmd));
    EXPECT_TRUE(s.exit_code == 0 || s.exit_code == 1) << c.name << ": exit " << s.exit_code << "\n" << s.err;
    EXPECT_NE(s.out.find("submit: change=1 run=1 verdict="), std::string::npos) << c.name << ": " << s.out << s.err;
    // The bytes reached the database whole: a NUL and 0xff 0xfe inside the stored message.
    auto l = Ledger::Open(db);
    ASSERT_TRUE(l.ok()) << l.status().message();
    auto m = (*l)->db().Query("SELECT message FROM " + c.table);
    ASSERT_TRUE(m.ok()) << m.status().message();
    int whole = 0;
    for (const auto& row : *m) {
      const std::string msg = ledger::AsText(row[0]);
      whole += msg.find('\0') != std::string::npos && msg.find("\xff\xfe") != std::string::npos &&
               msg.find(std::string("\0end\xff\xfe", 6)) != std::string::npos;
    }
    EXPECT_EQ(whole, 1) << c.name;
    auto v = Verify(db);
    EXPECT_EQ(v.verdict, "PASS") << c.name << ": " << v.cmd.out << v.cmd.err;
  }
}

// --- hole 11: truncation, --expect-tip, the tip -----------------------------

// Deletes the chain's last `n` records and their seal rows behind the ledger's back.
// The triggers are put back as they were, so only --expect-tip can tell.
void Truncate(const std::string& db, int n) {
  std::string sql;
  auto triggers = Sql(db, "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_no_delete'");
  const std::string restore =
      Sql(db, "SELECT group_concat(sql, '; ') FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_no_delete'");
  std::istringstream tin(triggers);
  for (std::string t; std::getline(tin, t);) sql += "DROP TRIGGER " + t + "; ";
  auto last =
      Sql(db, "SELECT tbl || ' ' || row_id || ' ' || seq FROM seal_chain ORDER BY seq DESC LIMIT " + std::to_string(n));
  std::istringstream lin(last);
  for (std::string tbl, row, seq; lin >> tbl >> row >> seq;)
    sql += "DELETE FROM " + tbl + " WHERE rowid = " + row + "; DELETE FROM seal_chain WHERE seq = " + seq + "; ";
  sql += restore + ";";
  auto r = Shell("sqlite3 " + db + " " + Quote(sql));
  ASSERT_EQ(r.exit_code, 0) << sql << "\n" << r.err;
}

TEST(SealTip, TruncationPassesAloneAndFailsAgainstTheNotedTip) {
  const std::string dir = TempDir("trunc"), db = dir + "/l.db";
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  auto before = Verify(db);
  ASSERT_EQ(before.verdict, "PASS") << before.cmd.out;
  ASSERT_GT(before.records, 10);
  EXPECT_EQ(before.tip, Sql(db, "SELECT seal FROM seal_chain ORDER BY seq DESC LIMIT 1"));
  {
    auto l = Ledger::OpenForVerify(db);
    ASSERT_TRUE(l.ok()) << l.status().message();
    auto tip = (*l)->Tip();
    ASSERT_TRUE(tip.ok());
    EXPECT_EQ(tip.value(), before.tip);
  }
  // The noted tip, whole or as a 16-char prefix, is found; so is a seal mid-chain.
  auto same = Verify(db, "--expect-tip " + before.tip);
  EXPECT_EQ(same.verdict, "PASS") << same.cmd.out;
  EXPECT_NE(same.cmd.out.find("expected tip found: record " + std::to_string(before.records) + " of"),
            std::string::npos)
      << same.cmd.out;
  EXPECT_EQ(Verify(db, "--expect-tip " + before.tip.substr(0, 16)).verdict, "PASS");
  const std::string mid = Sql(db, "SELECT seal FROM seal_chain ORDER BY seq LIMIT 1 OFFSET 4");
  EXPECT_EQ(Verify(db, "--expect-tip " + mid).verdict, "PASS");
  // Too short a prefix, or not hex: an error, not a verdict.
  for (const std::string& bad : {before.tip.substr(0, 15), std::string("zz") + before.tip.substr(2)}) {
    auto r = Shell(VerityBin() + " ledger verify --ledger " + db + " --expect-tip " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find("is not a seal"), std::string::npos) << r.err;
  }

  const std::string cut = dir + "/cut.db";
  ASSERT_EQ(Shell("sqlite3 " + db + " \".backup " + cut + "\"").exit_code, 0);
  Truncate(cut, 5);
  // Documented limitation: a chain cut at its end verifies on its own.
  auto alone = Verify(cut);
  EXPECT_EQ(alone.verdict, "PASS") << alone.cmd.out;
  EXPECT_EQ(alone.records, before.records - 5);
  EXPECT_NE(alone.tip, before.tip);
  // Against the tip a reader noted, it fails, naming that tip.
  for (const std::string& want : {before.tip, before.tip.substr(0, 16)}) {
    auto v = Verify(cut, "--expect-tip " + want);
    EXPECT_EQ(v.verdict, "FAIL") << v.cmd.out;
    EXPECT_EQ(v.records, before.records - 5);
    EXPECT_NE(v.cmd.out.find("expected tip " + want + " is not in the chain"), std::string::npos) << v.cmd.out;
    EXPECT_NE(v.cmd.out.find("truncated"), std::string::npos) << v.cmd.out;
  }
  // The ledger grows past a noted tip: still found.
  auto s2 = Submit(db, "t2", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s2.cmd.exit_code, 0) << s2.cmd.err;
  auto grown = Verify(db, "--expect-tip " + before.tip);
  EXPECT_EQ(grown.verdict, "PASS") << grown.cmd.out;
  EXPECT_GT(grown.records, before.records);
}

TEST(SealTip, EmptyChainTipIsGenesis) {
  const std::string dir = TempDir("gen"), db = dir + "/l.db";
  // Just the chain and the migrations table, nothing sealed yet.
  Sql(db,
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, sha256 TEXT NOT NULL, "
      "applied_at TEXT NOT NULL); CREATE TABLE seal_chain (seq INTEGER PRIMARY KEY, tbl TEXT NOT NULL, row_id "
      "INTEGER NOT NULL, content_sha256 TEXT NOT NULL, prev_seal TEXT NOT NULL, seal TEXT NOT NULL)");
  auto v = Verify(db, "--expect-tip genesis");
  EXPECT_EQ(v.verdict, "PASS") << v.cmd.out << v.cmd.err;
  EXPECT_EQ(v.records, 0);
  EXPECT_EQ(v.tip, "genesis");
  auto l = Ledger::OpenForVerify(db);
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto tip = (*l)->Tip();
  ASSERT_TRUE(tip.ok());
  EXPECT_EQ(tip.value(), "genesis");
  // Every chain starts at genesis.
  const std::string full = dir + "/full.db";
  ASSERT_EQ(Shell(VerityBin() + " ledger migrate --ledger " + full).exit_code, 0);
  auto f = Verify(full, "--expect-tip genesis");
  EXPECT_EQ(f.verdict, "PASS") << f.cmd.out;
  EXPECT_GT(f.records, 0) << "the policy";
  EXPECT_EQ(std::to_string(f.records), Sql(full, "SELECT count(*) FROM seal_chain"));
}

// --- keyed seals -------------------------------------------------------------

const char kKey[] = "s3cret-ledger-key-7f1e2d";

// A bench command that fails when it can see the seal key.
std::string KeyBlindBench(const std::string& dir, const std::string& name, double mean, int seed) {
  return "if [ -n \"${VERITY_LEDGER_KEY:-}\" ]; then echo 'the seal key leaked to a bench command' >&2; exit 9; fi; " +
         Bench(dir, name, mean, 0.005, seed);
}

TEST(SealKey, KeyedChainNeedsItsKeyToVerifyAndToExtend) {
  const std::string dir = TempDir("key"), db = dir + "/l.db";
  const std::string with_key = std::string("VERITY_LEDGER_KEY=") + kKey + " ";
  auto s = Shell(with_key + VerityBin() + " submit --json --ledger " + db + " --title keyed --predict 3.5 --base-cmd " +
                 Quote(KeyBlindBench(dir, "base", 1000, 1)) + " --head-cmd " +
                 Quote(KeyBlindBench(dir, "head", 1035, 2)) + " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  EXPECT_EQ(Sql(db, "SELECT group_concat(DISTINCT alg) FROM seal_chain"), "hmac-sha256");
  // The key is nowhere in the database files.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string bytes = ReadFile(db + suffix);
    EXPECT_EQ(bytes.find(kKey), std::string::npos) << "key stored in " << db << suffix;
  }
  auto ok = Verify(db, "", with_key);
  EXPECT_EQ(ok.verdict, "PASS") << ok.cmd.out << ok.cmd.err;
  // Without the key: FAIL, saying the key is needed.
  auto no_key = Verify(db);
  EXPECT_EQ(no_key.verdict, "FAIL") << no_key.cmd.out;
  EXPECT_NE(no_key.cmd.out.find("first broken record: policy#1 (chain seq 1)"), std::string::npos) << no_key.cmd.out;
  EXPECT_NE(no_key.cmd.out.find("set VERITY_LEDGER_KEY"), std::string::npos) << no_key.cmd.out;
  // A wrong key: FAIL at the first keyed record.
  auto wrong = Verify(db, "", "VERITY_LEDGER_KEY=not-the-key ");
  EXPECT_EQ(wrong.verdict, "FAIL") << wrong.cmd.out;
  EXPECT_EQ(wrong.records, 0);
  EXPECT_NE(wrong.cmd.out.find("first broken record: policy#1 (chain seq 1): keyed seal does not recompute"),
            std::string::npos)
      << wrong.cmd.out;
  // Writing needs the key that sealed the chain; a refused write adds nothing.
  const std::string tip = ok.tip;
  auto submit = [&](const std::string& env) {
    return Shell(env + VerityBin() + " submit --ledger " + db + " --title more --predict 3.5 --base-cmd " +
                 Quote(Bench(dir, "base", 1000, 0.005, 1)) + " --head-cmd " +
                 Quote(Bench(dir, "head", 1035, 0.005, 2)) + " --parity-cmd " + Quote(Parity()));
  };
  auto unkeyed = submit("");
  EXPECT_NE(unkeyed.exit_code, 0);
  EXPECT_NE(unkeyed.err.find("set VERITY_LEDGER_KEY to write"), std::string::npos) << unkeyed.err;
  auto wrong_write = submit("VERITY_LEDGER_KEY=not-the-key ");
  EXPECT_NE(wrong_write.exit_code, 0);
  EXPECT_NE(wrong_write.err.find("not the key that sealed"), std::string::npos) << wrong_write.err;
  auto still = Verify(db, "", with_key);
  EXPECT_EQ(still.verdict, "PASS") << still.cmd.out;
  EXPECT_EQ(still.tip, tip) << "refused writes sealed nothing";
}

// A ledger an older verity keyed silently (plain seals, then keyed ones, no
// record of the change): under the key it FAILs until `ledger start-keying`
// names its plain records; without the key its keyed records need the key.
TEST(SealKey, SilentlyKeyedOldLedgerVerifiesOnceKeyingIsRecorded) {
  const std::string dir = TempDir("mixed"), db = dir + "/l.db";
  auto s = Submit(db, "plain", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  auto plain = Verify(db);
  ASSERT_EQ(plain.verdict, "PASS");
  {
    auto l = Ledger::Open(db);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ledger::Db& d = (*l)->db();
    d.set_seal_key(kKey);
    d.set_starting_keying(true);  // what every write under a key did before issue 24
    ASSERT_TRUE(d.Transaction([&]() -> Status {
                   return d.InsertSealed("boxes", {{"fingerprint", std::string("k")}, {"detail", std::string("keyed")}})
                       .status();
                 }).ok());
  }
  const std::string with_key = std::string("VERITY_LEDGER_KEY=") + kKey + " ";
  auto unnamed = Verify(db, "", with_key);
  EXPECT_EQ(unnamed.verdict, "FAIL") << unnamed.cmd.out;
  EXPECT_NE(unnamed.cmd.out.find("no keyed `ledger start-keying` record names the " + std::to_string(plain.records) +
                                 " plain records"),
            std::string::npos)
      << unnamed.cmd.out;
  auto start = Shell(with_key + VerityBin() + " ledger start-keying --ledger " + db + " --by ops --reason " +
                     Quote("name the plain records an old verity keyed after"));
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err;
  auto keyed = Verify(db, "--expect-tip " + plain.tip, with_key);
  EXPECT_EQ(keyed.verdict, "PASS") << keyed.cmd.out;
  auto no_key = Verify(db);
  EXPECT_EQ(no_key.verdict, "FAIL");
  EXPECT_EQ(no_key.records, plain.records) << "the plain records verify; the keyed ones need the key";
  EXPECT_NE(no_key.cmd.out.find("first broken record: boxes#"), std::string::npos) << no_key.cmd.out;
  EXPECT_NE(no_key.cmd.out.find("set VERITY_LEDGER_KEY"), std::string::npos) << no_key.cmd.out;
}

TEST(SealKey, PlainSealAfterKeyedOnesIsADowngrade) {
  const std::string path = TempDir("down") + "/l.db";
  // Keyed from genesis (its policy rows sealed with the key).
  ASSERT_EQ(Shell(std::string("VERITY_LEDGER_KEY=") + kKey + " " + VerityBin() + " ledger migrate --ledger " + path)
                .exit_code,
            0);
  auto l = Ledger::Open(path);
  ASSERT_TRUE(l.ok());
  ledger::Db& d = (*l)->db();
  d.set_seal_key(kKey);
  ASSERT_TRUE(
      d.Transaction([&]() -> Status {
         return d.InsertSealed("boxes", {{"fingerprint", std::string("a")}, {"detail", std::string("keyed")}}).status();
       }).ok());
  // The ledger refuses to write a plain seal after a keyed one...
  d.set_seal_key("");
  Status refused = d.Transaction([&]() -> Status {
    return d.InsertSealed("boxes", {{"fingerprint", std::string("b")}, {"detail", std::string("plain")}}).status();
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("set VERITY_LEDGER_KEY"), std::string::npos) << refused.message();
  // ...and verify rejects one written behind its back (inserts are not trigger-guarded).
  auto last = d.Query("SELECT seal FROM seal_chain ORDER BY seq DESC LIMIT 1");
  ASSERT_TRUE(last.ok());
  const std::string prev = AsText((*last)[0][0]);
  ASSERT_TRUE(d.Query("INSERT INTO boxes (id, fingerprint, detail) VALUES (7, 'c', 'forged')").ok());
  const std::string content = Sha256Hex(ledger::CanonicalRow(
      {"id", "fingerprint", "detail"}, {Value(int64_t{7}), Value(std::string("c")), Value(std::string("forged"))}));
  ASSERT_TRUE(d.Query("INSERT INTO seal_chain (tbl, row_id, content_sha256, prev_seal, seal, alg) VALUES (?, ?, ?, ?, "
                      "?, 'sha256')",
                      {std::string("boxes"), int64_t{7}, content, prev, ledger::ChainSeal(prev, "boxes", 7, content)})
                  .ok());
  d.set_seal_key(kKey);
  auto v = (*l)->Verify();
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_FALSE(v->ok);
  EXPECT_NE(v->first_broken.find("boxes#7"), std::string::npos) << v->first_broken;
  EXPECT_NE(v->first_broken.find("plain sha256 after keyed"), std::string::npos) << v->first_broken;
}

TEST(SealKey, HmacMatchesRfc4231) {
  // RFC 4231 test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(HmacSha256Hex(std::string("k\0y", 3), "d").size(), 64u);
  EXPECT_NE(HmacSha256Hex(std::string("k\0y", 3), "d"), HmacSha256Hex("k", "d"));
}

// --- read-only verify, migration of an old ledger ------------------------------

TEST(SealReadOnly, VerifyingASchema2LedgerChangesNoByte) {
  const std::string dir = TempDir("ro");
  const std::string db = Schema2Copy(dir);
  ASSERT_FALSE(db.empty());
  const std::string before = FileSha(db);
  auto v = Verify(db);
  EXPECT_EQ(v.verdict, "PASS") << v.cmd.out << v.cmd.err;
  EXPECT_GT(v.records, 0);
  EXPECT_EQ(FileSha(db), before) << "verify wrote to the ledger";
  EXPECT_EQ(Sql(db, "SELECT max(version) FROM schema_migrations"), "2") << "verify migrated the ledger";
  // A missing ledger is an error naming it, and is not created.
  const std::string missing = dir + "/nope.db";
  auto r = Shell(VerityBin() + " ledger verify --ledger " + missing);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("verdict=PASS"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(missing));
  // Not a ledger: an error, not a PASS.
  WriteFile(dir + "/empty.db", "");
  auto e = Shell(VerityBin() + " ledger verify --ledger " + dir + "/empty.db");
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_NE(e.err.find("not a verity ledger"), std::string::npos) << e.err;
}

TEST(SealReadOnly, MigrateUpgradesASchema2LedgerAndItStillVerifies) {
  const std::string dir = TempDir("mig");
  const std::string db = Schema2Copy(dir);
  ASSERT_FALSE(db.empty());
  auto old = Verify(db);
  ASSERT_EQ(old.verdict, "PASS") << old.cmd.out;
  auto m = Shell(VerityBin() + " ledger migrate --ledger " + db);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const int latest = ledger::EmbeddedMigrations().back().version;
  EXPECT_NE(m.out.find("migrate: schema version " + std::to_string(latest)), std::string::npos) << m.out;
  EXPECT_EQ(Sql(db, "SELECT max(version) FROM schema_migrations"), std::to_string(latest));
  auto now = Verify(db, "--expect-tip " + old.tip);
  EXPECT_EQ(now.verdict, "PASS") << now.cmd.out << now.cmd.err;
  EXPECT_GE(now.records, old.records);
  // The old records are still the chain's first ones, every one read as sha256.
  EXPECT_EQ(Sql(db, "SELECT seal FROM seal_chain ORDER BY seq LIMIT 1 OFFSET " + std::to_string(old.records - 1)),
            old.tip);
  EXPECT_EQ(Sql(db, "SELECT count(*) FROM (SELECT alg FROM seal_chain ORDER BY seq LIMIT " +
                        std::to_string(old.records) + ") WHERE alg = 'sha256'"),
            std::to_string(old.records));
}

// --- issue 24: seals that mean what they say ----------------------------------

// Edits `db` as a careful forger would: drops the append-only triggers, runs
// `sql`, and puts the very same triggers back.
void Tamper(const std::string& db, const std::string& sql) {
  const std::string triggers = Sql(db, "SELECT group_concat(sql, '; ') FROM sqlite_master WHERE type = 'trigger'");
  const std::string drops =
      Sql(db, "SELECT group_concat('DROP TRIGGER ' || name, '; ') FROM sqlite_master WHERE type = 'trigger'");
  auto r = Shell("sqlite3 " + db + " " + Quote(drops + "; " + sql + "; " + triggers + ";"));
  ASSERT_EQ(r.exit_code, 0) << sql << "\n" << r.err;
}

// Recomputes every seal from the stored rows as plain SHA-256, from genesis:
// what someone without the key can do to a keyed chain.
void ResealPlain(const std::string& path) {
  auto d = ledger::Db::Open(path);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ledger::Db& db = **d;
  auto trig = db.Query("SELECT sql FROM sqlite_master WHERE name = 'seal_chain_no_update'");
  ASSERT_TRUE(trig.ok() && trig->size() == 1u);
  ASSERT_TRUE(db.Exec("DROP TRIGGER seal_chain_no_update").ok());
  auto chain = db.Query("SELECT seq, tbl, row_id FROM seal_chain ORDER BY seq");
  ASSERT_TRUE(chain.ok());
  std::string prev = "genesis";
  for (const auto& e : *chain) {
    const std::string tbl = AsText(e[1]);
    const int64_t row = ledger::AsInt(e[2]);
    auto cols = db.Query("SELECT name FROM pragma_table_info(?) ORDER BY cid", {tbl});
    auto stored = db.Query("SELECT * FROM " + tbl + " WHERE rowid = ?", {row});
    ASSERT_TRUE(cols.ok() && stored.ok() && stored->size() == 1u) << tbl << "#" << row;
    std::vector<std::string> names;
    for (const auto& c : *cols) names.push_back(AsText(c[0]));
    const std::string content = Sha256Hex(ledger::CanonicalRow(names, (*stored)[0]));
    const std::string seal = ledger::ChainSeal(prev, tbl, row, content);
    ASSERT_TRUE(
        db.Query("UPDATE seal_chain SET content_sha256 = ?, prev_seal = ?, seal = ?, alg = 'sha256' WHERE seq = ?",
                 {content, prev, seal, e[0]})
            .ok());
    prev = seal;
  }
  ASSERT_TRUE(db.Exec(AsText((*trig)[0][0])).ok());
}

const std::string kWithKey = std::string("VERITY_LEDGER_KEY=") + kKey + " ";

// Hole 5: with the key set, a chain re-sealed as plain SHA-256 by someone
// without the key is a FAIL, not a PASS.
TEST(SealKeyMeans, PlainResealOfAKeyedLedgerFailsUnderTheKey) {
  const std::string dir = TempDir("reseal"), db = dir + "/l.db";
  auto s = Shell(kWithKey + VerityBin() + " submit --json --ledger " + db + " --title keyed --predict 3.5 --base-cmd " +
                 Quote(Bench(dir, "base", 1000, 0.005, 1)) + " --head-cmd " +
                 Quote(Bench(dir, "head", 1035, 0.005, 2)) + " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  ASSERT_EQ(Verify(db, "", kWithKey).verdict, "PASS");
  Tamper(db, "UPDATE changes SET title = 'forged' WHERE id = 1");
  ResealPlain(db);
  auto v = Verify(db, "", kWithKey);
  EXPECT_EQ(v.verdict, "FAIL") << v.cmd.out;
  EXPECT_NE(v.cmd.out.find("first broken record: policy#1 (chain seq 1): sealed with plain sha256 while "
                           "VERITY_LEDGER_KEY is set"),
            std::string::npos)
      << v.cmd.out;
  // A ledger that was never keyed is a FAIL under a key as well: a key means every seal is keyed.
  const std::string plain = dir + "/plain.db";
  ASSERT_EQ(Submit(plain, "p", 3.5, Bench(dir, "b2", 1000, 0.005, 1), Bench(dir, "h2", 1035, 0.005, 2), Parity())
                .cmd.exit_code,
            0);
  EXPECT_EQ(Verify(plain).verdict, "PASS");
  EXPECT_EQ(Verify(plain, "", kWithKey).verdict, "FAIL");
}

// Hole 5: a write under a key never extends a plain chain; starting to key one
// is an explicit act, recorded and itself keyed.
TEST(SealKeyMeans, KeyedWriteRefusesAPlainChainUntilKeyingIsStarted) {
  const std::string dir = TempDir("start"), db = dir + "/l.db";
  auto s = Submit(db, "plain", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  auto plain = Verify(db);
  ASSERT_EQ(plain.verdict, "PASS");
  const std::string retract =
      VerityBin() + " retract 1 --ledger " + db + " --reason " + Quote("measured on a busy box");
  auto refused = Shell(kWithKey + retract);
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("seal chain is plain"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("verity ledger start-keying"), std::string::npos) << refused.err;
  EXPECT_EQ(Verify(db).tip, plain.tip) << "the refused write sealed nothing";
  // Starting needs the key, says what it covers, and is recorded.
  const std::string start =
      VerityBin() + " ledger start-keying --ledger " + db + " --by ops --reason " + Quote("keying");
  auto nokey = Shell(start);
  EXPECT_NE(nokey.exit_code, 0);
  EXPECT_NE(nokey.err.find("VERITY_LEDGER_KEY"), std::string::npos) << nokey.err;
  auto started = Shell(kWithKey + start);
  ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  EXPECT_NE(
      started.out.find("start-keying: " + std::to_string(plain.records) + " plain records up to tip " + plain.tip),
      std::string::npos)
      << started.out;
  EXPECT_EQ(Sql(db, "SELECT plain_records || ' ' || plain_tip || ' ' || by FROM seal_keyings"),
            std::to_string(plain.records) + " " + plain.tip + " ops");
  auto again = Shell(kWithKey + start);
  EXPECT_NE(again.exit_code, 0) << "keying starts once";
  auto k = Shell(kWithKey + retract);
  ASSERT_EQ(k.exit_code, 0) << k.out << k.err;
  auto keyed = Verify(db, "--expect-tip " + plain.tip, kWithKey);
  EXPECT_EQ(keyed.verdict, "PASS") << keyed.cmd.out;
  EXPECT_EQ(keyed.records, plain.records + 2) << "the keying record and the retraction";
  EXPECT_EQ(Sql(db, "SELECT count(*) FROM seal_chain WHERE alg = 'sha256'"), std::to_string(plain.records));
  auto no_key = Verify(db);
  EXPECT_EQ(no_key.verdict, "FAIL");
  EXPECT_NE(no_key.cmd.out.find("first broken record: seal_keyings#1"), std::string::npos) << no_key.cmd.out;
  // Whoever lacks the key cannot edit the plain part: the keyed seals anchor it.
  const std::string copy = dir + "/copy.db";
  ASSERT_EQ(Shell("sqlite3 " + db + " \".backup " + copy + "\"").exit_code, 0);
  Tamper(copy, "UPDATE changes SET title = 'forged' WHERE id = 1");
  ResealPlain(copy);
  EXPECT_EQ(Verify(copy, "", kWithKey).verdict, "FAIL");
}

// Hole 6: the storage class is sealed; a TEXT cell rewritten as a BLOB of the
// same bytes is a broken record, on a new ledger and on an old one.
TEST(SealTypes, TextRewrittenAsBlobIsABrokenRecord) {
  const std::string dir = TempDir("blob"), db = dir + "/l.db";
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  ASSERT_EQ(s.j.value("verdict", ""), "accepted") << s.cmd.out;
  Tamper(db, "UPDATE scores SET verdict = CAST(verdict AS BLOB) WHERE id = 1");
  ASSERT_EQ(Sql(db, "SELECT typeof(verdict) FROM scores WHERE id = 1"), "blob");
  auto v = Verify(db);
  EXPECT_EQ(v.verdict, "FAIL") << v.cmd.out;
  EXPECT_NE(v.cmd.out.find("first broken record: scores#1"), std::string::npos) << v.cmd.out;
  EXPECT_NE(v.cmd.out.find("stored values differ from what was sealed"), std::string::npos) << v.cmd.out;
  // A row sealed by a release before the storage class was sealed: caught too.
  const std::string old = Schema2Copy(dir);
  ASSERT_FALSE(old.empty());
  ASSERT_EQ(Verify(old).verdict, "PASS");
  Tamper(old, "UPDATE changes SET title = CAST(title AS BLOB) WHERE id = (SELECT min(id) FROM changes)");
  auto o = Verify(old);
  EXPECT_EQ(o.verdict, "FAIL") << o.cmd.out;
  EXPECT_NE(o.cmd.out.find("first broken record: changes#"), std::string::npos) << o.cmd.out;
  // The canonical text itself tells the classes apart.
  EXPECT_NE(ledger::CanonicalRow({"a"}, {Value(std::string("x"))}, "b"),
            ledger::CanonicalRow({"a"}, {Value(std::string("x"))}));
}

// Hole 10: a tampered record makes `report` and `show` refuse, naming it.
TEST(SealReaders, ReportAndShowRefuseALedgerThatFailsVerify) {
  const std::string dir = TempDir("readers"), db = dir + "/l.db";
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  ASSERT_EQ(Shell(VerityBin() + " show 1 --ledger " + db).exit_code, 0);
  Tamper(db, "UPDATE scores SET verdict = 'rejected-parity' WHERE id = 1");
  ASSERT_EQ(Verify(db).verdict, "FAIL");
  const std::string out = dir + "/CHANGELOG.md";
  auto r = Shell(VerityBin() + " report --ledger " + db + " --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("ledger verify FAILs: scores#1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "no changelog from a broken ledger";
  for (const char* flags : {"", " --json"}) {
    auto sh = Shell(VerityBin() + " show 1 --ledger " + db + std::string(flags));
    EXPECT_EQ(sh.exit_code, 1) << sh.out;
    EXPECT_EQ(sh.out.find("rejected-parity"), std::string::npos) << sh.out;
    EXPECT_NE(sh.err.find("ledger verify FAILs: scores#1"), std::string::npos) << sh.err;
  }
}

// Hole 10: verify checks the append-only triggers the migrations create.
TEST(SealReaders, VerifyFailsWhenAnAppendOnlyTriggerIsDroppedOrDefused) {
  const std::string dir = TempDir("trig"), db = dir + "/l.db";
  ASSERT_EQ(Shell(VerityBin() + " ledger migrate --ledger " + db).exit_code, 0);
  ASSERT_EQ(Verify(db).verdict, "PASS");
  const std::string all = dir + "/all.db", one = dir + "/one.db", defused = dir + "/defused.db";
  for (const auto& c : {all, one, defused}) ASSERT_EQ(Shell("cp " + db + " " + c).exit_code, 0);
  Sql(all, Sql(all, "SELECT group_concat('DROP TRIGGER ' || name, '; ') FROM sqlite_master WHERE type = 'trigger'"));
  Sql(one, "DROP TRIGGER scores_no_update");
  Sql(defused,
      "DROP TRIGGER samples_no_delete; CREATE TRIGGER samples_no_delete BEFORE DELETE ON samples BEGIN SELECT 1; END");
  for (const auto& [path, want] : {std::pair<std::string, std::string>{all, "trigger policy_no_update"},
                                   {one, "trigger scores_no_update"},
                                   {defused, "trigger samples_no_delete"}}) {
    auto v = Verify(path);
    EXPECT_EQ(v.verdict, "FAIL") << path << "\n" << v.cmd.out;
    EXPECT_NE(v.cmd.out.find("first broken record: " + want), std::string::npos) << v.cmd.out;
  }
}

// Hole 10: verify checks that schema_migrations holds exactly the migrations
// this verity knows; the other commands give a clear error, not a crash.
TEST(SealReaders, UnknownSchemaMigrationRowIsANamedFail) {
  const std::string dir = TempDir("mig"), db = dir + "/l.db";
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  for (const std::string row : {"0, 'x', 'y', 'z'", "99, '0099_later', 'y', 'z'"}) {
    const std::string copy = dir + "/copy.db";
    ASSERT_EQ(Shell("rm -f " + copy + " && sqlite3 " + db + " \".backup " + copy + "\"").exit_code, 0);
    Sql(copy, "INSERT INTO schema_migrations VALUES (" + row + ")");
    auto v = Verify(copy);
    EXPECT_EQ(v.verdict, "FAIL") << row << "\n" << v.cmd.out;
    EXPECT_NE(v.cmd.out.find("first broken record: schema_migrations#"), std::string::npos) << v.cmd.out;
    EXPECT_NE(v.cmd.out.find("no migration this verity knows"), std::string::npos) << v.cmd.out;
    for (const std::string cmd : {" show 1", " frontier", " history all", " ledger migrate"}) {
      auto r = Shell(VerityBin() + cmd + " --ledger " + copy);
      EXPECT_EQ(r.exit_code, 1) << cmd << " on " << row << ": " << r.out << r.err;
      EXPECT_NE(r.err.find("schema_migrations"), std::string::npos) << cmd << ": " << r.err;
    }
  }
}

// Issue 41, finding 1: verify covers the whole schema. sqlite_master's SQL for
// retractions_by_run made to lie (a partial index WHERE run_id<0, through
// PRAGMA writable_schema) changes no sealed cell, yet the frontier read through
// it ignores the retraction; an added index or view, and an index whose
// b-tree lacks a row (PRAGMA integrity_check), are named too. Every reader
// (show, frontier, history, drift, report) refuses such a ledger.
TEST(SealSchema, AnIndexWhoseStoredSqlLiesIsANamedFail) {
  const std::string dir = TempDir("schema"), db = dir + "/l.db";
  auto s = Submit(db, "t", 3.5, Bench(dir, "base", 1000, 0.005, 1), Bench(dir, "head", 1035, 0.005, 2), Parity());
  ASSERT_EQ(s.cmd.exit_code, 0) << s.cmd.err;
  ASSERT_EQ(s.j.value("verdict", ""), "accepted") << s.cmd.out;
  ASSERT_EQ(Shell(VerityBin() + " retract 1 --reason 'a stale build' --ledger " + db).exit_code, 0);
  const auto honest = Verify(db);
  ASSERT_EQ(honest.verdict, "PASS") << honest.cmd.out;
  EXPECT_EQ(std::to_string(honest.schema),
            Sql(db, "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%'"))
      << "every object in the schema compared";
  EXPECT_EQ(honest.check, "integrity_check=ran");
  const std::string lie =
      "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX retractions_by_run ON "
      "retractions(run_id) WHERE run_id<0' WHERE name = 'retractions_by_run'";
  const std::string lying = dir + "/lying.db", added = dir + "/added.db", view = dir + "/view.db";
  for (const auto& c : {lying, added, view}) ASSERT_EQ(Shell("cp " + db + " " + c).exit_code, 0);
  Sql(lying, lie);
  Sql(added, "CREATE INDEX scores_cheat ON scores(verdict) WHERE verdict = 'accepted'");
  Sql(view, "CREATE VIEW verdicts AS SELECT verdict FROM scores");
  for (const auto& [path, want] : {std::pair<std::string, std::string>{lying, "schema: index retractions_by_run"},
                                   {added, "schema: index scores_cheat"},
                                   {view, "schema: view verdicts"}}) {
    auto v = Verify(path);
    EXPECT_EQ(v.verdict, "FAIL") << path << "\n" << v.cmd.out;
    EXPECT_EQ(v.tip, honest.tip) << "no sealed record changed";
    EXPECT_NE(v.cmd.out.find("first broken record: " + want), std::string::npos) << v.cmd.out;
  }
  for (const std::string& cmd :
       std::vector<std::string>{" show 1", " frontier", " history all", " drift", " report --out " + dir + "/c.md"}) {
    auto r = Shell(VerityBin() + cmd + " --ledger " + lying);
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("ledger verify FAILs: schema: index retractions_by_run"), std::string::npos)
        << cmd << ": " << r.err;
  }
  // The definition restored, but a retraction written while it lied is missing
  // from the index's b-tree: the text matches, integrity_check does not.
  const std::string stale = dir + "/stale.db";
  auto t = Submit(stale, "t", 3.5, Bench(dir, "base2", 1000, 0.005, 1), Bench(dir, "head2", 1035, 0.005, 2), Parity());
  ASSERT_EQ(t.cmd.exit_code, 0) << t.cmd.err;
  Sql(stale, lie);
  ASSERT_EQ(Shell(VerityBin() + " retract 1 --reason 'a stale build' --ledger " + stale).exit_code, 0);
  Sql(stale,
      "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX retractions_by_run ON "
      "retractions(run_id)' WHERE name = 'retractions_by_run'");
  auto v = Verify(stale);
  EXPECT_EQ(v.verdict, "FAIL") << v.cmd.out;
  EXPECT_NE(v.cmd.out.find("integrity check fails"), std::string::npos) << v.cmd.out;
  EXPECT_EQ(v.check, "integrity_check=failed");
}

}  // namespace
}  // namespace verity::test
