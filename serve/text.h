// Text in and out of a served model: a prompt becomes the ids `verity
// generate` would feed (so a served completion at temperature 0 is the
// generate command's text), and generated ids become text incrementally for
// streaming, with stop strings cut exactly where they begin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "formats/tokenizer.h"

namespace verity::serve {

class TextCodec {
 public:
  // `tok` must outlive this.
  TextCodec(const TextTokenizer& tok, const ModelConfig& config);

  // The ids a prompt is fed as: BOS (when the model or tokenizer has one)
  // and the text, as generate encodes it. An error names the prompt.
  [[nodiscard]] Result<std::vector<int>> EncodePrompt(const std::string& text) const;
  // A model's own chat template's text, which writes its special tokens
  // itself: encoded with none added (apply_chat_template's tokenize=True).
  [[nodiscard]] Result<std::vector<int>> EncodeChat(const std::string& text) const;
  // True iff sampling `token` ends the sequence (EOS, or BOS for llama2.c, as run.c).
  bool Ends(int token) const;
  // The token's text when it is streamed, or its display form in logprobs.
  std::string TokenText(int prev, int token) const;
  const TextTokenizer& tokenizer() const { return tok_; }

 private:
  const TextTokenizer& tok_;
  const Llama2cTokenizer* llama2c_;  // run.c's pieces when the tokenizer is one
  const ModelConfig& c_;
  int bos_ = -1;
};

// A completion's text as ids arrive: pieces appended, and the text that is
// safe to send (it cannot yet turn out to be the start of a stop string, and
// for byte-level tokenizers it is whole UTF-8) released in order.
class TextStream {
 public:
  TextStream(const TextCodec& codec, std::vector<int> prompt, std::vector<std::string> stop);
  // Adds a generated id. Returns true iff a stop string is now complete (the
  // text ends before it; nothing after it is ever released).
  bool Add(int token);
  // The text released since the last call. With `final`, everything held
  // back (a partial stop match that never completed, an unfinished UTF-8 sequence as U+FFFD).
  std::string Take(bool final);
  // The whole completion text so far (cut at a stop string once one completed).
  const std::string& text() const { return text_; }

 private:
  std::string Decoded() const;
  size_t Safe() const;

  const TextCodec& codec_;
  std::vector<int> prompt_, ids_;
  std::vector<std::string> stop_;
  std::string prefix_text_;  // the prompt's decoding (byte-level tokenizers): cut from the front
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
};

}  // namespace verity::serve
