// Verifying the seal chain: every sealed record recomputed from what is stored,
// plain SHA-256 seals and keyed (HMAC-SHA256) ones, on a read-only connection.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "base/sha256.h"
#include "ledger/ledger.h"

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

}  // namespace

Result<std::unique_ptr<Ledger>> Ledger::OpenForVerify(const std::string& path) {
  VERITY_ASSIGN_OR_RETURN(auto db, Db::OpenReadOnly(path));
  VERITY_ASSIGN_OR_RETURN(
      auto tables, db->Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('schema_migrations', "
                             "'seal_chain')"));
  if (tables.size() != 2) return Status::Error(path + ": not a verity ledger (no schema_migrations or seal_chain table)");
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
  // The expected tip: "genesis" (an empty ledger's tip) is in every chain.
  std::string want;
  if (!expect_tip.empty() && expect_tip != "genesis") {
    auto w = NormalizeSealPrefix(expect_tip);
    if (!w)
      return Status::Error("--expect-tip '" + expect_tip +
                           "' is not a seal: give the 64 hex chars `ledger verify` printed as tip=, or a prefix of "
                           "at least 16 of them");
    want = *w;
  }
  VERITY_ASSIGN_OR_RETURN(auto alg_col, d.Query("SELECT 1 FROM pragma_table_info('seal_chain') WHERE name = 'alg'"));
  const bool has_alg = !alg_col.empty();  // schema 4 and later; older chains are all plain SHA-256
  VERITY_ASSIGN_OR_RETURN(auto chain, d.Query(std::string("SELECT seq, tbl, row_id, content_sha256, prev_seal, seal") +
                                              (has_alg ? ", alg" : "") + " FROM seal_chain ORDER BY seq"));
  if (!chain.empty()) r.tip = AsText(chain.back()[5]);
  std::map<std::string, std::vector<std::string>> colnames;
  for (const auto& t : SealedTables()) {
    VERITY_ASSIGN_OR_RETURN(auto info, d.Query("SELECT name FROM pragma_table_info(?) ORDER BY cid", {t}));
    if (info.empty()) continue;  // a table of a later schema than this ledger's
    for (const auto& c : info) colnames[t].push_back(AsText(c[0]));
  }
  auto broken = [&](const std::string& what) {
    r.ok = false;
    r.first_broken = what;
    return r;
  };
  const std::string& key = d.seal_key();
  std::string prev = "genesis";
  std::set<std::pair<std::string, int64_t>> sealed_once;
  std::string needs_key;            // the first keyed record, when there is no key to check it
  int64_t verified_before_key = 0;  // records fully verified before it
  int64_t matches = 0;
  for (const auto& e : chain) {
    const int64_t seq = AsInt(e[0]);
    const std::string tbl = AsText(e[1]);
    const int64_t row_id = AsInt(e[2]);
    const std::string alg = has_alg ? AsText(e[6]) : std::string(kSealSha256);
    const std::string rec = tbl + "#" + std::to_string(row_id) + " (chain seq " + std::to_string(seq) + ")";
    if (!colnames.count(tbl)) return broken(rec + ": names an unknown table");
    if (!sealed_once.insert({tbl, row_id}).second) return broken(rec + ": record sealed twice");
    if (AsText(e[4]) != prev) return broken(rec + ": chain link does not follow the previous seal");
    VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT * FROM " + tbl + " WHERE rowid = ?", {row_id}));
    if (rows.empty()) return broken(rec + ": the sealed record is gone (deleted)");
    const std::string content = Sha256Hex(CanonicalRow(colnames[tbl], rows[0]));
    if (content != AsText(e[3])) return broken(rec + ": stored values differ from what was sealed");
    if (alg == kSealSha256) {
      // Once keyed, always keyed: a plain seal after a keyed one is what a forger
      // without the key would have to write.
      if (r.keyed > 0)
        return broken(rec + ": sealed with plain sha256 after keyed (hmac-sha256) seals: the chain was extended "
                            "without the key");
      if (ChainSeal(prev, tbl, row_id, content) != AsText(e[5])) return broken(rec + ": seal does not recompute");
    } else if (alg == kSealHmacSha256) {
      if (r.keyed++ == 0 && key.empty()) {
        needs_key = rec;
        verified_before_key = r.records;
      }
      // Without the key only the content and the links can be checked; the
      // verdict is FAIL below, after any plainer breakage is named.
      if (!key.empty() && KeyedChainSeal(key, prev, tbl, row_id, content) != AsText(e[5]))
        return broken(rec + ": keyed seal does not recompute under VERITY_LEDGER_KEY (wrong key, or forged)");
    } else {
      return broken(rec + ": unknown seal algorithm '" + alg + "'");
    }
    prev = AsText(e[5]);
    r.records++;
    if (!want.empty() && prev.compare(0, want.size(), want) == 0) {
      matches++;
      r.expected_tip_seal = prev;
      r.expected_tip_record = r.records;
    }
  }
  for (const auto& t : SealedTables()) {
    if (!colnames.count(t)) continue;
    VERITY_ASSIGN_OR_RETURN(
        auto extra, d.Query("SELECT min(rowid) FROM " + t + " WHERE rowid NOT IN (SELECT row_id FROM seal_chain WHERE tbl = ?)",
                            {t}));
    if (!extra.empty() && !IsNull(extra[0][0]))
      return broken(t + "#" + std::to_string(AsInt(extra[0][0])) + ": record was never sealed (added behind the ledger's back)");
  }
  if (!needs_key.empty()) {
    r.records = verified_before_key;
    return broken(needs_key + ": sealed with a key (hmac-sha256): set VERITY_LEDGER_KEY to verify it");
  }
  if (matches > 1)
    return Status::Error("--expect-tip " + expect_tip + " matches " + std::to_string(matches) +
                         " seals; give more of its hex digits");
  if (!want.empty() && matches == 0) {
    r.ok = false;
    r.expected_tip_missing = true;
    return r;
  }
  if (expect_tip == "genesis") r.expected_tip_seal = "genesis";
  r.ok = true;
  return r;
}

}  // namespace verity::ledger
