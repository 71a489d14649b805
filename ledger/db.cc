#include "ledger/db.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/env.h"
#include "base/sha256.h"

namespace verity::ledger {

Result<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  std::unique_ptr<Db> d(new Db());
  VERITY_ASSIGN_OR_RETURN(d->store_, OpenStore(path, false));
  d->path_ = d->store_->name();
  d->seal_key_ = env::LedgerKey();
  return d;
}

Result<std::unique_ptr<Db>> Db::OpenReadOnly(const std::string& path) {
  std::unique_ptr<Db> d(new Db());
  VERITY_ASSIGN_OR_RETURN(d->store_, OpenStore(path, true));
  d->path_ = d->store_->name();
  d->read_only_ = true;
  d->seal_key_ = env::LedgerKey();
  return d;
}

Db::~Db() = default;

Status Db::Exec(const std::string& sql) { return store_->Exec(sql); }

Result<std::vector<Row>> Db::Query(const std::string& sql, const std::vector<Value>& args) {
  return store_->Run(sql, args, nullptr);
}

Result<std::vector<Row>> Db::QueryStored(const std::string& sql, const std::vector<Value>& args,
                                         std::vector<std::string>& classes) {
  classes.clear();
  return store_->Run(sql, args, &classes);
}

Status Db::Transaction(const std::function<Status()>& fn) {
  VERITY_RETURN_IF_ERROR(store_->Begin(true));
  last_seal_.reset();  // another writer may have extended the chain since
  Status s = fn();
  if (!s.ok()) last_seal_.reset();
  if (!s.ok()) {
    store_->Rollback();
    return s;
  }
  Status c = store_->Commit();
  if (!c.ok()) store_->Rollback();
  last_seal_.reset();
  return c;
}

size_t SealNumber(double d, char* buf, size_t size) {
  // to_chars with a precision is printf's %.17g by definition, without
  // printf's cost (a seventh of a sealed insert); inf and nan as printf spells them.
  if (!std::isfinite(d)) return static_cast<size_t>(std::snprintf(buf, size, "%.17g", d));
  return static_cast<size_t>(std::to_chars(buf, buf + size, d, std::chars_format::general, 17).ptr - buf);
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
      text = std::string_view(num, static_cast<size_t>(std::to_chars(num, num + sizeof num, *n).ptr - num));
    } else if (auto* d = std::get_if<double>(&v)) {
      type = 'r';
      text = std::string_view(num, SealNumber(*d, num, sizeof num));
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

namespace {
// What a chain link hashes: prev|table|row_id|content.
std::string LinkText(const std::string& prev, const std::string& table, int64_t row_id,
                     const std::string& content_sha) {
  std::string text;
  text.reserve(prev.size() + table.size() + content_sha.size() + 24);
  ((((text += prev) += '|') += table) += '|') += std::to_string(row_id);
  (text += '|') += content_sha;
  return text;
}
}  // namespace

std::string ChainSeal(const std::string& prev, const std::string& table, int64_t row_id,
                      const std::string& content_sha) {
  return Sha256Hex(LinkText(prev, table, row_id, content_sha));
}

std::string KeyedChainSeal(const std::string& key, const std::string& prev, const std::string& table, int64_t row_id,
                           const std::string& content_sha) {
  return HmacSha256Hex(key, LinkText(prev, table, row_id, content_sha));
}

Result<bool> Db::ChainHasAlg() {
  if (!chain_has_alg_) {
    VERITY_ASSIGN_OR_RETURN(auto cols, Columns("seal_chain"));
    chain_has_alg_ = false;
    for (const Column& c : cols) chain_has_alg_ = *chain_has_alg_ || c.name == "alg";
  }
  return *chain_has_alg_;
}

Status Db::LoadLastSeal() {
  VERITY_ASSIGN_OR_RETURN(const bool has_alg, ChainHasAlg());
  if (!seal_key_.empty() && !has_alg)
    return Status::Error(path_ +
                         ": VERITY_LEDGER_KEY is set but this ledger's schema predates keyed seals; "
                         "run `verity ledger migrate` first");
  VERITY_ASSIGN_OR_RETURN(auto last, Query(std::string("SELECT tbl, row_id, content_sha256, prev_seal, seal") +
                                           (has_alg ? ", alg" : "") + " FROM seal_chain ORDER BY seq DESC LIMIT 1"));
  if (last.empty()) {
    last_seal_ = "genesis";
    return OkStatus();
  }
  const Row& e = last[0];
  const std::string alg = has_alg ? AsText(e[5]) : kSealSha256;
  if (alg != kSealHmacSha256 && !seal_key_.empty() && !starting_keying_)
    // A keyed seal after plain ones would leave those forgeable by anyone
    // without the key, and verify under a key fails on them: refuse.
    return Status::Error(path_ +
                         ": the seal chain is plain (sha256) and VERITY_LEDGER_KEY is set; a keyed write "
                         "will not extend a plain chain. Unset the key, or start keying this ledger with "
                         "`verity ledger start-keying --by WHO --reason WHY` (a recorded, keyed act)");
  if (alg == kSealHmacSha256) {
    // Extending a keyed chain needs its key: without it the new row could only be
    // sealed with plain SHA-256 (a downgrade verify rejects), and with another key
    // every later seal would be unverifiable.
    if (seal_key_.empty())
      return Status::Error(path_ + ": the seal chain is keyed (hmac-sha256); set VERITY_LEDGER_KEY to write to it");
    if (KeyedChainSeal(seal_key_, AsText(e[3]), AsText(e[0]), AsInt(e[1]), AsText(e[2])) != AsText(e[4]))
      return Status::Error(path_ +
                           ": VERITY_LEDGER_KEY is not the key that sealed this ledger "
                           "(its last seal does not recompute); refusing to extend the chain");
  }
  last_seal_ = AsText(e[4]);
  return OkStatus();
}

Result<int64_t> Db::InsertSealed(const std::string& table, const std::vector<std::pair<std::string, Value>>& cols) {
  TableColumns& table_cols = columns_[table];
  if (table_cols.names.empty()) {
    VERITY_ASSIGN_OR_RETURN(auto info, Columns(table));
    for (const auto& c : info) {
      table_cols.names.push_back(c.name);
      table_cols.types.push_back(c.type);
    }
    if (info.empty()) return Status::Error(path_ + ": no table " + table);
  }
  VERITY_ASSIGN_OR_RETURN(const int64_t id, store_->Insert(table, table_cols.names[0], cols));
  // Seal the row as SQLite stores it: the declared column affinity applied to
  // what was passed (a PostgreSQL column's type does the same). `verity ledger
  // verify` recomputes from the stored row, so any disagreement here shows up
  // as a broken seal in every test that verifies.
  Row stored;
  stored.reserve(table_cols.names.size());
  size_t next = 0;  // callers mostly give the columns in the table's order
  for (size_t i = 0; i < table_cols.names.size(); i++) {
    const std::string& name = table_cols.names[i];
    const std::string& type = table_cols.types[i];
    Value v;
    if (next < cols.size() && cols[next].first == name) {
      v = cols[next++].second;
    } else {
      for (const auto& [n, given] : cols)
        if (n == name) v = given;
    }
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
  std::string content = Sha256Hex(CanonicalRow(table_cols.names, stored));
  if (!last_seal_) VERITY_RETURN_IF_ERROR(LoadLastSeal());
  const bool keyed = !seal_key_.empty();
  std::string seal =
      keyed ? KeyedChainSeal(seal_key_, *last_seal_, table, id, content) : ChainSeal(*last_seal_, table, id, content);
  VERITY_ASSIGN_OR_RETURN(const bool has_alg, ChainHasAlg());
  std::vector<std::pair<std::string, Value>> link;
  link.reserve(6);
  link.emplace_back("tbl", table);
  link.emplace_back("row_id", id);
  link.emplace_back("content_sha256", std::move(content));
  link.emplace_back("prev_seal", std::move(*last_seal_));
  link.emplace_back("seal", seal);
  if (has_alg) link.emplace_back("alg", std::string(keyed ? kSealHmacSha256 : kSealSha256));
  Status linked = store_->Insert("seal_chain", "seq", link).status();
  if (!linked.ok()) {
    last_seal_.reset();  // reread from the chain, as after any failure
    return linked;
  }
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
