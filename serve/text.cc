#include "serve/text.h"

#include <algorithm>

#include "base/utf8.h"

namespace verity::serve {

TextCodec::TextCodec(const TextTokenizer& tok, const ModelConfig& config)
    : tok_(tok), llama2c_(dynamic_cast<const Llama2cTokenizer*>(&tok)), c_(config) {
  bos_ = c_.bos_id >= 0 ? c_.bos_id : tok_.bos_id();
}

// As engine/generate.cc's Generate: llama2.c prompts are BOS + run.c's
// encoding; other tokenizers add the specials their files ask for.
Result<std::vector<int>> TextCodec::EncodePrompt(const std::string& text) const {
  std::vector<int> ids;
  if (llama2c_) {
    if (bos_ >= 0) ids.push_back(bos_);
    for (int id : llama2c_->Encode(text, /*bos=*/false, /*eos=*/false)) ids.push_back(id);
  } else {
    VERITY_ASSIGN_OR_RETURN(ids, tok_.Encode(text, /*add_special=*/true));
    if (ids.empty() && tok_.bos_id() >= 0) ids.push_back(tok_.bos_id());
  }
  if (ids.empty()) return Status::Error("prompt: empty, and the model defines no BOS token to start from");
  return ids;
}

Result<std::vector<int>> TextCodec::EncodeChat(const std::string& text) const {
  VERITY_ASSIGN_OR_RETURN(std::vector<int> ids, tok_.Encode(text, /*add_special=*/false));
  if (ids.empty()) return Status::Error("messages: the chat template rendered an empty prompt");
  return ids;
}

bool TextCodec::Ends(int token) const {
  if (llama2c_ ? token == bos_ : token == tok_.eos_id()) return true;
  return std::find(c_.eos_ids.begin(), c_.eos_ids.end(), token) != c_.eos_ids.end();
}

std::string TextCodec::TokenText(int prev, int token) const {
  if (llama2c_) return SafePiece(llama2c_->Decode(prev, token));
  auto t = tok_.Decode({token});
  return t.ok() ? *t : std::string();
}

TextStream::TextStream(const TextCodec& codec, std::vector<int> prompt, std::vector<std::string> stop)
    : codec_(codec), prompt_(std::move(prompt)), stop_(std::move(stop)) {
  if (!dynamic_cast<const Llama2cTokenizer*>(&codec_.tokenizer())) {
    auto t = codec_.tokenizer().Decode(prompt_);
    if (t.ok()) prefix_text_ = *t;
  }
}

// Byte-level tokenizers decode whole sequences (a piece alone may be half a
// character): the completion is the decoding of prompt + ids past the
// prompt's own decoding, when that is a prefix (it is, but for tokenizers
// that merge across the boundary), else the ids decoded alone.
std::string TextStream::Decoded() const {
  std::vector<int> all = prompt_;
  all.insert(all.end(), ids_.begin(), ids_.end());
  auto t = codec_.tokenizer().Decode(all);
  if (t.ok() && t->compare(0, prefix_text_.size(), prefix_text_) == 0) return t->substr(prefix_text_.size());
  auto alone = codec_.tokenizer().Decode(ids_);
  return alone.ok() ? *alone : std::string();
}

bool TextStream::Add(int token) {
  if (stopped_) return true;
  const int prev = ids_.empty() ? prompt_.back() : ids_.back();
  ids_.push_back(token);
  if (dynamic_cast<const Llama2cTokenizer*>(&codec_.tokenizer())) text_ += codec_.TokenText(prev, token);
  else text_ = Decoded();
  size_t cut = std::string::npos;
  for (const std::string& s : stop_)
    if (!s.empty()) cut = std::min(cut, text_.find(s));
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  return stopped_;
}

// Released text ends before any suffix that could still grow into a stop
// string, and before a trailing U+FFFD (a character whose bytes are not all in).
size_t TextStream::Safe() const {
  size_t end = text_.size();
  if (stopped_) return end;
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (end >= kReplacement.size() && text_.compare(end - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
    end -= kReplacement.size();
  end -= utf8::IncompleteTail(text_, end);
  size_t hold = 0;
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, end); k > hold; k--)
      if (text_.compare(end - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return end - hold;
}

std::string TextStream::Take(bool final) {
  const size_t safe = final ? text_.size() : std::max(Safe(), sent_);
  if (safe <= sent_) return std::string();
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return final ? utf8::Lossy(out) : out;
}

}  // namespace verity::serve
