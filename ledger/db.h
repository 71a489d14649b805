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
  // Opens (creating) `path` with WAL, foreign keys and a busy timeout. The seal
  // key is taken from VERITY_LEDGER_KEY (env::LedgerKey()).
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  // Opens an existing `path` read-only (SQLITE_OPEN_READONLY, query_only): never
  // creates, converts or writes it; a missing file is an error naming it.
  static Result<std::unique_ptr<Db>> OpenReadOnly(const std::string& path);
  ~Db();

  Status Exec(const std::string& sql);
  // Runs `sql` with `args`; returns every result row.
  Result<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& args = {});
  // Query() that also returns each row's storage classes, one letter a cell
  // (n, i, r, t, b: NULL, INTEGER, REAL, TEXT, BLOB), for the seal check.
  Result<std::vector<Row>> QueryStored(const std::string& sql, const std::vector<Value>& args,
                                       std::vector<std::string>& classes);
  // Runs `fn` inside BEGIN IMMEDIATE ... COMMIT; rolls back when it fails.
  Status Transaction(const std::function<Status()>& fn);

  // Inserts a row into `table` and seals it: the row as stored (declared
  // affinity applied) is hashed canonically and chained to the previous seal,
  // with plain SHA-256 or, when a seal key is set, HMAC-SHA256 under it (the
  // chain row's `alg` says which). Refuses to extend a keyed chain without the
  // key that sealed its last row, and, with a key, to extend a plain chain
  // (unless set_starting_keying: `ledger start-keying`). Must be called inside Transaction(). Returns
  // the new row id.
  Result<int64_t> InsertSealed(const std::string& table, const std::vector<std::pair<std::string, Value>>& cols);

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }
  // The key new seals are made (and keyed seals verified) with; empty: plain SHA-256.
  const std::string& seal_key() const { return seal_key_; }
  void set_seal_key(std::string key) { seal_key_ = std::move(key); }
  // Lets the next keyed seal follow a plain one: only Ledger::StartKeying, for
  // the seal_keyings record that names the plain records before the key.
  void set_starting_keying(bool on) { starting_keying_ = on; }

 private:
  Db() = default;
  Result<sqlite3_stmt*> Prepare(const std::string& sql);
  Result<std::vector<Row>> Run(const std::string& sql, const std::vector<Value>& args, std::vector<std::string>* classes);
  sqlite3* db_ = nullptr;
  std::string path_;
  bool read_only_ = false;
  std::string seal_key_;
  bool starting_keying_ = false;
  std::map<std::string, sqlite3_stmt*> cache_;
  // Per sealed table, in column order: names and declared types (upper case).
  struct Columns {
    std::vector<std::string> names, types;
  };
  std::map<std::string, Columns> columns_;
  // The chain's last seal, valid only inside the current write transaction.
  std::optional<std::string> last_seal_;
  // Whether seal_chain has the `alg` column (migration 4); looked up once.
  std::optional<bool> chain_has_alg_;
  Result<bool> ChainHasAlg();
  // Reads the chain's last seal into last_seal_, checking that this connection may extend it.
  Status LoadLastSeal();
};

// Seal algorithms, as stored in seal_chain.alg.
inline constexpr const char* kSealSha256 = "sha256";
inline constexpr const char* kSealHmacSha256 = "hmac-sha256";

// Canonical text of a stored row: column names and typed values, length-prefixed.
// `classes` (QueryStored's letters; "" = none a BLOB) marks the cells stored as
// BLOB, which are tagged 'b' where TEXT is 't': the storage class is sealed.
// No verity ever bound a BLOB, so every seal written before this stays valid.
std::string CanonicalRow(const std::vector<std::string>& names, const Row& row, const std::string& classes = "");
// seal = sha256(prev_seal "|" table "|" row_id "|" content_sha256)
std::string ChainSeal(const std::string& prev, const std::string& table, int64_t row_id,
                      const std::string& content_sha);
// Keyed seal = hmac_sha256(key, prev_seal "|" table "|" row_id "|" content_sha256).
std::string KeyedChainSeal(const std::string& key, const std::string& prev, const std::string& table,
                           int64_t row_id, const std::string& content_sha);

// Accessors for query results; a NULL reads as 0 / "" / NaN-free defaults.
int64_t AsInt(const Value& v);
double AsDouble(const Value& v);
std::string AsText(const Value& v);
bool IsNull(const Value& v);

}  // namespace verity::ledger
