#include "ledger/db.h"

#include <sys/stat.h>

#include "base/env.h"
#include "base/sha256.h"

namespace verity::ledger {

Result<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  std::unique_ptr<Db> d(new Db());
  d->path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &d->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK)
    return Status::Error(path + ": cannot open ledger: " + (d->db_ ? sqlite3_errmsg(d->db_) : "out of memory"));
  sqlite3_busy_timeout(d->db_, 60000);  // concurrent submitters wait, not fail
  // Switching a new file to WAL needs an exclusive lock and SQLite answers
  // SQLITE_BUSY at once (no busy handler) when another process is opening the
  // same new ledger: retry for as long as the busy timeout would wait.
  for (int tries = 0;; tries++) {
    Status wal = d->Exec("PRAGMA journal_mode=WAL");
    if (wal.ok()) break;
    if (sqlite3_errcode(d->db_) != SQLITE_BUSY || tries >= 6000) return wal;
    sqlite3_sleep(10);
  }
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA foreign_keys=ON"));
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA synchronous=NORMAL"));
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA cache_size=-65536"));  // 64 MiB: big ledgers stay in memory
  d->seal_key_ = env::LedgerKey();
  return d;
}

Result<std::unique_ptr<Db>> Db::OpenReadOnly(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return Status::Error(path + ": no such ledger file");
  if (!S_ISREG(st.st_mode)) return Status::Error(path + ": not a ledger file (not a regular file)");
  std::unique_ptr<Db> d(new Db());
  d->path_ = path;
  d->read_only_ = true;
  int rc = sqlite3_open_v2(path.c_str(), &d->db_, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK)
    return Status::Error(path + ": cannot open ledger read-only: " + (d->db_ ? sqlite3_errmsg(d->db_) : "out of memory"));
  sqlite3_busy_timeout(d->db_, 60000);  // a writer mid-commit is waited for
  VERITY_RETURN_IF_ERROR(d->Exec("PRAGMA query_only=ON"));
  d->seal_key_ = env::LedgerKey();
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
  return Run(sql, args, nullptr);
}

Result<std::vector<Row>> Db::QueryStored(const std::string& sql, const std::vector<Value>& args,
                                         std::vector<std::string>& classes) {
  classes.clear();
  return Run(sql, args, &classes);
}

Result<std::vector<Row>> Db::Run(const std::string& sql, const std::vector<Value>& args,
                                 std::vector<std::string>* classes) {
  VERITY_ASSIGN_OR_RETURN(sqlite3_stmt * st, Prepare(sql));
  for (size_t i = 0; i < args.size(); i++) {
    int idx = static_cast<int>(i) + 1;
    const Value& v = args[i];
    if (std::holds_alternative<std::monostate>(v)) sqlite3_bind_null(st, idx);
    else if (auto* n = std::get_if<int64_t>(&v)) sqlite3_bind_int64(st, idx, *n);
    else if (auto* d = std::get_if<double>(&v)) sqlite3_bind_double(st, idx, *d);
    else {
      // Bound by size, never by NUL: command output may hold any bytes, and the
      // seal hashed all of them.
      const std::string& t = std::get<std::string>(v);
      sqlite3_bind_text64(st, idx, t.data(), t.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    }
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
    std::string cls;
    for (int c = 0; c < n; c++) {
      const int type = sqlite3_column_type(st, c);
      cls += type == SQLITE_NULL ? 'n' : type == SQLITE_INTEGER ? 'i' : type == SQLITE_FLOAT ? 'r' : type == SQLITE_BLOB ? 'b' : 't';
      switch (type) {
        case SQLITE_NULL: r.emplace_back(std::monostate{}); break;
        case SQLITE_INTEGER: r.emplace_back(static_cast<int64_t>(sqlite3_column_int64(st, c))); break;
        case SQLITE_FLOAT: r.emplace_back(sqlite3_column_double(st, c)); break;
        default: {
          // Text (or a blob) as stored, every byte: column_text first, then its byte count.
          const unsigned char* t = sqlite3_column_text(st, c);
          const size_t n = static_cast<size_t>(sqlite3_column_bytes(st, c));
          r.emplace_back(t ? std::string(reinterpret_cast<const char*>(t), n) : std::string());
        }
      }
    }
    rows.push_back(std::move(r));
    if (classes) classes->push_back(std::move(cls));
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

std::string CanonicalRow(const std::vector<std::string>& names, const Row& row, const std::string& classes) {
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
      type = i < classes.size() && classes[i] == 'b' ? 'b' : 't';
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

std::string KeyedChainSeal(const std::string& key, const std::string& prev, const std::string& table,
                           int64_t row_id, const std::string& content_sha) {
  return HmacSha256Hex(key, prev + "|" + table + "|" + std::to_string(row_id) + "|" + content_sha);
}

Result<bool> Db::ChainHasAlg() {
  if (!chain_has_alg_) {
    VERITY_ASSIGN_OR_RETURN(auto col, Query("SELECT 1 FROM pragma_table_info('seal_chain') WHERE name = 'alg'"));
    chain_has_alg_ = !col.empty();
  }
  return *chain_has_alg_;
}

Status Db::LoadLastSeal() {
  VERITY_ASSIGN_OR_RETURN(const bool has_alg, ChainHasAlg());
  if (!seal_key_.empty() && !has_alg)
    return Status::Error(path_ + ": VERITY_LEDGER_KEY is set but this ledger's schema predates keyed seals; "
                                 "run `verity ledger migrate` first");
  VERITY_ASSIGN_OR_RETURN(
      auto last, Query(std::string("SELECT tbl, row_id, content_sha256, prev_seal, seal") + (has_alg ? ", alg" : "") +
                       " FROM seal_chain ORDER BY seq DESC LIMIT 1"));
  if (last.empty()) {
    last_seal_ = "genesis";
    return OkStatus();
  }
  const Row& e = last[0];
  const std::string alg = has_alg ? AsText(e[5]) : kSealSha256;
  if (alg != kSealHmacSha256 && !seal_key_.empty() && !starting_keying_)
    // A keyed seal after plain ones would leave those forgeable by anyone
    // without the key, and verify under a key fails on them: refuse.
    return Status::Error(path_ + ": the seal chain is plain (sha256) and VERITY_LEDGER_KEY is set; a keyed write "
                                 "will not extend a plain chain. Unset the key, or start keying this ledger with "
                                 "`verity ledger start-keying --by WHO --reason WHY` (a recorded, keyed act)");
  if (alg == kSealHmacSha256) {
    // Extending a keyed chain needs its key: without it the new row could only be
    // sealed with plain SHA-256 (a downgrade verify rejects), and with another key
    // every later seal would be unverifiable.
    if (seal_key_.empty())
      return Status::Error(path_ + ": the seal chain is keyed (hmac-sha256); set VERITY_LEDGER_KEY to write to it");
    if (KeyedChainSeal(seal_key_, AsText(e[3]), AsText(e[0]), AsInt(e[1]), AsText(e[2])) != AsText(e[4]))
      return Status::Error(path_ + ": VERITY_LEDGER_KEY is not the key that sealed this ledger "
                                   "(its last seal does not recompute); refusing to extend the chain");
  }
  last_seal_ = AsText(e[4]);
  return OkStatus();
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
  if (!last_seal_) VERITY_RETURN_IF_ERROR(LoadLastSeal());
  const bool keyed = !seal_key_.empty();
  std::string seal = keyed ? KeyedChainSeal(seal_key_, *last_seal_, table, id, content)
                           : ChainSeal(*last_seal_, table, id, content);
  VERITY_ASSIGN_OR_RETURN(const bool has_alg, ChainHasAlg());
  if (has_alg)
    VERITY_RETURN_IF_ERROR(Query(
        "INSERT INTO seal_chain (tbl, row_id, content_sha256, prev_seal, seal, alg) VALUES (?, ?, ?, ?, ?, ?)",
        {table, id, content, *last_seal_, seal, std::string(keyed ? kSealHmacSha256 : kSealSha256)}));
  else
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
