// The SQLite store: a ledger in one file (WAL, foreign keys, a busy timeout).
// The only file that touches the SQLite C API.
#include <sqlite3.h>
#include <sys/stat.h>

#include <unordered_map>

#include "ledger/store.h"

namespace verity::ledger {
namespace {

class SqliteStore : public Store {
 public:
  ~SqliteStore() override {
    for (auto& [sql, st] : cache_) sqlite3_finalize(st);
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path, bool read_only) {
    // Before SQLite's first use in this process: no memory statistics, which
    // take a global mutex on every allocation SQLite makes (the store never
    // reads them). Later calls are refused by SQLite, harmlessly.
    static const int no_memstatus = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)no_memstatus;
    path_ = path;
    if (read_only) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) return Status::Error(path + ": no such ledger file");
      if (!S_ISREG(st.st_mode)) return Status::Error(path + ": not a ledger file (not a regular file)");
    }
    // NOMUTEX: a connection belongs to one Ledger, used by one thread at a
    // time (concurrent submitters each open their own); SQLite's per-call
    // locking of it was a twentieth of a sealed insert.
    const int flags =
        SQLITE_OPEN_NOMUTEX | (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK)
      return Status::Error(path + (read_only ? ": cannot open ledger read-only: " : ": cannot open ledger: ") +
                           (db_ ? sqlite3_errmsg(db_) : "out of memory"));
    sqlite3_busy_timeout(db_, 60000);  // concurrent submitters wait, not fail
    if (read_only) return Exec("PRAGMA query_only=ON");
    // Switching a new file to WAL needs an exclusive lock and SQLite answers
    // SQLITE_BUSY at once (no busy handler) when another process is opening the
    // same new ledger: retry for as long as the busy timeout would wait.
    for (int tries = 0;; tries++) {
      Status wal = Exec("PRAGMA journal_mode=WAL");
      if (wal.ok()) break;
      if (sqlite3_errcode(db_) != SQLITE_BUSY || tries >= 6000) return wal;
      sqlite3_sleep(10);
    }
    VERITY_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
    VERITY_RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
    return Exec("PRAGMA cache_size=-65536");  // 64 MiB: big ledgers stay in memory
  }

  const std::string& name() const override { return path_; }
  bool is_postgres() const override { return false; }

  Status Exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "unknown error";
      sqlite3_free(err);
      return Status::Error(path_ + ": " + m);
    }
    return OkStatus();
  }

  Result<std::vector<Row>> Run(const std::string& sql, const std::vector<Value>& args,
                               std::vector<std::string>* classes) override {
    std::vector<Row> rows;
    VERITY_RETURN_IF_ERROR(StepRows(sql, args, [&](sqlite3_stmt* st) {
      std::string cls;
      rows.emplace_back();
      ReadInto(st, rows.back(), classes ? &cls : nullptr);
      if (classes) classes->push_back(std::move(cls));
      return OkStatus();
    }));
    return rows;
  }

  Status ForEachRow(const std::string& sql, const std::vector<Value>& args,
                    const std::function<Status(const Row&)>& row) override {
    Row r;
    return StepRows(sql, args, [&](sqlite3_stmt* st) {
      ReadInto(st, r, nullptr);
      return row(r);
    });
  }

  Status Begin(bool write) override { return Exec(write ? "BEGIN IMMEDIATE" : "BEGIN"); }
  Status Commit() override { return Exec("COMMIT"); }
  void Rollback() override { (void)Exec("ROLLBACK"); }

  // Binds straight from `cols`: a sealed insert is two of these, and building
  // an argument vector and a statement per row was a third of its time.
  Result<int64_t> Insert(const std::string& table, const std::string&,
                         const std::vector<std::pair<std::string, Value>>& cols) override {
    VERITY_ASSIGN_OR_RETURN(sqlite3_stmt * st, InsertStatement(table, cols));
    for (size_t i = 0; i < cols.size(); i++) BindOne(st, static_cast<int>(i) + 1, cols[i].second);
    const int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
      std::string m = sqlite3_errmsg(db_);
      sqlite3_reset(st);
      return Status::Error(path_ + ": " + m);
    }
    sqlite3_reset(st);
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  }

  Result<bool> HasTable(const std::string& table) override {
    VERITY_ASSIGN_OR_RETURN(auto rows,
                            Run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", {table}, nullptr));
    return !rows.empty();
  }

  Result<std::vector<Column>> Columns(const std::string& table) override {
    VERITY_ASSIGN_OR_RETURN(auto info,
                            Run("SELECT name, upper(type) FROM pragma_table_info(?) ORDER BY cid", {table}, nullptr));
    std::vector<Column> out;
    for (const auto& c : info) out.push_back({std::get<std::string>(c[0]), std::get<std::string>(c[1])});
    return out;
  }

  Result<std::string> KeyColumn(const std::string&) override { return std::string("rowid"); }

  Result<std::vector<TriggerDef>> Triggers() override { return TriggersOf(*this); }

  // What the same migrations create in an empty in-memory database.
  Result<std::vector<TriggerDef>> ExpectedTriggers(const std::vector<std::string>& migrations) override {
    SqliteStore mem;
    VERITY_RETURN_IF_ERROR(mem.Open(":memory:", false));
    for (const auto& sql : migrations) VERITY_RETURN_IF_ERROR(mem.Exec(sql));
    return TriggersOf(mem);
  }

  Result<std::vector<TriggerDef>> SchemaObjects() override { return SchemaOf(*this); }
  Result<std::vector<TriggerDef>> ExpectedSchemaObjects(const std::vector<std::string>& migrations) override {
    SqliteStore mem;
    VERITY_RETURN_IF_ERROR(mem.Open(":memory:", false));
    VERITY_RETURN_IF_ERROR(mem.Exec(kMigrationTableSql));
    for (const auto& sql : migrations) VERITY_RETURN_IF_ERROR(mem.Exec(sql));
    return SchemaOf(mem);
  }

  Result<std::string> IntegrityProblem() override {
    VERITY_ASSIGN_OR_RETURN(auto rows, Run("PRAGMA integrity_check(10)", {}, nullptr));
    std::string out;
    for (const auto& r : rows) {
      const std::string line = std::holds_alternative<std::string>(r[0]) ? std::get<std::string>(r[0]) : "?";
      if (line == "ok") continue;
      out += (out.empty() ? "" : "; ") + line;
    }
    integrity_check_ = out.empty() ? "integrity_check=ran" : "integrity_check=failed";
    return out;
  }

  std::string IntegrityCheckRan() const override { return integrity_check_; }

 private:
  // sqlite_master as stored, but sqlite_stat* (ANALYZE's statistics, which
  // choose plans, never answers).
  static Result<std::vector<TriggerDef>> SchemaOf(SqliteStore& s) {
    VERITY_ASSIGN_OR_RETURN(auto rows, s.Run("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE "
                                             "'sqlite_stat%' ORDER BY type, name",
                                             {}, nullptr));
    std::vector<TriggerDef> out;
    for (const auto& r : rows)
      out.push_back({std::get<std::string>(r[0]) + " " + std::get<std::string>(r[1]), std::get<std::string>(r[2]),
                     std::holds_alternative<std::string>(r[3]) ? std::get<std::string>(r[3]) : std::string()});
    return out;
  }

  static Result<std::vector<TriggerDef>> TriggersOf(SqliteStore& s) {
    VERITY_ASSIGN_OR_RETURN(auto rows, s.Run("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' "
                                             "ORDER BY rowid",
                                             {}, nullptr));
    std::vector<TriggerDef> out;
    for (const auto& r : rows)
      out.push_back({std::get<std::string>(r[0]), std::get<std::string>(r[1]),
                     std::holds_alternative<std::string>(r[2]) ? std::get<std::string>(r[2]) : std::string()});
    return out;
  }

  // The INSERT of these column names into `table`. A table's inserts mostly
  // name the same columns each time: that statement is kept per table and
  // reused when they do, without writing its SQL again.
  Result<sqlite3_stmt*> InsertStatement(const std::string& table,
                                        const std::vector<std::pair<std::string, Value>>& cols) {
    LastInsert& last = last_insert_[table];
    bool same = last.st && last.columns.size() == cols.size();
    for (size_t i = 0; same && i < cols.size(); i++) same = last.columns[i] == cols[i].first;
    if (same) {
      sqlite3_reset(last.st);
      sqlite3_clear_bindings(last.st);
      return last.st;
    }
    std::string sql = "INSERT INTO " + table + " (";
    for (size_t i = 0; i < cols.size(); i++) (sql += i ? ", " : "") += cols[i].first;
    sql += ") VALUES (";
    for (size_t i = 0; i < cols.size(); i++) sql += i ? ", ?" : "?";
    sql += ')';
    VERITY_ASSIGN_OR_RETURN(last.st, Prepare(sql));  // owned by cache_
    last.columns.clear();
    for (const auto& c : cols) last.columns.push_back(c.first);
    return last.st;
  }

  Result<sqlite3_stmt*> Prepare(const std::string& sql) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) {
      sqlite3_reset(it->second);
      sqlite3_clear_bindings(it->second);
      return it->second;
    }
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      return Status::Error(path_ + ": " + sqlite3_errmsg(db_) + " in: " + sql);
    cache_[sql] = st;
    return st;
  }

  static void Bind(sqlite3_stmt* st, const std::vector<Value>& args) {
    for (size_t i = 0; i < args.size(); i++) BindOne(st, static_cast<int>(i) + 1, args[i]);
  }

  static void BindOne(sqlite3_stmt* st, int idx, const Value& v) {
    if (std::holds_alternative<std::monostate>(v)) sqlite3_bind_null(st, idx);
    else if (auto* n = std::get_if<int64_t>(&v)) sqlite3_bind_int64(st, idx, *n);
    else if (auto* d = std::get_if<double>(&v)) sqlite3_bind_double(st, idx, *d);
    else {
      // Bound by size, never by NUL: command output may hold any bytes, and the
      // seal hashed all of them. Not copied (SQLITE_STATIC): every caller steps
      // the statement to its end while `v` lives, and Prepare clears the
      // bindings before the statement is used again.
      const std::string& t = std::get<std::string>(v);
      sqlite3_bind_text64(st, idx, t.data(), t.size(), SQLITE_STATIC, SQLITE_UTF8);
    }
  }

  // Runs one statement and hands each result row to `on_row` (reading it
  // from the statement); stops at the first error, the statement's or on_row's.
  Status StepRows(const std::string& sql, const std::vector<Value>& args,
                  const std::function<Status(sqlite3_stmt*)>& on_row) {
    VERITY_ASSIGN_OR_RETURN(sqlite3_stmt * st, Prepare(sql));
    Bind(st, args);
    for (;;) {
      const int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      Status s = rc == SQLITE_ROW ? on_row(st) : Status::Error(path_ + ": " + sqlite3_errmsg(db_));
      if (!s.ok()) {
        sqlite3_reset(st);
        return s;
      }
    }
    sqlite3_reset(st);
    return OkStatus();
  }

  // The current row into `r`, reusing its strings' storage; each cell's
  // storage class letter appended to `cls` when given.
  static void ReadInto(sqlite3_stmt* st, Row& r, std::string* cls) {
    const int n = sqlite3_column_count(st);
    r.resize(n);
    for (int c = 0; c < n; c++) {
      const int type = sqlite3_column_type(st, c);
      if (cls)
        *cls += type == SQLITE_NULL      ? 'n'
                : type == SQLITE_INTEGER ? 'i'
                : type == SQLITE_FLOAT   ? 'r'
                : type == SQLITE_BLOB    ? 'b'
                                         : 't';
      switch (type) {
        case SQLITE_NULL: r[c] = std::monostate{}; break;
        case SQLITE_INTEGER: r[c] = static_cast<int64_t>(sqlite3_column_int64(st, c)); break;
        case SQLITE_FLOAT: r[c] = sqlite3_column_double(st, c); break;
        default: {
          // Text (or a blob) as stored, every byte: column_text first, then its byte count.
          const unsigned char* t = sqlite3_column_text(st, c);
          const size_t len = static_cast<size_t>(sqlite3_column_bytes(st, c));
          if (!std::holds_alternative<std::string>(r[c])) r[c] = std::string();
          std::get<std::string>(r[c]).assign(t ? reinterpret_cast<const char*>(t) : "", t ? len : 0);
        }
      }
    }
  }

  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
  std::string integrity_check_ = "integrity_check=not-run";  // what IntegrityProblem ran
  struct LastInsert {
    sqlite3_stmt* st = nullptr;
    std::vector<std::string> columns;
  };
  std::unordered_map<std::string, LastInsert> last_insert_;  // by table
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, bool read_only) {
  auto s = std::make_unique<SqliteStore>();
  VERITY_RETURN_IF_ERROR(s->Open(path, read_only));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace verity::ledger
