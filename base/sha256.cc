#include "base/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace verity {
namespace {
std::string Hex(const unsigned char* d, unsigned n) {
  static const char* k = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (unsigned i = 0; i < n; i++) {
    s[2 * i] = k[d[i] >> 4];
    s[2 * i + 1] = k[d[i] & 15];
  }
  return s;
}
// SHA-256 fetched once: OpenSSL 3 looks EVP_sha256() up in its provider
// tables on every init, a tenth of a sealed insert's time.
const EVP_MD* Sha256() {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched ? fetched : EVP_sha256();
  }();
  return md;
#else
  return EVP_sha256();  // OpenSSL 1.1 has no provider lookup to avoid
#endif
}
}  // namespace

std::string Sha256Hex(const void* data, size_t size) {
  // One context per thread, reused: allocating one per hash dominated small inputs.
  thread_local std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestInit_ex(ctx.get(), Sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), data, size);
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  return Hex(md, n);
}

std::string Sha256Hex(std::string_view bytes) { return Sha256Hex(bytes.data(), bytes.size()); }

Result<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::Error(path + ": cannot open for hashing");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  // On the heap: 64 KB on a thread's stack stays resident for the thread's
  // life (a server's handler threads each grew by it on their first /health).
  std::vector<char> buf(1 << 16);
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) EVP_DigestUpdate(ctx.get(), buf.data(), got);
  if (std::ferror(f.get())) return Status::Error(path + ": read error while hashing");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  return Hex(md, n);
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  static const unsigned char kNothing = 0;  // HMAC() wants non-null pointers even for empty input
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kNothing) : key.data();
  const unsigned char* d = data.empty() ? &kNothing : reinterpret_cast<const unsigned char*>(data.data());
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), d, data.size(), md, &n) == nullptr) return std::string();
  return Hex(md, n);
}

}  // namespace verity
