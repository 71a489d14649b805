// SentencePiece .model files through libsentencepiece itself: its normalizer,
// its model (BPE or unigram) and its byte fallback, not a re-implementation.
#include <sentencepiece_processor.h>

#include <cstdint>
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

// libsentencepiece trusts its model file: a piece that is empty or holds a
// NUL byte makes its trie builder throw through the loader (found by
// tests/fuzz/sentencepiece_fuzz.cc). Checks the ModelProto's pieces first.
Status CheckPieces(const std::string& b, const std::string& where) {
  Wire top{b, 0, b.size()};
  int index = 0;
  while (top.at < top.end) {
    uint32_t number, type;
    size_t begin = 0, stop = 0;
    if (!top.Field(&number, &type, &begin, &stop))
      return Status::Error(where + ": not a SentencePiece model (malformed protocol buffer at byte " +
                           std::to_string(top.at) + ")");
    if (number != 1 || type != 2) continue;  // pieces only
    Wire piece{b, begin, stop};
    bool has_text = false;
    while (piece.at < piece.end) {
      uint32_t n, t;
      size_t pb = 0, ps = 0;
      if (!piece.Field(&n, &t, &pb, &ps))
        return Status::Error(where + ": not a SentencePiece model (pieces[" + std::to_string(index) + "] is malformed)");
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
