#include "ledger/identity.h"

#include <algorithm>

#include "base/sha256.h"

namespace verity::ledger {

bool NamesSource(const std::string& id) {
  const std::string dirty = "-dirty";
  if (id.empty() || id == "unknown") return false;
  return !(id.size() >= dirty.size() && id.compare(id.size() - dirty.size(), dirty.size(), dirty) == 0);
}

ChangeIdentity IdentityOf(const SideRun& base, const SideRun& head) {
  ChangeIdentity id;
  const bool one_artifact = base.artifact_sha256 == head.artifact_sha256;
  auto artifact = [&](const SideRun& s) {
    if (s.artifact_sha256.empty()) return std::string();
    std::string k = "artifact " + s.artifact_sha256;
    if (one_artifact) k += " run by " + Sha256Hex(s.command);
    return k;
  };
  for (const auto* s : {&base, &head}) {
    auto& keys = s == &base ? id.base : id.head;
    if (std::string a = artifact(*s); !a.empty()) keys.push_back(a);
    if (NamesSource(base.build_id) && NamesSource(head.build_id) && base.build_id != head.build_id)
      keys.push_back("build " + s->build_id);
  }
  return id;
}

bool ChangeIdentity::IsPair() const { return !base.empty() && !head.empty() && !SharesKey(base, head); }

std::vector<std::string> CountingKeys(const std::vector<std::string>& keys) {
  std::vector<std::string> out = keys;
  for (const auto& k : keys)
    if (auto by = k.find(" run by "); by != std::string::npos) {
      const std::string bare = k.substr(0, by);
      if (std::find(out.begin(), out.end(), bare) == out.end()) out.push_back(bare);
    }
  return out;
}

bool SharesKey(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const auto& k : a)
    if (std::find(b.begin(), b.end(), k) != b.end()) return true;
  return false;
}

bool SameChange(const ChangeIdentity& a, const ChangeIdentity& b) {
  return a.IsPair() && b.IsPair() && SharesKey(a.base, b.base) && SharesKey(a.head, b.head);
}

std::string KeyText(const std::string& key) {
  if (key.rfind("build ", 0) == 0) return "build " + key.substr(6, 40);
  if (key.rfind("artifact ", 0) == 0) {
    std::string out = "artifact " + key.substr(9, 12);
    if (auto by = key.find(" run by "); by != std::string::npos) out += " run by command " + key.substr(by + 8, 12);
    return out;
  }
  return key.substr(0, 24);
}

}  // namespace verity::ledger
