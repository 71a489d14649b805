// The schema migrations compiled into the binary (from migrations/*.sql).
#pragma once

#include <vector>

namespace verity::ledger {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// Every migration, in version order.
const std::vector<Migration>& EmbeddedMigrations();

// The embedded migration of `version`, or nullptr when this binary has none.
inline const Migration* FindMigration(int version) {
  for (const Migration& m : EmbeddedMigrations())
    if (m.version == version) return &m;
  return nullptr;
}

}  // namespace verity::ledger
