// `verity ledger copy`: one ledger into an empty store, record by record, seals
// and all, so the copy verifies with the same tip (SQLite <-> PostgreSQL).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace verity::ledger {

struct CopyReport {
  int64_t records = 0;   // sealed records copied (the chain's length)
  int schema = 0;        // the schema version both now hold
  std::string from_tip;  // the source's tip, verified before copying
  std::string to_tip;    // the copy's tip, verified after
  bool ok = false;       // the copy verifies, with the source's tip
  std::string failure;   // why not, when !ok
};

// Verifies `from` (refusing one that FAILs), creates in `to` (a new file, or an
// empty PostgreSQL database) the schema `from` has, copies its migration rows,
// every sealed record in chain order and every chain link as stored, in one
// transaction, then verifies `to`. Refuses a `to` that already holds a ledger.
Result<CopyReport> CopyLedger(const std::string& from, const std::string& to);

}  // namespace verity::ledger
