#include "protocol/json_object.h"

#include <memory>
#include <set>
#include <vector>

namespace verity::protocol {
namespace {

// A parser callback that notes, in *found, the first key an object states twice.
nlohmann::json::parser_callback_t DuplicateKeyFinder(std::string* found) {
  auto open = std::make_shared<std::vector<std::set<std::string>>>();  // keys of each open object
  return [open, found](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open->emplace_back();
    else if (event == E::object_end && !open->empty()) open->pop_back();
    else if (event == E::key && !open->empty() && !open->back().insert(parsed.get<std::string>()).second &&
             found->empty())
      *found = parsed.get<std::string>();
    return true;
  };
}

}  // namespace

std::string Tail(const std::string& s, size_t n) {
  std::string t = s.size() > n ? "..." + s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

Result<nlohmann::json> ParseObjectText(const std::string& text, const std::string& what, const std::string& schema) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::Error(what + " printed nothing on stdout (expected one " + schema + " JSON object)");
  nlohmann::json j;
  std::string duplicate;
  try {
    j = nlohmann::json::parse(text, DuplicateKeyFinder(&duplicate));
  } catch (const std::exception&) {
    return Status::Error(what + " did not print one JSON object on stdout: '" + Tail(text) + "'");
  }
  if (!duplicate.empty())
    return Status::Error(what + " printed key \"" + duplicate +
                         "\" twice in one object: a record whose keys repeat "
                         "is ambiguous (which value counts?), refused");
  if (!j.is_object()) return Status::Error(what + " printed JSON that is not an object");
  return j;
}

Status CheckSchema(const nlohmann::json& j, const std::string& what, const std::string& schema) {
  if (!j.contains("schema") || !j["schema"].is_string())
    return Status::Error(what + " printed JSON without a \"schema\" field (expected " + schema + ")");
  if (j["schema"] != schema)
    return Status::Error(what + " printed schema '" + j["schema"].get<std::string>() + "', expected " + schema);
  return OkStatus();
}

}  // namespace verity::protocol
