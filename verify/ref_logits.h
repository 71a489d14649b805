// Reference logits files: rows of logits that an independent implementation
// (tests/reference/llama_ref.py) computed for a token sequence, with the model
// they came from. The format is described in docs/parity.md.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace verity {

struct RefLogits {
  std::string path;
  std::string sha256;        // of the whole file
  std::string generator;     // what computed the rows, as its header says
  std::string model_path;    // as recorded (informational)
  std::string model_sha256;  // ModelSha256 of the model the rows came from
  int vocab_size = 0;
  std::vector<int> tokens;     // the sequence, position p holds tokens[p]
  std::vector<int> positions;  // rows held, strictly increasing, < tokens.size()
  std::vector<float> rows;     // positions.size() x vocab_size, in positions order

  // Returns the row for `position`, or nullptr when the file holds none.
  const float* Row(int position) const;
};

// The 8 bytes every reference logits file begins with.
inline constexpr char kRefLogitsMagic[] = "VRLOGIT1";

// Returns true iff `path` is a regular file beginning with kRefLogitsMagic.
bool IsRefLogitsFile(const std::string& path);

// Reads and checks a reference logits file: magic, header JSON (schema
// verity.ref-logits/1, every field present and typed), positions sorted and
// inside the tokens, and exactly positions x vocab_size f32 rows after the
// header. Errors name the file and the field.
[[nodiscard]] Result<RefLogits> ReadRefLogits(const std::string& path);

// The model identity a reference logits file records: the sha256 of a
// checkpoint file, or for a Hugging Face directory the sha256 of its manifest
// (one line "<sha256>  <name>\n" per config.json, model.safetensors.index.json
// and *.safetensors file, sorted by name).
[[nodiscard]] Result<std::string> ModelSha256(const std::string& path);

}  // namespace verity
