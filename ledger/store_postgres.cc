// The PostgreSQL store: one ledger many bench boxes write to, over libpq. The
// only file that touches libpq. Values travel as text (parameters typed by the
// server from their context) and come back typed by the result's column types,
// so a row reads the same as SQLite's and seals the same.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "ledger/sql_dialect.h"
#include "ledger/store.h"

namespace verity::ledger {
namespace {

// pg_type OIDs of the result types the ledger reads.
constexpr Oid kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kOid = 26, kFloat4 = 700, kFloat8 = 701,
              kNumeric = 1700;
// pg_advisory_xact_lock's key for "one writer at a time" ("veri", 1).
constexpr const char* kWriterLock = "SELECT pg_advisory_xact_lock(1986359913, 1)";
// How long a lost connection is retried at a transaction boundary (a restart).
constexpr int kReconnectSeconds = 60;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

void IgnoreNotice(void*, const char*) {}
bool IsNullValue(const Value& v) {
  return std::holds_alternative<std::monostate>(v);
}  // "already exists, skipping" and the like

// PostgreSQL text cannot hold a NUL byte, and a ledger keeps every byte a
// command printed: in the database \0 is kept as \x01\x02 and \x01 as \x01\x01
// (one-to-one, so equal strings stay equal), and read back as they were.
std::string EncodeNul(const std::string& s) {
  if (s.find_first_of(std::string("\0\x01", 2)) == std::string::npos) return s;
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == '\0') out += "\x01\x02";
    else if (c == '\x01') out += "\x01\x01";
    else out += c;
  }
  return out;
}

std::string DecodeNul(const char* v, size_t n) {
  std::string out(v, n);
  if (out.find('\x01') == std::string::npos) return out;
  std::string dec;
  for (size_t i = 0; i < n; i++) {
    if (v[i] == '\x01' && i + 1 < n && (v[i + 1] == '\x01' || v[i + 1] == '\x02')) {
      dec += v[++i] == '\x02' ? '\0' : '\x01';
    } else {
      dec += v[i];  // not written by this store (edited by hand): kept as stored
    }
  }
  return dec;
}

std::string Trimmed(const char* m) {
  std::string s = m ? m : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Not a member of an extension: what an extension installs (amcheck's
// functions, say) is the extension's, not the ledger's.
std::string OwnObject(const std::string& catalog, const std::string& oid) {
  return "NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = '" + catalog + "'::regclass AND e.objid = " + oid +
         " AND e.deptype = 'e')";
}

// What a table is beyond its rows: columns (type, NOT NULL, default,
// identity, generated, collation), constraints, row-level security,
// persistence (a temporary table counts as permanent: verify's replay makes
// them), inheritance, and FK triggers not enabled.
const char* kTablesSql =
    "SELECT 'table', c.relname::text, c.relname::text, 'kind=' || c.relkind::text || ' persistence=' || "
    "CASE c.relpersistence WHEN 't' THEN 'p' ELSE c.relpersistence::text END || ' rls=' || c.relrowsecurity::text || "
    "' force_rls=' || c.relforcerowsecurity::text || ' columns=(' || coalesce((SELECT string_agg(format('%I %s', "
    "a.attname, format_type(a.atttypid, a.atttypmod)) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END || "
    "coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' "
    "|| a.attidentity::text ELSE '' END || CASE WHEN a.attgenerated <> '' THEN ' GENERATED ' || a.attgenerated::text "
    "ELSE '' END || CASE WHEN a.attcollation <> t.typcollation THEN ' COLLATE ' || a.attcollation::regcollation::text "
    "ELSE '' END, ', ' ORDER BY a.attnum) FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN "
    "pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT "
    "a.attisdropped), '') || ') constraints=(' || coalesce((SELECT string_agg(format('%I %s', o.conname, "
    "pg_get_constraintdef(o.oid)), '; ' ORDER BY o.conname) FROM pg_constraint o WHERE o.conrelid = c.oid), '') || "
    "') inherits=(' || coalesce((SELECT string_agg(i.inhparent::regclass::text, ', ' ORDER BY i.inhseqno) FROM "
    "pg_inherits i WHERE i.inhrelid = c.oid), '') || ') children=' || (SELECT count(*) FROM pg_inherits i WHERE "
    "i.inhparent = c.oid)::text || ' internal_triggers_not_enabled=' || (SELECT count(*) FROM pg_trigger g WHERE "
    "g.tgrelid = c.oid AND g.tgisinternal AND g.tgenabled <> 'O')::text FROM pg_class c JOIN pg_namespace n ON n.oid "
    "= c.relnamespace AND n.nspname = ?1 WHERE c.relkind IN ('r', 'p', 'f')";

// Each reads one kind of object of the schema named ?1 as (kind, name,
// table, definition): what a reader's answers depend on.
std::vector<std::string> CatalogQueries() {
  std::vector<std::string> q = {
      kTablesSql,
      // An index is its definition and whether the planner may use it.
      "SELECT 'index', c.relname::text, t.relname::text, pg_get_indexdef(c.oid) || ' valid=' || i.indisvalid::text || "
      "' ready=' || i.indisready::text || ' live=' || i.indislive::text FROM pg_index i JOIN pg_class c ON c.oid = "
      "i.indexrelid JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace AND "
      "n.nspname = ?1 WHERE " +
          OwnObject("pg_class", "c.oid"),
      "SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'materialized view' END, c.relname::text, c.relname::text, "
      "pg_get_viewdef(c.oid) || ' options=' || coalesce(array_to_string(c.reloptions, ','), '') FROM pg_class c JOIN "
      "pg_namespace n ON n.oid = c.relnamespace AND n.nspname = ?1 WHERE c.relkind IN ('v', 'm') AND " +
          OwnObject("pg_class", "c.oid"),
      "SELECT 'relation', c.relname::text, c.relname::text, 'kind=' || c.relkind::text FROM pg_class c JOIN "
      "pg_namespace n ON n.oid = c.relnamespace AND n.nspname = ?1 WHERE c.relkind NOT IN ('r', 'p', 'f', 'i', 'I', "
      "'v', 'm') AND " +
          OwnObject("pg_class", "c.oid"),
      // A trigger is when it fires, what it calls, and whether it is enabled.
      "SELECT 'trigger', g.tgname::text, c.relname::text, pg_get_triggerdef(g.oid) || ' enabled=' || g.tgenabled::text "
      "FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace AND "
      "n.nspname = ?1 WHERE NOT g.tgisinternal",
      "SELECT 'rule', r.rulename::text, c.relname::text, pg_get_ruledef(r.oid) || ' enabled=' || r.ev_enabled::text "
      "FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace AND "
      "n.nspname = ?1 WHERE r.rulename <> '_RETURN'",
      "SELECT 'policy', p.polname::text, c.relname::text, format('%s %s to %s using (%s) with check (%s)', CASE WHEN "
      "p.polpermissive THEN 'permissive' ELSE 'restrictive' END, p.polcmd, p.polroles::regrole[]::text, "
      "pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)) FROM pg_policy p JOIN pg_class c "
      "ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = ?1",
      // A function by its arguments (overloads are distinct objects); an
      // aggregate, which pg_get_functiondef refuses, by its parts.
      "SELECT CASE p.prokind WHEN 'a' THEN 'aggregate' WHEN 'p' THEN 'procedure' ELSE 'function' END, p.proname || "
      "'(' || pg_get_function_identity_arguments(p.oid) || ')', '', CASE WHEN p.prokind = 'a' THEN (SELECT "
      "format('transition %s state %s final %s', a.aggtransfn::regproc, format_type(a.aggtranstype, NULL), "
      "a.aggfinalfn::regproc) FROM pg_aggregate a WHERE a.aggfnoid = p.oid) ELSE pg_get_functiondef(p.oid) END FROM "
      "pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = ?1 WHERE " +
          OwnObject("pg_proc", "p.oid"),
      "SELECT 'operator', o.oprname || '(' || format_type(o.oprleft, NULL) || ', ' || format_type(o.oprright, NULL) || "
      "')', '', 'function ' || o.oprcode::regproc::text FROM pg_operator o JOIN pg_namespace n ON n.oid = "
      "o.oprnamespace AND n.nspname = ?1 WHERE " +
          OwnObject("pg_operator", "o.oid"),
      // Types but a table's row type and the array type every type gets.
      "SELECT 'type', t.typname::text, '', 'kind=' || t.typtype::text || ' base=' || format_type(t.typbasetype, NULL) "
      "FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace AND n.nspname = ?1 WHERE t.typrelid = 0 AND NOT "
      "EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid) AND " +
          OwnObject("pg_type", "t.oid")};
  // Other objects a schema can hold, by name: none is the ledger's.
  const char* named[][4] = {{"collation", "pg_collation", "collname", "collnamespace"},
                            {"conversion", "pg_conversion", "conname", "connamespace"},
                            {"operator class", "pg_opclass", "opcname", "opcnamespace"},
                            {"operator family", "pg_opfamily", "opfname", "opfnamespace"},
                            {"statistics", "pg_statistic_ext", "stxname", "stxnamespace"},
                            {"text search configuration", "pg_ts_config", "cfgname", "cfgnamespace"},
                            {"text search dictionary", "pg_ts_dict", "dictname", "dictnamespace"},
                            {"text search parser", "pg_ts_parser", "prsname", "prsnamespace"},
                            {"text search template", "pg_ts_template", "tmplname", "tmplnamespace"}};
  for (const auto& k : named)
    q.push_back(std::string("SELECT '") + k[0] + "', x." + k[2] + "::text, '', '' FROM " + k[1] +
                " x JOIN pg_namespace n ON n.oid = x." + k[3] + " AND n.nspname = ?1 WHERE " +
                OwnObject(k[1], "x.oid"));
  return q;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '"'; }

// `def` without the schema qualifier `nsp.` (`nsp` as quote_ident writes it),
// outside string literals: the ledger's schema and verify's pg_temp_N name
// the same objects.
std::string Unqualified(const std::string& def, const std::string& nsp) {
  const std::string prefix = nsp + ".";
  std::string out;
  bool literal = false;
  for (size_t i = 0; i < def.size();) {
    if (def[i] == '\'') literal = !literal;  // a doubled '' toggles twice
    if (!literal && def.compare(i, prefix.size(), prefix) == 0 && (i == 0 || !IsIdentChar(def[i - 1]))) {
      i += prefix.size();
      continue;
    }
    out += def[i++];
  }
  return out;
}

class PostgresStore : public Store {
 public:
  ~PostgresStore() override {
    if (conn_) PQfinish(conn_);
  }

  Status Open(const std::string& url, bool read_only) {
    url_ = url;
    name_ = RedactedLedgerName(url);
    read_only_ = read_only;
    VERITY_RETURN_IF_ERROR(Connect());
    return CheckDatabase();
  }

  const std::string& name() const override { return name_; }
  bool is_postgres() const override { return true; }

  Status Exec(const std::string& sql) override {
    const std::string pg = dialect::ToPostgres(sql);
    return Retrying([&]() -> Status {
      PgResult r(PQexec(conn_, pg.c_str()));
      return Check(r.get(), sql);
    });
  }

  // Runs one statement with `args` (retrying once over a new connection).
  Result<PgResult> Execute(const std::string& sql, const std::vector<Value>& args) {
    std::vector<std::string> texts(args.size());
    std::vector<const char*> params(args.size(), nullptr);
    for (size_t i = 0; i < args.size(); i++) {
      VERITY_ASSIGN_OR_RETURN(bool null, ParamText(args[i], texts[i]));
      if (!null) params[i] = texts[i].c_str();
    }
    PgResult res;
    VERITY_RETURN_IF_ERROR(Retrying([&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(const std::string stmt, Prepared(sql));
      res.reset(
          PQexecPrepared(conn_, stmt.c_str(), static_cast<int>(params.size()), params.data(), nullptr, nullptr, 0));
      return Check(res.get(), sql);
    }));
    return res;
  }

  Result<std::vector<Row>> Run(const std::string& sql, const std::vector<Value>& args,
                               std::vector<std::string>* classes) override {
    VERITY_ASSIGN_OR_RETURN(PgResult res, Execute(sql, args));
    std::vector<Row> rows;
    const int n = PQntuples(res.get());
    rows.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
      std::string cls;
      rows.emplace_back();
      ReadInto(res.get(), i, rows.back(), classes ? &cls : nullptr);
      if (classes) classes->push_back(std::move(cls));
    }
    return rows;
  }

  // libpq hands over the whole result at once; the rows are read from it one
  // at a time into one Row rather than copied into a vector of them.
  Status ForEachRow(const std::string& sql, const std::vector<Value>& args,
                    const std::function<Status(const Row&)>& row) override {
    VERITY_ASSIGN_OR_RETURN(PgResult res, Execute(sql, args));
    Row r;
    const int n = PQntuples(res.get());
    for (int i = 0; i < n; i++) {
      ReadInto(res.get(), i, r, nullptr);
      VERITY_RETURN_IF_ERROR(row(r));
    }
    return OkStatus();
  }

  Status Begin(bool write) override {
    if (PQstatus(conn_) != CONNECTION_OK) VERITY_RETURN_IF_ERROR(Reconnect());
    VERITY_RETURN_IF_ERROR(Exec(write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ"));
    in_txn_ = true;
    // One writer at a time, as SQLite's BEGIN IMMEDIATE: the chain's last seal
    // and every next id are read and extended under this lock.
    if (write) {
      Status s = Exec(kWriterLock);
      if (!s.ok()) Rollback();
      return s;
    }
    return OkStatus();
  }

  Status Commit() override {
    PgResult r(PQexec(conn_, "COMMIT"));
    Status s = Check(r.get(), "COMMIT");
    in_txn_ = false;
    if (!s.ok() && PQstatus(conn_) != CONNECTION_OK)
      return Status::Error(s.message() +
                           " (the connection was lost at COMMIT: whether the server kept this "
                           "transaction is unknown; `verity ledger verify` shows what it holds)");
    return s;
  }

  void Rollback() override {
    if (PQstatus(conn_) == CONNECTION_OK) PgResult r(PQexec(conn_, "ROLLBACK"));
    in_txn_ = false;
  }

  Result<int64_t> Insert(const std::string& table, const std::string& key,
                         const std::vector<std::pair<std::string, Value>>& cols) override {
    std::string names = key, marks;
    std::vector<Value> args;
    std::optional<Value> given;
    for (const auto& [name, v] : cols) {
      if (name == key) {
        if (!IsNullValue(v)) given = v;
        continue;
      }
      names += ", " + name;
      marks += ", ?";
      args.push_back(v);
    }
    // SQLite's rule for an INTEGER PRIMARY KEY left out: one past the largest
    // (read under the writer lock). A sequence would skip numbers after a
    // rollback, and the seal hashes the id.
    std::string id = "(SELECT coalesce(max(" + key + "), 0) + 1 FROM " + table + ")";
    if (given) {
      id = "?";
      args.insert(args.begin(), *given);
    }
    VERITY_ASSIGN_OR_RETURN(
        auto rows,
        Run("INSERT INTO " + table + " (" + names + ") VALUES (" + id + marks + ") RETURNING " + key, args, nullptr));
    return std::get<int64_t>(rows.at(0).at(0));
  }

  Result<bool> HasTable(const std::string& table) override {
    VERITY_ASSIGN_OR_RETURN(auto rows, Run("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                           "WHERE n.nspname = current_schema() AND c.relname = ? AND c.relkind = 'r'",
                                           {table}, nullptr));
    return !rows.empty();
  }

  Result<std::vector<Column>> Columns(const std::string& table) override {
    VERITY_ASSIGN_OR_RETURN(auto rows,
                            Run("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                "table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                                {table}, nullptr));
    std::vector<Column> out;
    for (const auto& r : rows) out.push_back({std::get<std::string>(r[0]), SqliteType(std::get<std::string>(r[1]))});
    return out;
  }

  Result<std::string> KeyColumn(const std::string& table) override {
    // Every sealed table's first column is its INTEGER PRIMARY KEY (SQLite's rowid).
    VERITY_ASSIGN_OR_RETURN(auto cols, Columns(table));
    if (cols.empty()) return Status::Error(name_ + ": no table " + table);
    return cols[0].name;
  }

  Result<std::vector<TriggerDef>> Triggers() override {
    VERITY_ASSIGN_OR_RETURN(
        auto rows,
        Run("SELECT t.tgname::text, c.relname::text, t.tgtype::int8, t.tgenabled::text, p.proname::text, "
            "l.lanname::text, p.prosrc FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN "
            "pg_namespace n ON n.oid = c.relnamespace JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_language "
            "l ON l.oid = p.prolang WHERE NOT t.tgisinternal AND n.nspname = current_schema() ORDER BY t.oid",
            {}, nullptr));
    std::vector<TriggerDef> out;
    for (const auto& r : rows)
      out.push_back({std::get<std::string>(r[0]), std::get<std::string>(r[1]),
                     Definition(std::get<int64_t>(r[2]), std::get<std::string>(r[3]), std::get<std::string>(r[4]),
                                std::get<std::string>(r[5]), std::get<std::string>(r[6]))});
    return out;
  }

  Result<std::vector<TriggerDef>> ExpectedTriggers(const std::vector<std::string>& migrations) override {
    std::vector<TriggerDef> out;
    for (const auto& sql : migrations)
      for (const auto& t : dialect::TriggersIn(sql))
        out.push_back(
            {t.name, t.table,
             Definition(dialect::PostgresTriggerType(t), "O", t.name, "plpgsql", dialect::PostgresTriggerBody(t))});
    return out;
  }

  // The live schema of the ledger's namespace, from the catalogs.
  Result<std::vector<TriggerDef>> SchemaObjects() override {
    VERITY_ASSIGN_OR_RETURN(auto nsp,
                            Run("SELECT current_schema()::text, quote_ident(current_schema())::text", {}, nullptr));
    return CatalogObjects(std::get<std::string>(nsp.at(0).at(0)), std::get<std::string>(nsp.at(0).at(1)));
  }

  // What the migration table and `migrations` create, read back from a
  // replay on a second connection into pg_temp, rolled back: the ledger's
  // own schema is never touched, and the server itself says what the
  // migrations' SQL makes (as the store applies it: through the dialect).
  Result<std::vector<TriggerDef>> ExpectedSchemaObjects(const std::vector<std::string>& migrations) override {
    PostgresStore scratch;
    VERITY_RETURN_IF_ERROR(scratch.Open(url_, false));
    VERITY_RETURN_IF_ERROR(scratch.RequireTempPrivilege());
    VERITY_RETURN_IF_ERROR(scratch.ExecPostgres("BEGIN READ WRITE", "BEGIN"));
    scratch.in_txn_ = true;
    auto objects = scratch.ReplayInTemp(migrations);
    scratch.Rollback();
    return objects;
  }

  // amcheck's bt_index_check (heapallindexed: every row is in the index)
  // over each btree index of the ledger, when the extension is installed
  // and this role may run it; integrity_check_ says which.
  Result<std::string> IntegrityProblem() override {
    VERITY_ASSIGN_OR_RETURN(
        auto ext,
        Run("SELECT quote_ident(n.nspname)::text, has_function_privilege(p.oid, 'EXECUTE') FROM pg_extension x "
            "JOIN pg_namespace n ON n.oid = x.extnamespace JOIN pg_proc p ON p.pronamespace = n.oid AND "
            "p.proname = 'bt_index_check' AND p.pronargs = 2 WHERE x.extname = 'amcheck'",
            {}, nullptr));
    if (ext.empty() || std::get<int64_t>(ext[0][1]) == 0) {
      integrity_check_ = ext.empty() ? "amcheck=not-installed" : "amcheck=not-permitted";
      return std::string();
    }
    VERITY_ASSIGN_OR_RETURN(
        auto indexes, Run("SELECT c.oid::int8, c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                          "JOIN pg_am a ON a.oid = c.relam AND a.amname = 'btree' JOIN pg_namespace n ON n.oid = "
                          "c.relnamespace AND n.nspname = current_schema() ORDER BY c.relname",
                          {}, nullptr));
    const std::string check = "SELECT " + std::get<std::string>(ext[0][0]) + ".bt_index_check($1::oid::regclass, true)";
    for (const auto& ix : indexes) {
      const std::string oid = std::to_string(std::get<int64_t>(ix[0]));
      const char* params[] = {oid.c_str()};
      PgResult r(PQexecParams(conn_, check.c_str(), 1, nullptr, params, nullptr, nullptr, 0));
      if (PQresultStatus(r.get()) == PGRES_TUPLES_OK) continue;
      integrity_check_ = "amcheck=failed";
      const char* primary = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY);
      return "amcheck's bt_index_check fails on index " + std::get<std::string>(ix[1]) + ": " +
             Trimmed(primary ? primary : PQresultErrorMessage(r.get()));
    }
    integrity_check_ = "amcheck=ran(" + std::to_string(indexes.size()) + ")";
    return std::string();
  }

  std::string IntegrityCheckRan() const override { return integrity_check_; }

 private:
  static std::string Definition(int64_t type, const std::string& enabled, const std::string& fn,
                                const std::string& lang, const std::string& body) {
    return "tgtype=" + std::to_string(type) + " enabled=" + enabled + " function=" + fn + " language=" + lang +
           " body=" + body;
  }

  // Every object of schema `nsp`, `qualifier.` dropped from its definition
  // (the server writes the session's temporary schema as pg_temp).
  Result<std::vector<TriggerDef>> CatalogObjects(const std::string& nsp, const std::string& qualifier) {
    static const std::vector<std::string> queries = CatalogQueries();
    auto text = [](const Value& v) { return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : ""; };
    std::vector<TriggerDef> out;
    for (const std::string& sql : queries) {
      VERITY_ASSIGN_OR_RETURN(auto rows, Run(sql, {nsp}, nullptr));
      for (const auto& r : rows)
        out.push_back({text(r[0]) + " " + text(r[1]), text(r[2]), Unqualified(text(r[3]), qualifier)});
    }
    return out;
  }

  // The migrations as the store applies them, into this connection's pg_temp.
  Result<std::vector<TriggerDef>> ReplayInTemp(const std::vector<std::string>& migrations) {
    VERITY_RETURN_IF_ERROR(ExecPostgres("SET LOCAL search_path = pg_temp", "SET LOCAL search_path"));
    VERITY_RETURN_IF_ERROR(ExecPostgres(dialect::ToPostgres(kMigrationTableSql, "pg_temp"), kMigrationTableSql));
    for (const auto& sql : migrations) VERITY_RETURN_IF_ERROR(ExecPostgres(dialect::ToPostgres(sql, "pg_temp"), sql));
    VERITY_ASSIGN_OR_RETURN(auto nsp,
                            Run("SELECT nspname::text FROM pg_namespace WHERE oid = pg_my_temp_schema()", {}, nullptr));
    if (nsp.empty()) return Status::Error(name_ + ": the migrations' replay in pg_temp made no temporary schema");
    return CatalogObjects(std::get<std::string>(nsp[0][0]), "pg_temp");
  }

  // Verify's replay needs TEMP on the database: without it, a named error
  // (a ledger whose schema cannot be compared does not verify).
  Status RequireTempPrivilege() {
    VERITY_ASSIGN_OR_RETURN(auto rows, Run("SELECT has_database_privilege(current_database(), 'TEMP'), "
                                           "current_user::text, current_database()::text",
                                           {}, nullptr));
    if (std::get<int64_t>(rows.at(0)[0]) != 0) return OkStatus();
    const std::string role = std::get<std::string>(rows[0][1]), db = std::get<std::string>(rows[0][2]);
    return Status::Error(name_ +
                         ": ledger verify compares the schema with what the migrations create by replaying "
                         "them in a temporary schema (pg_temp), and role " +
                         role +
                         " lacks the TEMP privilege on "
                         "database " +
                         db + ": GRANT TEMP ON DATABASE " + db + " TO " + role);
  }

  // Runs PostgreSQL SQL as is (no dialect rewrite); `what` names it in errors.
  Status ExecPostgres(const std::string& pg, const std::string& what) {
    PgResult r(PQexec(conn_, pg.c_str()));
    return Check(r.get(), what);
  }

  static std::string SqliteType(const std::string& pg) {
    if (pg == "bigint" || pg == "integer" || pg == "smallint") return "INTEGER";
    if (pg == "double precision" || pg == "real") return "REAL";
    if (pg == "text" || pg == "character varying") return "TEXT";
    if (pg == "bytea") return "BLOB";
    return pg;
  }

  Status Connect() {
    const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
    const char* vals[] = {url_.c_str(), "10", "verity", nullptr};
    if (conn_) PQfinish(conn_);
    conn_ = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(conn_) != CONNECTION_OK)
      return Status::Error(name_ + ": cannot connect to the PostgreSQL ledger: " + Trimmed(PQerrorMessage(conn_)));
    PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
    prepared_.clear();
    // Bytes as stored (no conversion), and doubles printed exactly (they round-trip).
    // No JIT: the ledger's reads are many short index lookups whose summed
    // cost estimates pass jit_above_cost, and compiling them cost more than
    // running them (every frontier ladder at once: 70-100 ms with, 21 ms without).
    std::string setup = "SET client_encoding = 'SQL_ASCII'; SET extra_float_digits = 3; SET jit = off";
    if (read_only_) setup += "; SET default_transaction_read_only = on";
    PgResult r(PQexec(conn_, setup.c_str()));
    return Check(r.get(), setup);
  }

  // The database must keep bytes as given and sort text by bytes, as SQLite does.
  Status CheckDatabase() {
    VERITY_ASSIGN_OR_RETURN(auto rows, Run("SELECT pg_encoding_to_char(encoding)::text, datcollate::text FROM "
                                           "pg_database WHERE datname = current_database()",
                                           {}, nullptr));
    const std::string enc = std::get<std::string>(rows.at(0)[0]), coll = std::get<std::string>(rows.at(0)[1]);
    if (enc == "SQL_ASCII" && (coll == "C" || coll == "POSIX")) return OkStatus();
    return Status::Error(name_ + ": this database has encoding " + enc + " and collation " + coll +
                         "; a verity ledger needs SQL_ASCII and C (it keeps every byte a command printed, and "
                         "orders text by bytes as SQLite does). Create it with: createdb --encoding=SQL_ASCII "
                         "--locale=C --template=template0 NAME");
  }

  // Runs `fn`; outside a transaction a lost connection (a server restart) is
  // re-established and `fn` run once more. Inside one the error stands: the
  // transaction is gone, and its caller rolls back.
  Status Retrying(const std::function<Status()>& fn) {
    if (!in_txn_ && PQstatus(conn_) != CONNECTION_OK) VERITY_RETURN_IF_ERROR(Reconnect());
    Status s = fn();
    if (s.ok() || in_txn_ || PQstatus(conn_) == CONNECTION_OK) return s;
    VERITY_RETURN_IF_ERROR(Reconnect());
    return fn();
  }

  Status Reconnect() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kReconnectSeconds);
    for (;;) {
      Status s = Connect();
      if (s.ok() || std::chrono::steady_clock::now() > until) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  Result<std::string> Prepared(const std::string& sql) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return it->second;
    const std::string stmt = "v" + std::to_string(prepared_.size() + 1);
    PgResult r(PQprepare(conn_, stmt.c_str(), dialect::ToPostgres(sql).c_str(), 0, nullptr));
    VERITY_RETURN_IF_ERROR(Check(r.get(), sql));
    prepared_[sql] = stmt;
    return stmt;
  }

  Status Check(PGresult* r, const std::string& sql) const {
    const ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return OkStatus();
    const std::string m = Trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    // 42501 insufficient_privilege: say what a submitter's role needs.
    const std::string hint = state && std::string(state) == "42501"
                                 ? " (this role may not do that: a submitter needs SELECT and INSERT on the ledger's "
                                   "tables, and only the owner migrates; docs/ledger.md, \"The PostgreSQL store\")"
                                 : "";
    return Status::Error(name_ + ": " + (m.empty() ? Trimmed(PQerrorMessage(conn_)) : m) + hint + " in: " + sql);
  }

  // A parameter as text; true when it is NULL. NaN is NULL, as SQLite stores it;
  // a string's NUL bytes are encoded (EncodeNul).
  Result<bool> ParamText(const Value& v, std::string& out) const {
    if (std::holds_alternative<std::monostate>(v)) return true;
    if (auto* n = std::get_if<int64_t>(&v)) {
      out = std::to_string(*n);
    } else if (auto* d = std::get_if<double>(&v)) {
      if (std::isnan(*d)) return true;
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", *d);
      out = std::isinf(*d) ? (*d > 0 ? "Infinity" : "-Infinity") : buf;
    } else {
      out = EncodeNul(std::get<std::string>(v));
    }
    return false;
  }

  // Row i of `r` into `row` (its strings' storage reused); each cell's
  // storage class letter appended to `cls` when given.
  static void ReadInto(PGresult* r, int i, Row& row, std::string* cls) {
    const int n = PQnfields(r);
    row.resize(static_cast<size_t>(n));
    for (int c = 0; c < n; c++) {
      Value& cell = row[static_cast<size_t>(c)];
      char letter = 't';
      if (PQgetisnull(r, i, c)) {
        cell = std::monostate{};
        letter = 'n';
      } else {
        const char* v = PQgetvalue(r, i, c);
        const Oid t = PQftype(r, c);
        if (t == kInt8 || t == kInt4 || t == kInt2 || t == kOid || t == kBool || (t == kNumeric && IsIntegral(v))) {
          cell = t == kBool ? int64_t{v[0] == 't'} : static_cast<int64_t>(std::strtoll(v, nullptr, 10));
          letter = 'i';
        } else if (t == kFloat8 || t == kFloat4 || t == kNumeric) {
          cell = std::strtod(v, nullptr);  // "Infinity", "-Infinity" and "NaN" included
          letter = 'r';
        } else if (t == kBytea) {
          size_t len = 0;
          unsigned char* b = PQunescapeBytea(reinterpret_cast<const unsigned char*>(v), &len);
          cell = std::string(reinterpret_cast<const char*>(b), len);
          PQfreemem(b);
          letter = 'b';
        } else {
          cell = DecodeNul(v, static_cast<size_t>(PQgetlength(r, i, c)));
        }
      }
      if (cls) *cls += letter;
    }
  }

  static bool IsIntegral(const char* v) {
    for (const char* p = v; *p; p++)
      if (!(std::isdigit(static_cast<unsigned char>(*p)) || (p == v && *p == '-'))) return false;
    return true;
  }

  PGconn* conn_ = nullptr;
  std::string url_, name_;
  bool read_only_ = false, in_txn_ = false;
  std::string integrity_check_ = "amcheck=not-run";  // what IntegrityProblem ran
  std::map<std::string, std::string> prepared_;      // SQLite text -> prepared statement name
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, bool read_only) {
  auto s = std::make_unique<PostgresStore>();
  VERITY_RETURN_IF_ERROR(s->Open(url, read_only));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace verity::ledger
