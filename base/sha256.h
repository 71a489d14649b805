// SHA-256 (OpenSSL libcrypto), as lowercase hex.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace verity {

std::string Sha256Hex(std::string_view bytes);
std::string Sha256Hex(const void* data, size_t size);
// Hash of a whole file's bytes; error names the file when it cannot be read.
Result<std::string> Sha256File(const std::string& path);

}  // namespace verity
