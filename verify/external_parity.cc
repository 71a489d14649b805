#include "verify/external_parity.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "verify/ref_logits.h"

namespace verity {

std::string EscapedBytes(const std::string& bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

OutputIdentity CompareOutputs(const std::string& head, const std::string& base) {
  OutputIdentity r;
  r.head_bytes = head.size();
  r.base_bytes = base.size();
  r.identical = head == base;
  if (r.identical) return r;
  const auto mismatch = std::mismatch(head.begin(), head.begin() + std::min(head.size(), base.size()), base.begin());
  const size_t at = static_cast<size_t>(mismatch.first - head.begin());
  r.first_diff = static_cast<long long>(at);
  // A little context before the difference shows where in the text it is.
  const size_t from = at > kSnippetBytes / 4 ? at - kSnippetBytes / 4 : 0;
  r.head_snippet = EscapedBytes(head.substr(std::min(from, head.size()), kSnippetBytes));
  r.base_snippet = EscapedBytes(base.substr(std::min(from, base.size()), kSnippetBytes));
  return r;
}

Result<std::vector<float>> ReadLogitsRows(const std::string& path, int tokens, int vocab, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::Error(what + " " + path + ": no such file");
  const auto size = static_cast<long long>(std::filesystem::file_size(path, ec));
  const long long row = 4LL * vocab, want = row * tokens;
  if (size != want) {
    std::string why = "truncated";
    if (size > want) why = "longer than expected";
    if (size > 0 && size % (4LL * tokens) == 0)
      why = "a vocab mismatch: it divides into " + std::to_string(tokens) + " rows of " +
            std::to_string(size / (4LL * tokens)) + " floats, not vocab_size " + std::to_string(vocab);
    return Status::Error(what + " " + path + ": " + std::to_string(size) + " bytes, expected " +
                         std::to_string(tokens) + " rows x vocab_size " + std::to_string(vocab) +
                         " x 4 = " + std::to_string(want) + " bytes (" + why + ")");
  }
  std::vector<float> v(static_cast<size_t>(tokens) * vocab);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(v.data()), want)) return Status::Error(what + " " + path + ": read failed");
  return v;
}

namespace {

// A verity.ref-logits/1 file must be of the same sequence and vocabulary.
Result<RefLogits> ReadMatchingRefFile(const std::string& path, const std::vector<int>& tokens, int vocab) {
  VERITY_ASSIGN_OR_RETURN(RefLogits ref, ReadRefLogits(path));
  if (ref.vocab_size != vocab)
    return Status::Error(path + ": vocab_size " + std::to_string(ref.vocab_size) + " but the config says " +
                         std::to_string(vocab) + " (a vocab mismatch)");
  if (ref.tokens != tokens)
    return Status::Error(path + ": its tokens are not the teacher-forced sequence (" +
                         std::to_string(ref.tokens.size()) + " ids in the file, " + std::to_string(tokens.size()) +
                         " given)");
  return ref;
}

}  // namespace

Result<ParityReport> CompareLogitsFiles(const std::string& reference, const std::string& candidate,
                                        const std::vector<int>& tokens, int vocab, const ParityOptions& opt) {
  const int T = static_cast<int>(tokens.size());
  if (T <= 0 || vocab <= 0) return Status::Error("logits parity: no tokens or no vocab_size");
  VERITY_ASSIGN_OR_RETURN(auto got, ReadLogitsRows(candidate, T, vocab, "candidate logits file"));
  if (IsRefLogitsFile(reference)) {
    VERITY_ASSIGN_OR_RETURN(RefLogits ref, ReadMatchingRefFile(reference, tokens, vocab));
    std::vector<const float*> rows(T);
    for (int p = 0; p < T; p++) rows[p] = ref.Row(p);
    return CompareRows(rows, got, vocab, opt);
  }
  VERITY_ASSIGN_OR_RETURN(auto ref, ReadLogitsRows(reference, T, vocab, "reference logits file"));
  return CompareLogits(ref, got, vocab, opt);
}

}  // namespace verity
