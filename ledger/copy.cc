#include "ledger/copy.h"

#include <map>

#include "ledger/ledger.h"
#include "ledger/migrations.h"

namespace verity::ledger {
namespace {

// Creates the schema of `migrations` (rows of version, name, sha256, applied_at)
// in `to` and records them as the source did.
Status CopySchema(Db& to, const std::vector<Row>& migrations) {
  VERITY_RETURN_IF_ERROR(to.Exec(kMigrationTableSql));
  for (const Row& m : migrations) {
    const Migration* known = FindMigration(static_cast<int>(AsInt(m[0])));
    if (!known) return Status::Error("copy: the source holds migration " + AsText(m[1]) + ", unknown to this verity");
    VERITY_RETURN_IF_ERROR(to.Exec(known->sql));
    VERITY_RETURN_IF_ERROR(to.Query("INSERT INTO schema_migrations VALUES (?, ?, ?, ?)", m).status());
  }
  return OkStatus();
}

// Copies every sealed record and its chain link, in chain order, as stored.
Result<int64_t> CopyRecords(Db& from, Db& to) {
  VERITY_ASSIGN_OR_RETURN(auto chain_cols, from.Columns("seal_chain"));
  std::vector<std::pair<std::string, Value>> link;
  std::string names;
  for (const Column& c : chain_cols) names += (names.empty() ? "" : ", ") + c.name;
  VERITY_ASSIGN_OR_RETURN(auto chain, from.Query("SELECT " + names + " FROM seal_chain ORDER BY seq"));
  std::map<std::string, std::pair<std::vector<Column>, std::string>> tables;  // columns, key column
  for (const Row& e : chain) {
    const std::string tbl = AsText(e[1]);
    auto it = tables.find(tbl);
    if (it == tables.end()) {
      VERITY_ASSIGN_OR_RETURN(auto cols, from.Columns(tbl));
      VERITY_ASSIGN_OR_RETURN(auto key, from.KeyColumn(tbl));
      it = tables.emplace(tbl, std::make_pair(cols, key)).first;
    }
    const auto& [cols, key] = it->second;
    VERITY_ASSIGN_OR_RETURN(auto rows, from.Query("SELECT * FROM " + tbl + " WHERE " + key + " = ?", {e[2]}));
    if (rows.size() != 1) return Status::Error("copy: " + tbl + "#" + AsText(e[2]) + " is not in the source");
    std::vector<std::pair<std::string, Value>> row;
    for (size_t i = 0; i < cols.size(); i++) row.push_back({cols[i].name, rows[0][i]});
    VERITY_RETURN_IF_ERROR(to.InsertRow(tbl, cols[0].name, row).status());
    link.clear();
    for (size_t i = 0; i < chain_cols.size(); i++) link.push_back({chain_cols[i].name, e[i]});
    VERITY_RETURN_IF_ERROR(to.InsertRow("seal_chain", "seq", link).status());
  }
  return static_cast<int64_t>(chain.size());
}

}  // namespace

Result<CopyReport> CopyLedger(const std::string& from, const std::string& to) {
  CopyReport rep;
  VERITY_ASSIGN_OR_RETURN(auto src, Ledger::OpenForVerify(from));
  VERITY_ASSIGN_OR_RETURN(const VerifyReport before, src->Verify(""));
  if (!before.ok)
    return Status::Error("copy: " + src->db().path() + ": ledger verify FAILs: " + before.first_broken +
                         "; copy takes only a ledger that verifies");
  rep.from_tip = before.tip;
  rep.schema = src->schema_version();
  VERITY_ASSIGN_OR_RETURN(auto dst, Db::Open(to));
  VERITY_ASSIGN_OR_RETURN(const bool taken, dst->HasTable("schema_migrations"));
  if (taken)
    return Status::Error("copy: " + dst->path() +
                         " already holds a ledger (it has schema_migrations); copy "
                         "writes only into a new file or an empty database");
  Db& s = src->db();
  VERITY_ASSIGN_OR_RETURN(auto migrations,
                          s.Query("SELECT version, name, sha256, applied_at FROM schema_migrations ORDER BY version"));
  // One transaction: a copy that fails half-way leaves the destination empty.
  VERITY_RETURN_IF_ERROR(dst->Transaction([&]() -> Status {
    VERITY_RETURN_IF_ERROR(CopySchema(*dst, migrations));
    VERITY_ASSIGN_OR_RETURN(rep.records, CopyRecords(s, *dst));
    return OkStatus();
  }));
  dst.reset();
  VERITY_ASSIGN_OR_RETURN(auto copy, Ledger::OpenForVerify(to));
  VERITY_ASSIGN_OR_RETURN(const VerifyReport after, copy->Verify(before.tip));
  rep.to_tip = after.tip;
  rep.ok = after.ok && after.tip == before.tip && after.records == before.records;
  if (!after.ok) rep.failure = after.first_broken.empty() ? "the source's tip is not in the copy" : after.first_broken;
  else if (!rep.ok) rep.failure = "the copy's tip or record count differs from the source's";
  return rep;
}

}  // namespace verity::ledger
