#include "ledger/db.h"

#include "base/sha256.h"

namespace verity::ledger {

Result<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  std::unique_ptr<Db> d(new Db());
  d->path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &d->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK)
    return Status::Error(path + ": cannot open ledger: " + (d->db_ ? sqlite3_errmsg(d->db_) : "out of memory"));
  sqlite3_busy_timeout(d->db_, 60000);  // concurrent submitters wait, not fail
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA journal_mode=WAL"));
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA foreign_keys=ON"));
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA synchronous=NORMAL"));
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA cache_size=-65536"));  // 64 MiB: big ledgers stay in memory
  return d;
}

Db::~Db() {
  for (auto& [sql, st] : cache_) sqlite3_finalize(st);
  if (db_) sqlite3_close(db_);
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Error(path_ + ": " + m);
  }
  return OkStatus();
}

Result<sqlite3_stmt*> Db::Prepare(const std::string& sql) {
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

Result<std::vector<Row>> Db::Query(const std::string& sql, const std::vector<Value>& args) {
  VERITY_ASSIGN_OR_RETURN(sqlite3_stmt * st, Prepare(sql));
  for (size_t i = 0; i < args.size(); i++) {
    int idx = static_cast<int>(i) + 1;
    const Value& v = args[i];
    if (std::holds_alternative<std::monostate>(v)) sqlite3_bind_null(st, idx);
    else if (auto* n = std::get_if<int64_t>(&v)) sqlite3_bind_int64(st, idx, *n);
    else if (auto* d = std::get_if<double>(&v)) sqlite3_bind_double(st, idx, *d);
    else sqlite3_bind_text(st, idx, std::get<std::string>(v).c_str(), -1, SQLITE_TRANSIENT);
  }
  std::vector<Row> rows;
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      std::string m = sqlite3_errmsg(db_);
      sqlite3_reset(st);
      return Status::Error(path_ + ": " + m);
    }
    Row r;
    int n = sqlite3_column_count(st);
    for (int c = 0; c < n; c++) {
      switch (sqlite3_column_type(st, c)) {
        case SQLITE_NULL: r.emplace_back(std::monostate{}); break;
        case SQLITE_INTEGER: r.emplace_back(static_cast<int64_t>(sqlite3_column_int64(st, c))); break;
        case SQLITE_FLOAT: r.emplace_back(sqlite3_column_double(st, c)); break;
        default: {
          const unsigned char* t = sqlite3_column_text(st, c);
          r.emplace_back(std::string(t ? reinterpret_cast<const char*>(t) : "",
                                     static_cast<size_t>(sqlite3_column_bytes(st, c))));
        }
      }
    }
    rows.push_back(std::move(r));
  }
  sqlite3_reset(st);
  return rows;
}

Status Db::Transaction(const std::function<Status()>& fn) {
  VERITY_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  last_seal_.reset();  // another writer may have extended the chain since
  Status s = fn();
  if (!s.ok()) last_seal_.reset();
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  Status c = Exec("COMMIT");
  if (!c.ok()) (void)Exec("ROLLBACK");
  last_seal_.reset();
  return c;
}

std::string CanonicalRow(const std::vector<std::string>& names, const Row& row) {
  // Each cell as <name>=<type><length>:<value>; lengths make it unambiguous.
  std::string out;
  out.reserve(64 * row.size());
  char num[40];
  for (size_t i = 0; i < row.size(); i++) {
    out += names[i];
    const Value& v = row[i];
    if (std::holds_alternative<std::monostate>(v)) {
      out += "=n;";
      continue;
    }
    std::string_view text;
    char type;
    if (auto* n = std::get_if<int64_t>(&v)) {
      type = 'i';
      text = std::string_view(num, static_cast<size_t>(std::snprintf(num, sizeof num, "%lld", static_cast<long long>(*n))));
    } else if (auto* d = std::get_if<double>(&v)) {
      type = 'r';
      text = std::string_view(num, static_cast<size_t>(std::snprintf(num, sizeof num, "%.17g", *d)));
    } else {
      type = 't';
      text = std::get<std::string>(v);
    }
    out += '=';
    out += type;
    out += std::to_string(text.size());
    out += ':';
    out += text;
    out += ';';
  }
  return out;
}

std::string ChainSeal(const std::string& prev, const std::string& table, int64_t row_id,
                      const std::string& content_sha) {
  return Sha256Hex(prev + "|" + table + "|" + std::to_string(row_id) + "|" + content_sha);
}

Result<int64_t> Db::InsertSealed(const std::string& table, const std::vector<std::pair<std::string, Value>>& cols) {
  std::string names, marks;
  std::vector<Value> args;
  for (const auto& [name, v] : cols) {
    names += (names.empty() ? "" : ", ") + name;
    marks += marks.empty() ? "?" : ", ?";
    args.push_back(v);
  }
  VERITY_RETURN_IF_ERROR(Query("INSERT INTO " + table + " (" + names + ") VALUES (" + marks + ")", args));
  const int64_t id = sqlite3_last_insert_rowid(db_);
  // Seal the row as SQLite stores it: the declared column affinity applied to
  // what was passed. `verity ledger verify` recomputes from the stored row, so
  // any disagreement here shows up as a broken seal in every test that verifies.
  Columns& table_cols = columns_[table];
  if (table_cols.names.empty()) {
    VERITY_ASSIGN_OR_RETURN(auto info, Query("SELECT name, upper(type) FROM pragma_table_info(?) ORDER BY cid", {table}));
    for (const auto& c : info) {
      table_cols.names.push_back(AsText(c[0]));
      table_cols.types.push_back(AsText(c[1]));
    }
  }
  Row stored;
  for (size_t i = 0; i < table_cols.names.size(); i++) {
    const std::string& name = table_cols.names[i];
    const std::string& type = table_cols.types[i];
    Value v;
    for (const auto& [n, given] : cols)
      if (n == name) v = given;
    if (i == 0 && IsNull(v)) v = id;  // INTEGER PRIMARY KEY
    if (type == "REAL" && std::holds_alternative<int64_t>(v)) v = static_cast<double>(std::get<int64_t>(v));
    if (type == "INTEGER" && std::holds_alternative<double>(v)) {
      double d = std::get<double>(v);
      if (d == static_cast<double>(static_cast<int64_t>(d))) v = static_cast<int64_t>(d);
    }
    if (type == "TEXT" && !IsNull(v) && !std::holds_alternative<std::string>(v))
      return Status::Error(table + "." + name + ": a TEXT column was given a number");
    stored.push_back(std::move(v));
  }
  const std::string content = Sha256Hex(CanonicalRow(table_cols.names, stored));
  if (!last_seal_) {
    VERITY_ASSIGN_OR_RETURN(auto last, Query("SELECT seal FROM seal_chain ORDER BY seq DESC LIMIT 1"));
    last_seal_ = last.empty() ? std::string("genesis") : AsText(last[0][0]);
  }
  std::string seal = ChainSeal(*last_seal_, table, id, content);
  VERITY_RETURN_IF_ERROR(Query(
      "INSERT INTO seal_chain (tbl, row_id, content_sha256, prev_seal, seal) VALUES (?, ?, ?, ?, ?)",
      {table, id, content, *last_seal_, seal}));
  last_seal_ = std::move(seal);
  return id;
}

int64_t AsInt(const Value& v) {
  if (auto* n = std::get_if<int64_t>(&v)) return *n;
  if (auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  return 0;
}
double AsDouble(const Value& v) {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  return 0.0;
}
std::string AsText(const Value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  if (auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return std::string();
}
bool IsNull(const Value& v) { return std::holds_alternative<std::monostate>(v); }

}  // namespace verity::ledger
