// Every difference between SQLite's SQL and PostgreSQL's that the ledger
// meets, in one place. The migrations and every query are written once, for
// SQLite; the PostgreSQL store runs them through ToPostgres.
#pragma once

#include <string>
#include <vector>

namespace verity::ledger::dialect {

// A statement or script as PostgreSQL runs it:
// - comments dropped; `?` placeholders numbered `$1`, `$2`, ...;
// - INTEGER -> BIGINT (SQLite's integers are 64-bit), REAL -> DOUBLE PRECISION
//   (SQLite's reals are 8-byte doubles; PostgreSQL's REAL is 4);
// - the column `by` quoted (a reserved word there);
// - group_concat(x) -> string_agg(CAST(x AS TEXT), ',');
// - SQLite's append-only triggers (BEFORE UPDATE|DELETE ... RAISE(ABORT, msg))
//   -> a PL/pgSQL function raising msg and a statement trigger calling it (the
//   DELETE one also fires on TRUNCATE, which skips row triggers).
// String literals and quoted identifiers pass through untouched.
// `function_schema` (if given) qualifies the trigger functions: "pg_temp" when
// verify replays the migrations in a temporary schema, where an unqualified
// function is never looked up.
std::string ToPostgres(const std::string& sql, const std::string& function_schema = "");

// An append-only trigger of a migration, as SQLite declares it.
struct AppendOnlyTrigger {
  std::string name, table, event, message;  // event: UPDATE | DELETE
};
// Every append-only trigger `sql` creates, in order.
std::vector<AppendOnlyTrigger> TriggersIn(const std::string& sql);
// The PL/pgSQL body of a trigger's function, as pg_proc.prosrc holds it.
std::string PostgresTriggerBody(const AppendOnlyTrigger& t);
// pg_trigger.tgtype of the trigger: BEFORE, per statement, UPDATE or DELETE|TRUNCATE.
int PostgresTriggerType(const AppendOnlyTrigger& t);

}  // namespace verity::ledger::dialect
