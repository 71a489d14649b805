// A thin layer over the SQLite C API: prepared statements cached by SQL text,
// typed values, IMMEDIATE transactions, and sealed (hash-chained) inserts.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"

namespace verity::ledger {

using Value = std::variant<std::monostate, int64_t, double, std::string>;
using Row = std::vector<Value>;

class Db {
 public:
  // Opens (creating) `path` with WAL, foreign keys and a busy timeout.
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  ~Db();

  Status Exec(const std::string& sql);
  // Runs `sql` with `args`; returns every result row.
  Result<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& args = {});
  // Runs `fn` inside BEGIN IMMEDIATE ... COMMIT; rolls back when it fails.
  Status Transaction(const std::function<Status()>& fn);

  // Inserts a row into `table` and seals it: the row as stored (declared
  // affinity applied) is hashed canonically and chained to the previous seal. Must be
  // called inside Transaction(). Returns the new row id.
  Result<int64_t> InsertSealed(const std::string& table, const std::vector<std::pair<std::string, Value>>& cols);

  const std::string& path() const { return path_; }

 private:
  Db() = default;
  Result<sqlite3_stmt*> Prepare(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string path_;
  std::map<std::string, sqlite3_stmt*> cache_;
  // Per sealed table, in column order: names and declared types (upper case).
  struct Columns {
    std::vector<std::string> names, types;
  };
  std::map<std::string, Columns> columns_;
  // The chain's last seal, valid only inside the current write transaction.
  std::optional<std::string> last_seal_;
};

// Canonical text of a stored row: column names and typed values, length-prefixed.
std::string CanonicalRow(const std::vector<std::string>& names, const Row& row);
// seal = sha256(prev_seal "|" table "|" row_id "|" content_sha256)
std::string ChainSeal(const std::string& prev, const std::string& table, int64_t row_id,
                      const std::string& content_sha);

// Accessors for query results; a NULL reads as 0 / "" / NaN-free defaults.
int64_t AsInt(const Value& v);
double AsDouble(const Value& v);
std::string AsText(const Value& v);
bool IsNull(const Value& v);

}  // namespace verity::ledger
