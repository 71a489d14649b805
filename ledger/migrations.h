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

}  // namespace verity::ledger
