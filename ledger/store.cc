#include "ledger/store.h"

#include <regex>

namespace verity::ledger {

bool IsPostgresUrl(const std::string& where) {
  return where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0;
}

std::string RedactedLedgerName(const std::string& where) {
  if (!IsPostgresUrl(where)) return where;
  // scheme://user:PASSWORD@host and ?password=PASSWORD never reach a message.
  static const std::regex userinfo(R"(^(postgres(?:ql)?://[^/@:]*):[^/@]*@)");
  static const std::regex param(R"(([?&]password=)[^&]*)");
  std::string s = std::regex_replace(where, userinfo, "$1:***@");
  return std::regex_replace(s, param, "$1***");
}

Status Store::ForEachRow(const std::string& sql, const std::vector<Value>& args,
                         const std::function<Status(const Row&)>& row) {
  VERITY_ASSIGN_OR_RETURN(auto rows, Run(sql, args, nullptr));
  for (const Row& r : rows) VERITY_RETURN_IF_ERROR(row(r));
  return OkStatus();
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& where, bool read_only) {
  if (IsPostgresUrl(where)) return OpenPostgresStore(where, read_only);
  return OpenSqliteStore(where, read_only);
}

}  // namespace verity::ledger
