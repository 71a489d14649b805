// Checkpoint configs from bytes: the llama2.c header and config.json. Pure
// parsing (no files, no allocation beyond the result), so the fuzz targets in
// tests/fuzz/ link this file alone.
#include "engine/checkpoint_config.h"

#include <cfloat>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <nlohmann/json.hpp>

namespace verity {

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  const std::pair<const char*, int> fields[] = {{"dim", c.dim},         {"hidden_dim", c.hidden_dim},
                                                {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                                                {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size},
                                                {"seq_len", c.seq_len}};
  for (const auto& [name, v] : fields)
    if (v <= 0) return Status::Error(where + ": " + name + " must be positive, got " + std::to_string(v));
  if (c.dim % c.n_heads != 0)
    return Status::Error(where + ": dim (" + std::to_string(c.dim) + ") is not divisible by n_heads (" +
                         std::to_string(c.n_heads) + ")");
  if (c.n_heads % c.n_kv_heads != 0)
    return Status::Error(where + ": n_heads (" + std::to_string(c.n_heads) +
                         ") is not divisible by n_kv_heads (" + std::to_string(c.n_kv_heads) + ")");
  if (c.head_size() % 2 != 0)
    return Status::Error(where + ": head size dim/n_heads = " + std::to_string(c.head_size()) +
                         " is odd; RoPE needs pairs");
  if (!(c.rope_theta > 0.0f)) return Status::Error(where + ": rope_theta must be positive");
  if (!(c.norm_eps > 0.0f)) return Status::Error(where + ": norm epsilon must be positive");
  return OkStatus();
}

namespace {

constexpr int kHeaderInts = 7;
const char* kFieldNames[kHeaderInts] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                        "n_kv_heads", "vocab_size", "seq_len"};

// The product of `factors`, or false when it overflows int64 (header fields
// are int32, so a layer count times two widths can).
bool Product(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return false;
  *out = p;
  return true;
}

}  // namespace

int64_t Llama2cLayout::total() const {
  return embedding + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final + rope_tables + classifier;
}

Result<Llama2cLayout> Llama2cLayoutOf(const ModelConfig& c, const std::string& where) {
  const int64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), V = c.vocab_size;
  Llama2cLayout l{};  // zeros where a product overflowed
  bool ok = Product({V, d}, &l.embedding) && Product({L, d}, &l.rms_att) && Product({L, d, d}, &l.wq) &&
            Product({L, d, kv}, &l.wk) && Product({L, d, kv}, &l.wv) && Product({L, d, d}, &l.wo) &&
            Product({L, d}, &l.rms_ffn) && Product({L, h, d}, &l.w1) && Product({L, d, h}, &l.w2) &&
            Product({L, h, d}, &l.w3) && Product({d}, &l.rms_final) &&
            // The unused legacy RoPE tables: seq_len * head_size / 2 floats, twice.
            Product({2, c.seq_len, c.head_size() / 2}, &l.rope_tables) &&
            Product({c.shared_classifier ? 0 : V, d}, &l.classifier);
  // The sum, and the file size it implies, must fit too.
  int64_t sum = 0;
  for (int64_t n : {l.embedding, l.rms_att, l.wq, l.wk, l.wv, l.wo, l.rms_ffn, l.w1, l.w2, l.w3, l.rms_final,
                    l.rope_tables, l.classifier})
    ok = ok && !__builtin_add_overflow(sum, n, &sum);
  int64_t bytes = 0;
  ok = ok && Product({sum, 4}, &bytes) && !__builtin_add_overflow(bytes, kLlama2cHeaderBytes, &bytes);
  if (!ok) return Status::Error(where + ": the tensors this config implies exceed 2^63 bytes");
  return l;
}

Result<ModelConfig> ParseLlama2cHeader(const unsigned char* bytes, size_t size, const std::string& path) {
  if (size < static_cast<size_t>(kLlama2cHeaderBytes))
    return Status::Error(path + ": truncated header: " + std::to_string(size) +
                         " bytes, a llama2.c header needs 28");
  int32_t h[kHeaderInts];
  std::memcpy(h, bytes, sizeof h);
  for (int i = 0; i < kHeaderInts; i++)
    if (h[i] == 0 || (h[i] < 0 && i != 5))
      return Status::Error(path + ": header field " + kFieldNames[i] + " must be positive, got " +
                           std::to_string(h[i]));
  ModelConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;  // negative vocab: unshared classifier follows
  if (h[5] == INT32_MIN) return Status::Error(path + ": header field vocab_size is out of range");
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = h[6];
  c.rope_theta = Llama2cFormat::kRopeTheta;
  c.norm_eps = Llama2cFormat::kNormEps;
  c.rope_style = RopeStyle::kInterleaved;
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));

  // A layout too large for int64 cannot match any file: report it as the size mismatch it is.
  const Result<Llama2cLayout> lay = Llama2cLayoutOf(c, path);
  const int64_t file_size = static_cast<int64_t>(size);
  const int64_t want = lay.ok() ? kLlama2cHeaderBytes + lay->total() * 4 : INT64_MAX;
  if (!lay.ok() || file_size != want)
    return Status::Error(path + ": file is " + std::to_string(file_size) + " bytes but the header (dim=" +
                         std::to_string(c.dim) + " hidden_dim=" + std::to_string(c.hidden_dim) +
                         " n_layers=" + std::to_string(c.n_layers) + " n_heads=" + std::to_string(c.n_heads) +
                         " n_kv_heads=" + std::to_string(c.n_kv_heads) + " vocab_size=" +
                         std::to_string(h[5]) + " seq_len=" + std::to_string(c.seq_len) + ") implies " +
                         (lay.ok() ? std::to_string(want) : std::string("more than 2^63")) +
                         (file_size < want ? " (truncated)" : " (trailing bytes)"));
  return c;
}

Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    return Status::Error(path + ": not valid JSON");
  }
  if (!j.is_object()) return Status::Error(path + ": not a JSON object");
  auto need = [&](const char* key) -> Result<nlohmann::json> {
    if (!j.contains(key)) return Status::Error(path + ": required key '" + std::string(key) + "' is missing");
    return j[key];
  };
  auto need_int = [&](const char* key, int* dst) -> Status {
    VERITY_ASSIGN_OR_RETURN(nlohmann::json v, need(key));
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > INT32_MAX)
      return Status::Error(path + ": key '" + std::string(key) + "' must be a positive integer");
    *dst = v.get<int>();
    return OkStatus();
  };
  auto need_float = [&](const char* key, float* dst) -> Status {
    VERITY_ASSIGN_OR_RETURN(nlohmann::json v, need(key));
    if (!v.is_number() || !(v.get<double>() > 0)) return Status::Error(path + ": key '" + std::string(key) + "' must be a positive number");
    // Beyond float range the value would be read as inf (a RoPE without rotation, a norm that zeroes).
    if (v.get<double>() > FLT_MAX)
      return Status::Error(path + ": key '" + std::string(key) + "' is " + v.dump() + ", beyond float range");
    *dst = static_cast<float>(v.get<double>());
    return OkStatus();
  };
  ModelConfig c;
  VERITY_ASSIGN_OR_RETURN(nlohmann::json type, need("model_type"));
  if (!type.is_string() || (type != "llama" && type != "mixtral"))
    return Status::Error(path + ": model_type must be \"llama\" or \"mixtral\"");
  VERITY_RETURN_IF_ERROR(need_int("hidden_size", &c.dim));
  VERITY_RETURN_IF_ERROR(need_int("intermediate_size", &c.hidden_dim));
  VERITY_RETURN_IF_ERROR(need_int("num_hidden_layers", &c.n_layers));
  VERITY_RETURN_IF_ERROR(need_int("num_attention_heads", &c.n_heads));
  VERITY_RETURN_IF_ERROR(need_int("num_key_value_heads", &c.n_kv_heads));
  VERITY_RETURN_IF_ERROR(need_int("vocab_size", &c.vocab_size));
  VERITY_RETURN_IF_ERROR(need_int("max_position_embeddings", &c.seq_len));
  VERITY_RETURN_IF_ERROR(need_float("rms_norm_eps", &c.norm_eps));
  VERITY_RETURN_IF_ERROR(need_float("rope_theta", &c.rope_theta));
  VERITY_ASSIGN_OR_RETURN(nlohmann::json tie, need("tie_word_embeddings"));
  if (!tie.is_boolean()) return Status::Error(path + ": key 'tie_word_embeddings' must be true or false");
  c.shared_classifier = tie.get<bool>();
  VERITY_ASSIGN_OR_RETURN(nlohmann::json act, need("hidden_act"));
  if (act != "silu") return Status::Error(path + ": hidden_act " + act.dump() + " is not supported (only \"silu\")");
  if (type == "mixtral") {
    VERITY_RETURN_IF_ERROR(need_int("num_local_experts", &c.n_experts));
    VERITY_RETURN_IF_ERROR(need_int("num_experts_per_tok", &c.n_experts_per_tok));
    if (c.n_experts_per_tok > c.n_experts)
      return Status::Error(path + ": num_experts_per_tok exceeds num_local_experts");
  }
  c.rope_style = RopeStyle::kHalves;  // the Hugging Face convention
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));
  return c;
}

std::string HfConfigText(const ModelConfig& c, const std::string& torch_dtype) {
  nlohmann::json cfg = {{"architectures", {c.n_experts > 0 ? "MixtralForCausalLM" : "LlamaForCausalLM"}},
                        {"model_type", c.n_experts > 0 ? "mixtral" : "llama"},
                        {"hidden_size", c.dim},
                        {"intermediate_size", c.hidden_dim},
                        {"num_hidden_layers", c.n_layers},
                        {"num_attention_heads", c.n_heads},
                        {"num_key_value_heads", c.n_kv_heads},
                        {"vocab_size", c.vocab_size},
                        {"max_position_embeddings", c.seq_len},
                        {"rms_norm_eps", static_cast<double>(c.norm_eps)},
                        {"rope_theta", static_cast<double>(c.rope_theta)},
                        {"tie_word_embeddings", c.shared_classifier},
                        {"hidden_act", "silu"},
                        {"torch_dtype", torch_dtype}};
  if (c.n_experts > 0) {
    cfg["num_local_experts"] = c.n_experts;
    cfg["num_experts_per_tok"] = c.n_experts_per_tok;
  }
  return cfg.dump(2) + "\n";
}

}  // namespace verity
