// One JSON object as a producer printed it: the text parsed strictly, a key
// stated twice refused (the parser would keep the last "ok" and lose the
// first), the schema checked. Every record reader starts here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace verity::protocol {

// `text` as exactly one JSON object. `what` starts every error message;
// `schema` names what was expected (in the messages only).
[[nodiscard]] Result<nlohmann::json> ParseObjectText(const std::string& text, const std::string& what,
                                                     const std::string& schema);

// j["schema"] is the string `schema`.
[[nodiscard]] Status CheckSchema(const nlohmann::json& j, const std::string& what, const std::string& schema);

// The last `n` bytes of `s`, "..." before them when cut, without trailing
// newlines and spaces: how error messages quote a producer's output.
std::string Tail(const std::string& s, size_t n = 300);

}  // namespace verity::protocol
