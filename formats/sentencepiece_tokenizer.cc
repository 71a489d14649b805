// SentencePiece .model files through libsentencepiece itself: its normalizer,
// its model (BPE or unigram) and its byte fallback, not a re-implementation.
#include <sentencepiece_processor.h>

#include <cstdint>
#include <cstring>
#include <vector>
#include <exception>

#include "formats/tokenizer.h"

namespace verity {
namespace {

class SentencePieceTokenizer : public TextTokenizer {
 public:
  explicit SentencePieceTokenizer(std::string where) : where_(std::move(where)) {}
  sentencepiece::SentencePieceProcessor& sp() { return sp_; }

  // SentencePiece adds nothing itself; add_special adds its BOS (the
  // Llama 2 convention: BOS, no EOS), when the model defines one.
  Result<std::vector<int>> Encode(const std::string& text, bool add_special) const override {
    std::vector<int> ids;
    if (add_special && sp_.bos_id() >= 0) ids.push_back(sp_.bos_id());
    std::vector<int> body;
    const auto st = sp_.Encode(text, &body);
    if (!st.ok()) return Status::Error(where_ + ": SentencePiece encode failed: " + st.ToString());
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }
  Result<std::string> Decode(const std::vector<int>& ids) const override {
    for (size_t i = 0; i < ids.size(); i++)
      if (ids[i] < 0 || ids[i] >= vocab_size())
        return Status::Error("id " + std::to_string(ids[i]) + " (position " + std::to_string(i) +
                             ") is outside the vocabulary [0, " + std::to_string(vocab_size()) + ") of " + where_);
    std::string text;
    const auto st = sp_.Decode(ids, &text);
    if (!st.ok()) return Status::Error(where_ + ": SentencePiece decode failed: " + st.ToString());
    return text;
  }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  std::string kind() const override { return "sentencepiece"; }

 private:
  std::string where_;
  sentencepiece::SentencePieceProcessor sp_;
};

// Protocol-buffer wire format, just enough to walk a message's fields.
struct Wire {
  const std::string& b;
  size_t at;
  size_t end;
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= end) return false;
      const unsigned char c = static_cast<unsigned char>(b[at++]);
      *v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  }
  // Reads one field; for length-delimited ones [*begin, *stop) is the payload.
  bool Field(uint32_t* number, uint32_t* type, size_t* begin, size_t* stop) {
    uint64_t key, v;
    if (!Varint(&key)) return false;
    *number = static_cast<uint32_t>(key >> 3);
    *type = static_cast<uint32_t>(key & 7);
    switch (*type) {
      case 0: return Varint(&v);
      case 1: return (at += 8) <= end;
      case 5: return (at += 4) <= end;
      case 2:
        if (!Varint(&v) || v > end - at) return false;
        *begin = at;
        at += v;
        *stop = at;
        return true;
      default: return false;  // groups are not used by ModelProto
    }
  }
};

// A normalizer's precompiled_charsmap is a uint32 trie size, a darts-clone
// double array and a blob of NUL-terminated replacement strings; the library
// walks the array without bounds checks (a SEGV found by
// tests/fuzz/sentencepiece_fuzz.cc). Every index a lookup can reach must lie
// inside the array and every leaf must point inside the blob.
Status CheckCharsmap(const std::string& map, const std::string& what) {
  if (map.empty()) return OkStatus();
  auto bad = [&what](const std::string& why) { return Status::Error(what + ".precompiled_charsmap " + why); };
  if (map.size() < 5) return bad("is truncated");
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, map.data(), 4);
  if (trie_bytes >= map.size() - 4) return bad("trie size exceeds the charsmap");
  const size_t n = trie_bytes / 4;
  const std::string blob = map.substr(4 + trie_bytes);
  if (n == 0) return bad("has an empty trie");
  if (blob.empty() || blob.back() != '\0') return bad("replacement strings are not NUL-terminated");
  std::vector<uint32_t> units(n);
  std::memcpy(units.data(), map.data() + 4, n * 4);
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); };
  // Walk every node a lookup can reach (free slots of the array hold
  // anything and are never read): each node's 256 child probes must lie in
  // the array, and each leaf's value inside the replacement strings.
  std::vector<uint64_t> todo{static_cast<uint64_t>(offset(units[0]))};  // the root's child block
  std::vector<bool> seen(n, false);
  while (!todo.empty()) {
    const uint64_t block = todo.back();
    todo.pop_back();
    if ((block | 0xFF) >= n) return bad("points outside the trie");
    for (uint32_t c = 0; c < 256; c++) {
      const uint64_t j = block ^ c;
      if ((units[j] & ((1U << 31) | 0xFF)) != c || seen[j]) continue;  // no child labelled c
      seen[j] = true;
      const uint64_t next = j ^ offset(units[j]);
      if ((next | 0xFF) >= n) return bad("unit " + std::to_string(j) + " points outside the trie");
      if (((units[j] >> 8) & 1) && (units[next] & ((1U << 31) - 1)) >= blob.size())
        return bad("unit " + std::to_string(j) + " points outside the replacement strings");
      todo.push_back(next);
    }
  }
  return OkStatus();
}

// libsentencepiece trusts its model file: a piece that is empty or holds a
// NUL byte makes its trie builder throw through the loader (found by
// tests/fuzz/sentencepiece_fuzz.cc). Checks the ModelProto's pieces and
// charsmaps first.
Status CheckPieces(const std::string& b, const std::string& where) {
  Wire top{b, 0, b.size()};
  int index = 0;
  while (top.at < top.end) {
    uint32_t number, type;
    size_t begin = 0, stop = 0;
    if (!top.Field(&number, &type, &begin, &stop))
      return Status::Error(where + ": not a SentencePiece model (malformed protocol buffer at byte " +
                           std::to_string(top.at) + ")");
    if ((number == 3 || number == 5) && type == 2) {  // normalizer_spec, denormalizer_spec
      const std::string what = number == 3 ? "normalizer_spec" : "denormalizer_spec";
      Wire spec{b, begin, stop};
      while (spec.at < spec.end) {
        uint32_t n, t;
        size_t sb = 0, ss = 0;
        if (!spec.Field(&n, &t, &sb, &ss))
          return Status::Error(where + ": not a SentencePiece model (" + what + " is malformed)");
        if (n == 2 && t == 2) {
          Status st = CheckCharsmap(b.substr(sb, ss - sb), what);
          if (!st.ok()) return Status::Error(where + ": not a SentencePiece model (" + st.message() + ")");
        }
      }
      continue;
    }
    if (number != 1 || type != 2) continue;  // pieces
    Wire piece{b, begin, stop};
    bool has_text = false;
    while (piece.at < piece.end) {
      uint32_t n, t;
      size_t pb = 0, ps = 0;
      if (!piece.Field(&n, &t, &pb, &ps))
        return Status::Error(where + ": not a SentencePiece model (pieces[" + std::to_string(index) +
                             "] is malformed)");
      if (n == 1 && t == 2) {
        const std::string text = b.substr(pb, ps - pb);
        if (text.empty() || text.find('\0') != std::string::npos)
          return Status::Error(where + ": not a SentencePiece model (pieces[" + std::to_string(index) +
                               "].piece is empty or holds a NUL byte)");
        has_text = true;
      }
    }
    if (!has_text)
      return Status::Error(where + ": not a SentencePiece model (pieces[" + std::to_string(index) + "] has no piece)");
    index++;
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<TextTokenizer>> ParseSentencePiece(const std::string& model_proto, const std::string& where) {
  VERITY_RETURN_IF_ERROR(CheckPieces(model_proto, where));
  auto t = std::make_unique<SentencePieceTokenizer>(where);
  sentencepiece::util::Status st;
  try {  // the library's trie builder reports some bad models by throwing
    st = t->sp().LoadFromSerializedProto(model_proto);
  } catch (const std::exception& e) {
    return Status::Error(where + ": not a SentencePiece model: " + e.what());
  }
  if (!st.ok()) return Status::Error(where + ": not a SentencePiece model: " + st.ToString());
  if (t->vocab_size() <= 0) return Status::Error(where + ": SentencePiece model has no pieces");
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

}  // namespace verity
