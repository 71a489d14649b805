// The SQL engine under Db: one interface, two stores. SQLite keeps a ledger in
// a file; PostgreSQL keeps it in a database several bench boxes share. Callers
// write SQLite's SQL; a store runs it in its own dialect (ledger/sql_dialect.h
// holds every rewrite), so the migrations and queries have one source.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"

namespace verity::ledger {

using Value = std::variant<std::monostate, int64_t, double, std::string>;
using Row = std::vector<Value>;

// A column as SQLite declares it: type is INTEGER, REAL or TEXT (upper case).
struct Column {
  std::string name, type;
};

// An append-only trigger as the store holds it: `definition` is whatever the
// store can compare (SQLite: its CREATE TRIGGER text; PostgreSQL: when it
// fires, whether it is enabled, and its function's body).
struct TriggerDef {
  std::string name, table, definition;
};

class Store {
 public:
  virtual ~Store() = default;
  // What error messages call this ledger: the file, or the URL without its password.
  virtual const std::string& name() const = 0;
  virtual bool is_postgres() const = 0;
  // Runs a statement or script written in SQLite's SQL (no parameters).
  virtual Status Exec(const std::string& sql) = 0;
  // Runs one statement with `args`; `classes` (if given) gets each row's
  // storage classes, one letter a cell (n, i, r, t, b), for the seal check.
  virtual Result<std::vector<Row>> Run(const std::string& sql, const std::vector<Value>& args,
                                       std::vector<std::string>* classes) = 0;
  // Runs one query and hands `row` each result row as it comes, without
  // keeping them: for reads of a million samples. The Row is reused between
  // calls (copy what you keep); `row` must not run this same statement. The
  // first error `row` returns stops the query and is returned. The default
  // reads every row with Run() first.
  virtual Status ForEachRow(const std::string& sql, const std::vector<Value>& args,
                            const std::function<Status(const Row&)>& row);
  // A write transaction (one writer at a time, ledger-wide) or a read snapshot.
  virtual Status Begin(bool write) = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
  // Inserts a row; returns its key (the table's INTEGER PRIMARY KEY, `key`),
  // which is the next after the largest when `cols` does not give it.
  virtual Result<int64_t> Insert(const std::string& table, const std::string& key,
                                 const std::vector<std::pair<std::string, Value>>& cols) = 0;
  virtual Result<bool> HasTable(const std::string& table) = 0;
  // The table's columns in order; empty when there is no such table.
  virtual Result<std::vector<Column>> Columns(const std::string& table) = 0;
  // The column that names a row of `table` in WHERE clauses (SQLite: rowid).
  virtual Result<std::string> KeyColumn(const std::string& table) = 0;
  // The triggers the ledger holds, and those `migrations` (SQL, in order) create.
  virtual Result<std::vector<TriggerDef>> Triggers() = 0;
  virtual Result<std::vector<TriggerDef>> ExpectedTriggers(const std::vector<std::string>& migrations) = 0;
  // Every schema object the store holds (tables, indexes, triggers, views: a
  // reader's answers depend on each), and those the migration table and
  // `migrations` create in an empty store: `name` is "<type> <name>",
  // `definition` what the store can compare (SQLite: sqlite_master's SQL). A
  // store that cannot replay its migrations returns two empty lists.
  virtual Result<std::vector<TriggerDef>> SchemaObjects() { return std::vector<TriggerDef>(); }
  virtual Result<std::vector<TriggerDef>> ExpectedSchemaObjects(const std::vector<std::string>& migrations) {
    (void)migrations;
    return std::vector<TriggerDef>();
  }
  // "" when the store's own consistency check passes (SQLite: PRAGMA
  // integrity_check: every index holds exactly its table's rows), else what it says.
  virtual Result<std::string> IntegrityProblem() { return std::string(); }
  // What IntegrityProblem ran, for verify's summary line (SQLite:
  // "integrity_check=ran|failed|not-run"; PostgreSQL: "amcheck=ran(N)" and so on).
  virtual std::string IntegrityCheckRan() const { return std::string(); }
};

// The migration table, as every ledger creates it (before migration 1).
inline constexpr const char* kMigrationTableSql =
    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, sha256 TEXT NOT NULL, "
    "applied_at TEXT NOT NULL)";

// True for postgresql:// and postgres:// URLs: a PostgreSQL ledger.
bool IsPostgresUrl(const std::string& where);
// `where` as messages may print it: a URL's password replaced by "***".
std::string RedactedLedgerName(const std::string& where);

// Opens the SQLite file or the PostgreSQL database `where` names.
Result<std::unique_ptr<Store>> OpenStore(const std::string& where, bool read_only);
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, bool read_only);
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, bool read_only);

}  // namespace verity::ledger
