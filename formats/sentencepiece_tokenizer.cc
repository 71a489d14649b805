// SentencePiece .model files through libsentencepiece itself: its normalizer,
// its model (BPE or unigram) and its byte fallback, not a re-implementation.
#include <sentencepiece_processor.h>

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

}  // namespace

Result<std::unique_ptr<TextTokenizer>> ParseSentencePiece(const std::string& model_proto, const std::string& where) {
  auto t = std::make_unique<SentencePieceTokenizer>(where);
  const auto st = t->sp().LoadFromSerializedProto(model_proto);
  if (!st.ok()) return Status::Error(where + ": not a SentencePiece model: " + st.ToString());
  if (t->vocab_size() <= 0) return Status::Error(where + ": SentencePiece model has no pieces");
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

}  // namespace verity
