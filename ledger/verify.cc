// Verifying the seal chain: every sealed record recomputed from what is stored,
// plain SHA-256 seals and keyed (HMAC-SHA256) ones, on a read-only connection.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "base/sha256.h"
#include "ledger/ledger.h"
#include "ledger/migrations.h"

namespace verity::ledger {
namespace {

// Lower-cased `hex` when it is 16..64 hex digits, else nullopt.
std::optional<std::string> NormalizeSealPrefix(const std::string& hex) {
  if (hex.size() < 16 || hex.size() > 64) return std::nullopt;
  std::string out;
  for (char c : hex) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// "" when schema_migrations holds exactly this binary's first migrations, in
// order (names and SQL alike), else what differs, named. Sets `schema` to the
// last one's version.
Result<std::string> CheckMigrationTable(Db& d, int& schema) {
  schema = 0;
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT version, name, sha256 FROM schema_migrations ORDER BY version"));
  const int known = EmbeddedMigrations().empty() ? 0 : EmbeddedMigrations().back().version;
  size_t applied = 0;
  for (const auto& row : rows) {
    const int v = static_cast<int>(AsInt(row[0]));
    const std::string rec = "schema_migrations#" + std::to_string(v) + " (" + AsText(row[1]) + ")";
    const Migration* m = FindMigration(v);
    if (!m)
      return rec + ": no migration this verity knows (it knows 1.." + std::to_string(known) +
             "): a newer verity's ledger, or an edited migration table";
    if (AsText(row[1]) != m->name || AsText(row[2]) != Sha256Hex(m->sql))
      return rec + ": differs from migration " + m->name + " built into this verity (name or sha256)";
    // Applied in order, none skipped: the k-th row is this binary's k-th migration.
    const Migration& next = EmbeddedMigrations()[applied++];
    if (v != next.version) return rec + ": applied without migration " + next.name + " before it";
    schema = v;
  }
  return std::string();
}

// The first name `objects` holds twice, or "": verify keys objects by name,
// and a second object under an expected one's name would hide behind it
// (PostgreSQL names a trigger, rule or policy per table).
std::string Duplicate(const std::vector<TriggerDef>& objects) {
  std::set<std::string> seen;
  for (const auto& t : objects)
    if (!seen.insert(t.name).second) return t.name;
  return std::string();
}

// "<name> on <table>", or the name alone for an object of no table (a function).
std::string Named(const std::string& name, const std::string& table) {
  return table.empty() ? name : name + " on " + table;
}

// "" when the ledger's triggers are exactly those its migrations create (the
// append-only no_update/no_delete of every sealed table and of the chain), else
// the first that is missing, redefined or extra. The expected set is what the
// same migrations create in an empty in-memory database.
Result<std::string> CheckTriggers(Db& d, int schema) {
  std::vector<std::string> applied;
  for (const Migration& m : EmbeddedMigrations())
    if (m.version <= schema) applied.push_back(m.sql);
  VERITY_ASSIGN_OR_RETURN(auto want, d.ExpectedTriggers(applied));
  VERITY_ASSIGN_OR_RETURN(auto have, d.Triggers());
  const std::string twice = Duplicate(have);
  if (!twice.empty()) return "trigger " + twice + ": two triggers have this name (one hides behind the other)";
  std::map<std::string, std::pair<std::string, std::string>> found;
  for (const auto& t : have) found[t.name] = {t.table, t.definition};
  for (const auto& t : want) {
    const std::string rec = "trigger " + t.name + " on " + t.table;
    auto it = found.find(t.name);
    if (it == found.end()) return rec + ": missing (dropped), so the table is no longer append-only";
    if (it->second != std::make_pair(t.table, t.definition))
      return rec + ": differs from the one the migrations create (redefined)";
    found.erase(it);
  }
  if (!found.empty())
    return "trigger " + found.begin()->first + " on " + found.begin()->second.first +
           ": not one the migrations create (added behind the ledger's back)";
  return std::string();
}

// "" when the ledger's schema is exactly what its migrations create -- every
// table, index, trigger and view, by name and definition (a partial index
// whose stored SQL lies, made with PRAGMA writable_schema, changes no sealed
// cell and every answer read through it) -- and the store's own consistency
// check passes (SQLite: integrity_check, which finds an index that does not
// hold its table's rows); else the first object missing, redefined or extra.
Result<std::string> CheckSchema(Db& d, int schema, int64_t& compared) {
  std::vector<std::string> applied;
  for (const Migration& m : EmbeddedMigrations())
    if (m.version <= schema) applied.push_back(m.sql);
  VERITY_ASSIGN_OR_RETURN(auto want, d.ExpectedSchemaObjects(applied));
  VERITY_ASSIGN_OR_RETURN(auto have, d.SchemaObjects());
  const std::string twice = Duplicate(have);
  if (!twice.empty()) return "schema: two objects are named " + twice + " (one hides behind the other)";
  std::map<std::string, std::pair<std::string, std::string>> found;
  for (const auto& t : have) found[t.name] = {t.table, t.definition};
  for (const auto& t : want) {
    const std::string rec = "schema: " + Named(t.name, t.table);
    auto it = found.find(t.name);
    if (it == found.end()) return rec + ": missing (dropped)";
    if (it->second != std::make_pair(t.table, t.definition))
      return rec + ": its definition differs from the one the migrations create (redefined: stored SQL '" +
             it->second.second + "')";
    found.erase(it);
    compared++;
  }
  // A ledger no migration was applied to holds no record a reader trusts (an
  // empty chain and the migration table are all `verify` needs to name its tip).
  if (!found.empty() && schema > 0)
    return "schema: " + Named(found.begin()->first, found.begin()->second.first) +
           ": not one the migrations create (added behind the ledger's back)";
  VERITY_ASSIGN_OR_RETURN(const std::string damage, d.IntegrityProblem());
  if (!damage.empty()) return "schema: the store's integrity check fails: " + damage;
  return std::string();
}

// The expected tip as a lower-cased seal prefix; "" when there is none to
// look for ("genesis", an empty ledger's tip, is in every chain).
Result<std::string> ExpectedTipPrefix(const std::string& expect_tip) {
  std::string want;
  if (!expect_tip.empty() && expect_tip != "genesis") {
    auto w = NormalizeSealPrefix(expect_tip);
    if (!w)
      return Status::Error("--expect-tip '" + expect_tip +
                           "' is not a seal: give the 64 hex chars `ledger verify` printed as tip=, or a prefix of "
                           "at least 16 of them");
    want = *w;
  }
  return want;
}

// What Verify knows walking the chain, record by record.
struct ChainWalk {
  const std::string& key;   // the seal key ("" = none)
  const std::string& want;  // the expected tip's prefix ("" = none)
  bool has_alg = false;     // schema 4 and later; older chains are all plain SHA-256
  std::map<std::string, std::vector<std::string>> colnames = {};
  std::map<std::string, std::string> keys = {};  // the column naming a row: SQLite's rowid
  std::string prev = "genesis";
  std::set<std::pair<std::string, int64_t>> sealed_once = {};
  std::string needs_key = {};       // the first keyed record, when there is no key to check it
  int64_t verified_before_key = 0;  // records fully verified before it
  int64_t matches = 0;
  std::string first_plain = {};       // the first plain record
  std::vector<int64_t> keyings = {};  // seal_keyings rows sealed with the key
};

// The chain's records in order (with each seal's algorithm when it has the column).
Result<std::vector<Row>> ReadChain(Db& d, ChainWalk& w) {
  VERITY_ASSIGN_OR_RETURN(auto chain_cols, d.Columns("seal_chain"));
  for (const Column& c : chain_cols) w.has_alg = w.has_alg || c.name == "alg";
  return d.Query(std::string("SELECT seq, tbl, row_id, content_sha256, prev_seal, seal") + (w.has_alg ? ", alg" : "") +
                 " FROM seal_chain ORDER BY seq");
}

// Every sealed table's column names and key column (tables this ledger has).
Status ReadSealedTables(Db& d, ChainWalk& w) {
  for (const auto& t : SealedTables()) {
    VERITY_ASSIGN_OR_RETURN(auto info, d.Columns(t));
    if (info.empty()) continue;  // a table of a later schema than this ledger's
    for (const auto& c : info) w.colnames[t].push_back(c.name);
    VERITY_ASSIGN_OR_RETURN(w.keys[t], d.KeyColumn(t));
  }
  return OkStatus();
}

// "" when the chain record `e` holds (its link, its record's content, its
// seal), counted into `r`; else why it is broken.
Result<std::string> CheckRecord(Db& d, ChainWalk& w, const Row& e, VerifyReport& r) {
  const int64_t seq = AsInt(e[0]);
  const std::string tbl = AsText(e[1]);
  const int64_t row_id = AsInt(e[2]);
  const std::string alg = w.has_alg ? AsText(e[6]) : std::string(kSealSha256);
  const std::string rec = tbl + "#" + std::to_string(row_id) + " (chain seq " + std::to_string(seq) + ")";
  if (!w.colnames.count(tbl)) return rec + ": names an unknown table";
  if (!w.sealed_once.insert({tbl, row_id}).second) return rec + ": record sealed twice";
  if (AsText(e[4]) != w.prev) return rec + ": chain link does not follow the previous seal";
  std::vector<std::string> classes;
  VERITY_ASSIGN_OR_RETURN(auto rows,
                          d.QueryStored("SELECT * FROM " + tbl + " WHERE " + w.keys[tbl] + " = ?", {row_id}, classes));
  if (rows.empty()) return rec + ": the sealed record is gone (deleted)";
  const std::string content = Sha256Hex(CanonicalRow(w.colnames[tbl], rows[0], classes[0]));
  if (content != AsText(e[3])) return rec + ": stored values differ from what was sealed";
  if (alg == kSealSha256) {
    // Once keyed, always keyed: a plain seal after a keyed one is what a forger
    // without the key would have to write.
    if (r.keyed > 0)
      return rec +
             ": sealed with plain sha256 after keyed (hmac-sha256) seals: the chain was extended "
             "without the key";
    if (ChainSeal(w.prev, tbl, row_id, content) != AsText(e[5])) return rec + ": seal does not recompute";
    if (r.plain_records++ == 0) w.first_plain = rec;
    r.plain_tip = AsText(e[5]);
  } else if (alg == kSealHmacSha256) {
    if (tbl == "seal_keyings") w.keyings.push_back(row_id);
    if (r.keyed++ == 0 && w.key.empty()) {
      w.needs_key = rec;
      w.verified_before_key = r.records;
    }
    // Without the key only the content and the links can be checked; the
    // verdict is FAIL below, after any plainer breakage is named.
    if (!w.key.empty() && KeyedChainSeal(w.key, w.prev, tbl, row_id, content) != AsText(e[5]))
      return rec + ": keyed seal does not recompute under VERITY_LEDGER_KEY (wrong key, or forged)";
  } else {
    return rec + ": unknown seal algorithm '" + alg + "'";
  }
  w.prev = AsText(e[5]);
  r.records++;
  if (!w.want.empty() && w.prev.compare(0, w.want.size(), w.want) == 0) {
    w.matches++;
    r.expected_tip_seal = w.prev;
    r.expected_tip_record = r.records;
  }
  return std::string();
}

// The first row of a sealed table the chain does not name, or "".
Result<std::string> UnsealedRecord(Db& d, ChainWalk& w) {
  std::map<std::string, int64_t> sealed_rows;  // per table: distinct rows the chain names, each found above
  for (const auto& [tbl, row_id] : w.sealed_once) sealed_rows[tbl]++;
  for (const auto& t : SealedTables()) {
    if (!w.colnames.count(t)) continue;
    // As many rows as sealed ones means every row is sealed (each sealed one was
    // found, once): only a table with more is searched for the row too many,
    // which keeps verify linear on PostgreSQL too (its NOT IN over a big chain
    // is not hashed within the default work_mem).
    VERITY_ASSIGN_OR_RETURN(auto count, d.Query("SELECT count(*) FROM " + t));
    if (AsInt(count[0][0]) == sealed_rows[t]) continue;
    VERITY_ASSIGN_OR_RETURN(auto extra, d.Query("SELECT min(" + w.keys[t] + ") FROM " + t + " WHERE " + w.keys[t] +
                                                    " NOT IN (SELECT row_id FROM seal_chain WHERE tbl = ?)",
                                                {t}));
    if (!extra.empty() && !IsNull(extra[0][0]))
      return t + "#" + std::to_string(AsInt(extra[0][0])) +
             ": record was never sealed (added behind the ledger's back)";
  }
  return std::string();
}

// "" when the migration table, the triggers and the whole schema are what this
// verity's migrations make (`compared` counts the objects), else the first difference.
Result<std::string> SchemaProblem(Db& d, int64_t& compared) {
  int schema = 0;
  VERITY_ASSIGN_OR_RETURN(const std::string migrations, CheckMigrationTable(d, schema));
  if (!migrations.empty()) return migrations;
  VERITY_ASSIGN_OR_RETURN(const std::string triggers, CheckTriggers(d, schema));
  if (!triggers.empty()) return triggers;
  return CheckSchema(d, schema, compared);
}

}  // namespace

Result<std::unique_ptr<Ledger>> Ledger::OpenForVerify(const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(auto db, Db::OpenReadOnly(path));
  VERITY_ASSIGN_OR_RETURN(const bool has_migrations, db->HasTable("schema_migrations"));
  VERITY_ASSIGN_OR_RETURN(const bool has_chain, db->HasTable("seal_chain"));
  if (!has_migrations || !has_chain)
    return Status::Error(path + ": not a verity ledger (no schema_migrations or seal_chain table)");
  VERITY_ASSIGN_OR_RETURN(auto version, db->Query("SELECT max(version) FROM schema_migrations"));
  std::unique_ptr<Ledger> l(new Ledger(std::move(db)));
  l->schema_version_ = version.empty() ? 0 : static_cast<int>(AsInt(version[0][0]));
  return l;
}

Result<std::string> Ledger::Tip() {
  VERITY_ASSIGN_OR_RETURN(auto last, db_->Query("SELECT seal FROM seal_chain ORDER BY seq DESC LIMIT 1"));
  return last.empty() ? std::string("genesis") : AsText(last[0][0]);
}

Result<VerifyReport> Ledger::Verify(const std::string& expect_tip) {
  VerifyReport r;
  Db& d = *db_;
  VERITY_ASSIGN_OR_RETURN(const std::string want, ExpectedTipPrefix(expect_tip));
  ChainWalk w{.key = d.seal_key(), .want = want};
  VERITY_ASSIGN_OR_RETURN(auto chain, ReadChain(d, w));
  if (!chain.empty()) r.tip = AsText(chain.back()[5]);
  VERITY_RETURN_IF_ERROR(ReadSealedTables(d, w));
  auto broken = [&](const std::string& what) {
    r.ok = false;
    r.first_broken = what;
    return r;
  };
  for (const auto& e : chain) {
    VERITY_ASSIGN_OR_RETURN(const std::string bad, CheckRecord(d, w, e, r));
    if (!bad.empty()) return broken(bad);
  }
  VERITY_ASSIGN_OR_RETURN(const std::string unsealed, UnsealedRecord(d, w));
  if (!unsealed.empty()) return broken(unsealed);
  if (!w.needs_key.empty()) {
    r.records = w.verified_before_key;
    return broken(w.needs_key + ": sealed with a key (hmac-sha256): set VERITY_LEDGER_KEY to verify it");
  }
  VERITY_ASSIGN_OR_RETURN(const std::string schema, SchemaProblem(d, r.schema_objects));
  if (!schema.empty()) return broken(schema);
  if (!w.key.empty() && r.plain_records > 0) {
    VERITY_ASSIGN_OR_RETURN(const bool named, PlainRecordsNamed(w.keyings, r.plain_records, r.plain_tip));
    if (!named) {
      r.needs_keying = true;
      return broken(w.first_plain +
                    ": sealed with plain sha256 while VERITY_LEDGER_KEY is set, and no keyed "
                    "`ledger start-keying` record names the " +
                    std::to_string(r.plain_records) + " plain records (up to tip " + r.plain_tip +
                    "): under a key every seal is keyed");
    }
  }
  if (w.matches > 1)
    return Status::Error("--expect-tip " + expect_tip + " matches " + std::to_string(w.matches) +
                         " seals; give more of its hex digits");
  if (!want.empty() && w.matches == 0) {
    r.ok = false;
    r.expected_tip_missing = true;
    return r;
  }
  if (expect_tip == "genesis") r.expected_tip_seal = "genesis";
  r.ok = true;
  return r;
}

Result<bool> Ledger::PlainRecordsNamed(const std::vector<int64_t>& keyings, int64_t plain_records,
                                       const std::string& plain_tip) {
  for (int64_t id : keyings) {
    VERITY_ASSIGN_OR_RETURN(auto k, db_->Query("SELECT plain_records, plain_tip FROM seal_keyings WHERE id = ?", {id}));
    if (!k.empty() && AsInt(k[0][0]) == plain_records && AsText(k[0][1]) == plain_tip) return true;
  }
  return false;
}

Status Ledger::RequireVerified(const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(const VerifyReport r, Verify(""));
  if (r.ok) return OkStatus();
  return Status::Error(db_->path() + ": ledger verify FAILs: " + r.first_broken + "; " + what +
                       " refuses to read from a ledger that does not verify (see `verity ledger verify`)");
}

}  // namespace verity::ledger
