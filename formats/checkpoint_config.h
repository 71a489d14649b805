// What a checkpoint says about its own shape, parsed from bytes without
// touching the file system (so each parser can be fuzzed on its bytes alone):
// the llama2.c header checked against the file size, and a Hugging Face
// config.json. The loaders read the file and call these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/model_config.h"

namespace verity {

// A llama2.c header: seven int32 fields (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len); f32 tensors follow it.
inline constexpr int64_t kLlama2cHeaderBytes = 28;

// Float counts of each llama2.c tensor, in file order.
struct Llama2cLayout {
  int64_t embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, rope_tables, classifier;
  // Returns the sum of the counts (Llama2cLayoutOf checked that it fits).
  int64_t total() const;
};

// The layout `c` implies. Fails, naming `where`, when a count or the file
// size (header plus 4 bytes a float) overflows int64.
[[nodiscard]] Result<Llama2cLayout> Llama2cLayoutOf(const ModelConfig& c, const std::string& where);

// Parses the llama2.c header at the start of `bytes`, the whole file of `size`
// bytes (only the header is read), and checks that every field is positive
// (vocab_size may be negative: an unshared classifier follows), that
// ValidateConfig accepts it, and that `size` is exactly the header plus the
// tensors it implies. The config carries the format's RoPE theta and norm
// epsilon (Llama2cFormat) and interleaved RoPE. Errors name `path` and the
// field or the size.
[[nodiscard]] Result<ModelConfig> ParseLlama2cHeader(const unsigned char* bytes, size_t size, const std::string& path);

// Parses the text of a config.json (`path` names it in errors): every key
// that changes the math is read or refused by name (docs/config-keys.md), MoE
// keys required when model_type is "mixtral", q/k/v biases when "qwen2"; integers must be positive int32
// values and floats positive and within float range. BOS/EOS are config.json's
// (absent: 1 and 2, the spec's); the context is min(max_position_embeddings,
// kDefaultContext). Keys verity does not know go to `notes` when given.
// Returns a config ValidateConfig accepts, with Hugging Face (halves) RoPE.
[[nodiscard]] Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& path,
                                                std::vector<std::string>* notes = nullptr);

// Parses `text` as one JSON object; errors name `path` ("not valid JSON",
// "not a JSON object").
[[nodiscard]] Result<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& path);

// A token id or a list of them (eos_token_id may be either; null: none);
// errors name `path` and `key`.
[[nodiscard]] Result<std::vector<int>> ParseTokenIds(const nlohmann::json& v, const std::string& path, const char* key);

// The config.json text for `c` (what the converter writes), naming
// `torch_dtype` ("float32", "bfloat16"), with head_dim, rope_scaling and the
// BOS/EOS ids. ParseHfConfig reads back the same config, RoPE style aside
// (always halves).
std::string HfConfigText(const ModelConfig& c, const std::string& torch_dtype);

}  // namespace verity
