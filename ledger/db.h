// The ledger's database: typed values, one-writer transactions and sealed
// (hash-chained) inserts, over a store (ledger/store.h): a SQLite file, or a
// PostgreSQL database when the ledger is a postgresql:// URL.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "ledger/store.h"

namespace verity::ledger {

class Db {
 public:
  // Opens (creating) the ledger `path` names: a postgresql:// (or postgres://)
  // URL is a PostgreSQL database, anything else a SQLite file (WAL, foreign
  // keys, a busy timeout). The seal key is taken from VERITY_LEDGER_KEY
  // (env::LedgerKey()).
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  // Opens an existing ledger read-only: never creates, converts or writes it; a
  // missing file or unreachable database is an error naming it.
  static Result<std::unique_ptr<Db>> OpenReadOnly(const std::string& path);
  ~Db();

  Status Exec(const std::string& sql);
  // Runs `sql` with `args`; returns every result row.
  Result<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& args = {});
  // Runs `sql` with `args` and hands `row` each row as it comes (Store::ForEachRow).
  Status ForEachRow(const std::string& sql, const std::vector<Value>& args,
                    const std::function<Status(const Row&)>& row) {
    return store_->ForEachRow(sql, args, row);
  }
  // Query() that also returns each row's storage classes, one letter a cell
  // (n, i, r, t, b: NULL, INTEGER, REAL, TEXT, BLOB), for the seal check.
  Result<std::vector<Row>> QueryStored(const std::string& sql, const std::vector<Value>& args,
                                       std::vector<std::string>& classes);
  // Runs `fn` inside a write transaction (one writer at a time: SQLite's BEGIN
  // IMMEDIATE, PostgreSQL's advisory lock) and commits; rolls back when it fails.
  Status Transaction(const std::function<Status()>& fn);
  // A read snapshot: every query until EndRead sees the same committed state.
  Status BeginRead() { return store_->Begin(false); }
  void EndRead() { (void)store_->Commit(); }

  // The schema as the store holds it (see Store).
  Result<bool> HasTable(const std::string& table) { return store_->HasTable(table); }
  Result<std::vector<Column>> Columns(const std::string& table) { return store_->Columns(table); }
  Result<std::string> KeyColumn(const std::string& table) { return store_->KeyColumn(table); }
  Result<std::vector<TriggerDef>> Triggers() { return store_->Triggers(); }
  Result<std::vector<TriggerDef>> ExpectedTriggers(const std::vector<std::string>& migrations) {
    return store_->ExpectedTriggers(migrations);
  }
  Result<std::vector<TriggerDef>> SchemaObjects() { return store_->SchemaObjects(); }
  Result<std::vector<TriggerDef>> ExpectedSchemaObjects(const std::vector<std::string>& migrations) {
    return store_->ExpectedSchemaObjects(migrations);
  }
  Result<std::string> IntegrityProblem() { return store_->IntegrityProblem(); }
  std::string IntegrityCheckRan() const { return store_->IntegrityCheckRan(); }
  bool is_postgres() const { return store_->is_postgres(); }

  // Inserts a row into `table` and seals it: the row as stored (declared
  // affinity applied) is hashed canonically and chained to the previous seal,
  // with plain SHA-256 or, when a seal key is set, HMAC-SHA256 under it (the
  // chain row's `alg` says which). Refuses to extend a keyed chain without the
  // key that sealed its last row, and, with a key, to extend a plain chain
  // (unless set_starting_keying: `ledger start-keying`). Must be called inside Transaction(). Returns
  // the new row id.
  Result<int64_t> InsertSealed(const std::string& table, const std::vector<std::pair<std::string, Value>>& cols);

  // Inserts a row as given, unsealed (its key in `key`, the next after the
  // largest when not given); returns the key. Only `ledger copy`, which copies
  // sealed rows and their chain links as stored.
  Result<int64_t> InsertRow(const std::string& table, const std::string& key,
                            const std::vector<std::pair<std::string, Value>>& cols) {
    return store_->Insert(table, key, cols);
  }

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
  std::unique_ptr<Store> store_;
  std::string path_;
  bool read_only_ = false;
  std::string seal_key_;
  bool starting_keying_ = false;
  // Per sealed table, in column order: names and declared types (upper case).
  struct TableColumns {
    std::vector<std::string> names, types;
  };
  std::map<std::string, TableColumns> columns_;
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

// A REAL cell's text in a seal: printf's "%.17g" of d, written into buf
// (size >= 32); returns its length.
size_t SealNumber(double d, char* buf, size_t size);
// Canonical text of a stored row: column names and typed values, length-prefixed.
// `classes` (QueryStored's letters; "" = none a BLOB) marks the cells stored as
// BLOB, which are tagged 'b' where TEXT is 't': the storage class is sealed.
// No verity ever bound a BLOB, so every seal written before this stays valid.
std::string CanonicalRow(const std::vector<std::string>& names, const Row& row, const std::string& classes = "");
// seal = sha256(prev_seal "|" table "|" row_id "|" content_sha256)
std::string ChainSeal(const std::string& prev, const std::string& table, int64_t row_id,
                      const std::string& content_sha);
// Keyed seal = hmac_sha256(key, prev_seal "|" table "|" row_id "|" content_sha256).
std::string KeyedChainSeal(const std::string& key, const std::string& prev, const std::string& table, int64_t row_id,
                           const std::string& content_sha);

// Accessors for query results; a NULL reads as 0 / "" / NaN-free defaults.
int64_t AsInt(const Value& v);
double AsDouble(const Value& v);
std::string AsText(const Value& v);
bool IsNull(const Value& v);

}  // namespace verity::ledger
