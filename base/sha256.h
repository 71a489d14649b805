// SHA-256 and HMAC-SHA256 (OpenSSL libcrypto), as lowercase hex.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace verity {

std::string Sha256Hex(std::string_view bytes);
std::string Sha256Hex(const void* data, size_t size);
// Hash of a whole file's bytes; error names the file when it cannot be read.
Result<std::string> Sha256File(const std::string& path);
// HMAC-SHA256 (RFC 2104) of `data` under `key`, as 64 lowercase hex chars.
// Any bytes are allowed in both (NULs included); an empty key is a valid,
// if useless, key. Used for keyed ledger seals (VERITY_LEDGER_KEY).
std::string HmacSha256Hex(std::string_view key, std::string_view data);

}  // namespace verity
