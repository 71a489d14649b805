// One interface over every tokenizer file verity reads: llama2.c tokenizer.bin,
// Hugging Face tokenizer.json (+ tokenizer_config.json), SentencePiece .model.
// BOS/EOS come from the files; nothing here assumes ids 1 and 2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;

  // The ids of `text`. Added tokens written literally in the text (e.g. "<s>")
  // are always recognised, as Hugging Face tokenizers do; add_special only
  // decides whether the BOS/EOS the files ask for are added around the text.
  // Errors: text that is not valid UTF-8 (formats that need it), a piece with no id.
  [[nodiscard]] virtual Result<std::vector<int>> Encode(const std::string& text, bool add_special) const = 0;
  // The text of `ids`; an id outside [0, vocab_size()) is an error naming it.
  [[nodiscard]] virtual Result<std::string> Decode(const std::vector<int>& ids) const = 0;
  // -1 when the files define none.
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int vocab_size() const = 0;
  // Whether `id` is one of the files' added tokens (tokenizer.json's
  // added_tokens: "<image_soft_token>"), which text names literally, not a
  // piece the model's vocabulary is made of. False by default.
  virtual bool is_added_token(int id) const {
    (void)id;
    return false;
  }
  // "llama2c", "tokenizer.json (bpe)", "sentencepiece": what was loaded.
  virtual std::string kind() const = 0;
};

// Loads a tokenizer, recognised by extension and then by content: `.json` (or
// text starting with '{') is a tokenizer.json, read with the
// tokenizer_config.json beside it when present; `.model` (or a protobuf) is a
// SentencePiece model; anything else a llama2.c tokenizer.bin. A directory is
// searched for tokenizer.json, tokenizer.model, tokenizer.bin in that order.
// Errors name the file and the field.
[[nodiscard]] Result<std::unique_ptr<TextTokenizer>> LoadTokenizer(const std::string& path);

// tokenizer.json from memory (`config_json` may be empty): the parser the
// loader and the fuzz target share. `where` names the file in errors.
[[nodiscard]] Result<std::unique_ptr<TextTokenizer>> ParseHfTokenizer(const std::string& tokenizer_json,
                                                                      const std::string& config_json,
                                                                      const std::string& where);
// A SentencePiece ModelProto from memory, through libsentencepiece.
[[nodiscard]] Result<std::unique_ptr<TextTokenizer>> ParseSentencePiece(const std::string& model_proto,
                                                                        const std::string& where);

}  // namespace verity
