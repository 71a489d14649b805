// llama2.c tokenizer.bin: score-ordered BPE with byte fallback <0xNN>,
// encoding and decoding exactly as llama2.c's run.c does.
#pragma once

#include <string>
#include <vector>

#include "formats/tokenizer.h"

namespace verity {

class Llama2cTokenizer : public TextTokenizer {
 public:
  // Reads the file and parses it (Parse).
  [[nodiscard]] static Result<Llama2cTokenizer> Load(const std::string& path);
  // Reads exactly `vocab_size` entries; a file holding more or fewer is an error.
  [[nodiscard]] static Result<Llama2cTokenizer> Load(const std::string& path, int vocab_size);
  // Parses the bytes of a tokenizer.bin (`path` names it in errors): every
  // entry up to the end, each length within [0, max_token_length], at least
  // the 3 entries <unk>, <s>, </s>.
  [[nodiscard]] static Result<Llama2cTokenizer> Parse(const std::string& bytes, const std::string& path);

  // Encodes like run.c's encode(): optional BOS, the dummy-prefix space when
  // text is non-empty, UTF-8 code points or byte fallback, then merges by score.
  std::vector<int> Encode(const std::string& text, bool bos, bool eos) const;
  // The piece for `token` following `prev` (leading space dropped after BOS,
  // <0xNN> turned into its byte).
  std::string Decode(int prev, int token) const;

  // TextTokenizer: add_special adds BOS only (run.c's generate never adds EOS).
  Result<std::vector<int>> Encode(const std::string& text, bool add_special) const override;
  // run.c's pieces in sequence, the first read as following BOS (so the dummy
  // prefix space goes); BOS and EOS themselves print nothing, as in run.c.
  Result<std::string> Decode(const std::vector<int>& ids) const override;
  // The ids of the pieces "\n<s>\n" / "\n</s>\n" (or "<s>" / "</s>") in the
  // file; llama2.c's format-defined 1 and 2 when the file names neither.
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  int vocab_size() const override { return static_cast<int>(vocab_.size()); }
  std::string kind() const override { return "llama2c"; }

 private:
  int Lookup(const std::string& s) const;
  std::vector<std::string> vocab_;
  std::vector<float> scores_;
  std::vector<int> sorted_;  // indices into vocab_, sorted by string
  int bos_ = 1, eos_ = 2;
};

}  // namespace verity
