// Checkpoint configs from bytes: the llama2.c header and config.json. Pure
// parsing (no files, no allocation beyond the result), so the fuzz targets in
// tests/fuzz/ link this file and model_config.cc alone.
#include "formats/checkpoint_config.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace verity {

namespace {

constexpr int kHeaderInts = 7;
const char* kFieldNames[kHeaderInts] = {"dim",        "hidden_dim", "n_layers", "n_heads",
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
            Product({2, c.max_positions, c.head_size() / 2}, &l.rope_tables) &&
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
    return Status::Error(path + ": truncated header: " + std::to_string(size) + " bytes, a llama2.c header needs 28");
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
  c.seq_len = c.max_positions = h[6];  // the context is the file's unless --ctx sets it (SetContext)
  if (c.dim % c.n_heads != 0)          // the format has no head_dim: it is dim / n_heads
    return Status::Error(path + ": dim (" + std::to_string(c.dim) + ") is not divisible by n_heads (" +
                         std::to_string(c.n_heads) + ")");
  c.head_dim = c.dim / c.n_heads;
  c.rope_theta = Llama2cFormat::kRopeTheta;
  c.norm_eps = Llama2cFormat::kNormEps;
  c.rope_style = RopeStyle::kInterleaved;
  c.bos_id = Llama2cFormat::kBos;
  c.eos_ids = {Llama2cFormat::kEos};
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));

  // A layout too large for int64 cannot match any file: report it as the size mismatch it is.
  const Result<Llama2cLayout> lay = Llama2cLayoutOf(c, path);
  const int64_t file_size = static_cast<int64_t>(size);
  const int64_t want = lay.ok() ? kLlama2cHeaderBytes + lay->total() * 4 : INT64_MAX;
  if (!lay.ok() || file_size != want)
    return Status::Error(path + ": file is " + std::to_string(file_size) +
                         " bytes but the header (dim=" + std::to_string(c.dim) +
                         " hidden_dim=" + std::to_string(c.hidden_dim) + " n_layers=" + std::to_string(c.n_layers) +
                         " n_heads=" + std::to_string(c.n_heads) + " n_kv_heads=" + std::to_string(c.n_kv_heads) +
                         " vocab_size=" + std::to_string(h[5]) + " seq_len=" + std::to_string(c.seq_len) +
                         ") implies " + (lay.ok() ? std::to_string(want) : std::string("more than 2^63")) +
                         (file_size < want ? " (truncated)" : " (trailing bytes)"));
  return c;
}

namespace {

// Keys verity reads, and keys a Llama/Mixtral config.json may carry that
// change nothing it computes at inference (training, bookkeeping). Any other
// key is reported in a note (docs/config-keys.md).
const char* const kIgnoredKeys[] = {
    "architectures", "torch_dtype", "transformers_version", "initializer_range", "use_cache", "attention_dropout",
    "pretraining_tp", "pad_token_id", "_name_or_path", "router_aux_loss_coef", "router_jitter_noise",
    "output_router_logits", "return_dict", "output_hidden_states", "output_attentions", "is_encoder_decoder", "dtype",
    "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "max_position_embeddings", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling",
    "tie_word_embeddings", "hidden_act", "num_local_experts", "num_experts_per_tok", "bos_token_id", "eos_token_id",
    "max_window_layers",
    // Phi3Config: training-only dropouts; the
    // original context, read by the longrope
    // scaling that ReadRopeScaling refuses.
    "embd_pdrop", "resid_pdrop", "original_max_position_embeddings",
    // Gemma2Config, Gemma3TextConfig: how transformers caches, not what it
    // computes; sliding_window_size, an older copy of sliding_window that
    // Gemma2Config does not read (gemma-2-9b's config carries both).
    "cache_implementation", "sliding_window_size"};
// Keys a Llama/Mixtral config.json may carry that change the math in ways
// verity does not compute: refused when they hold anything but their neutral value.
struct Neutral {
  const char* key;
  bool (*ok)(const nlohmann::json&);
  const char* neutral;
};
bool FalseOrNull(const nlohmann::json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool Null(const nlohmann::json& v) { return v.is_null(); }
bool OneOrNull(const nlohmann::json& v) { return v.is_null() || (v.is_number() && v.get<double>() == 1.0); }
const Neutral kNeutralOnly[] = {{"attention_bias", FalseOrNull, "false"},
                                {"mlp_bias", FalseOrNull, "false"},
                                {"sliding_window", Null, "null"},
                                {"partial_rotary_factor", OneOrNull, "1"},
                                {"quantization_config", Null, "absent"},
                                {"attention_multiplier", Null, "absent"},
                                {"embedding_multiplier", Null, "absent"},
                                {"logits_scaling", Null, "absent"},
                                {"residual_multiplier", Null, "absent"},
                                {"qk_layernorm", FalseOrNull, "false"},
                                {"use_qk_norm", FalseOrNull, "false"},
                                {"no_rope_layers", Null, "absent"},
                                {"layer_types", Null, "absent"},
                                {"rope_interleaved", FalseOrNull, "false"},
                                {"use_sliding_window", FalseOrNull, "false"},
                                // Gemma's (ReadGemmaKeys reads them for gemma2 and gemma3_text).
                                {"query_pre_attn_scalar", Null, "absent"},
                                {"attn_logit_softcapping", Null, "null"},
                                {"final_logit_softcapping", Null, "null"},
                                {"hidden_activation", Null, "absent"},
                                {"sliding_window_pattern", Null, "absent"},
                                {"rope_local_base_freq", Null, "absent"},
                                {"use_bidirectional_attention", FalseOrNull, "false"},
                                // Newer transformers' form of the RoPE keys (per layer kind): not read.
                                {"rope_parameters", Null, "absent (rope_theta, rope_scaling, rope_local_base_freq)"}};

// A token id or a list of them (eos_token_id may be either); null is none.
}  // namespace

Result<std::vector<int>> ParseTokenIds(const nlohmann::json& v, const std::string& path, const char* key) {
  std::vector<int> ids;
  auto one = [&](const nlohmann::json& x) -> Status {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      return Status::Error(path + ": key '" + key + "' must be a token id or a list of them, got " + x.dump());
    ids.push_back(x.get<int>());
    return OkStatus();
  };
  if (v.is_null()) return ids;
  if (v.is_array()) {
    for (const auto& x : v) VERITY_RETURN_IF_ERROR(one(x));
  } else {
    VERITY_RETURN_IF_ERROR(one(v));
  }
  return ids;
}

namespace {

Result<RopeScaling> ReadRopeScaling(const nlohmann::json& v, const std::string& path) {
  RopeScaling s;
  if (v.is_null()) return s;
  if (!v.is_object()) return Status::Error(path + ": key 'rope_scaling' must be an object or null");
  // Newer transformers write rope_type, older ones type; both mean the same.
  nlohmann::json type = v.contains("rope_type") ? v["rope_type"] : v.contains("type") ? v["type"] : nlohmann::json();
  if (type.is_null() || type == "default") return s;
  if (!type.is_string()) return Status::Error(path + ": rope_scaling type must be a string, got " + type.dump());
  auto num = [&](const char* key, double* dst) -> Status {
    if (!v.contains(key) || !v[key].is_number())
      return Status::Error(path + ": rope_scaling (" + type.get<std::string>() + ") needs a number '" + key + "'");
    *dst = v[key].get<double>();
    return OkStatus();
  };
  if (type == "linear") {
    s.type = RopeScalingType::kLinear;
    VERITY_RETURN_IF_ERROR(num("factor", &s.factor));
  } else if (type == "llama3") {
    s.type = RopeScalingType::kLlama3;
    VERITY_RETURN_IF_ERROR(num("factor", &s.factor));
    VERITY_RETURN_IF_ERROR(num("low_freq_factor", &s.low_freq_factor));
    VERITY_RETURN_IF_ERROR(num("high_freq_factor", &s.high_freq_factor));
    VERITY_RETURN_IF_ERROR(num("original_max_position_embeddings", &s.original_max_positions));
  } else {
    return Status::Error(path + ": rope_scaling type \"" + type.get<std::string>() +
                         "\" is not supported (verity computes linear and llama3)");
  }
  for (const auto& [key, val] : v.items())
    if (key != "type" && key != "rope_type" && key != "factor" && key != "low_freq_factor" &&
        key != "high_freq_factor" && key != "original_max_position_embeddings")
      return Status::Error(path + ": rope_scaling key '" + key + "' is not part of " + type.get<std::string>() +
                           " scaling as verity computes it");
  return s;
}

}  // namespace

Result<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    return Status::Error(path + ": not valid JSON");
  }
  if (!j.is_object()) return Status::Error(path + ": not a JSON object");
  return j;
}

namespace {

// config.json's required keys, read the one way each kind is: present, then
// a positive integer or a positive number within float range.
struct HfKeys {
  const nlohmann::json& j;
  const std::string& path;

  Result<nlohmann::json> Need(const char* key) const {
    if (!j.contains(key)) return Status::Error(path + ": required key '" + std::string(key) + "' is missing");
    return j[key];
  }
  Status ToInt(const char* key, const nlohmann::json& v, int* dst) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > INT32_MAX)
      return Status::Error(path + ": key '" + std::string(key) + "' must be a positive integer");
    *dst = v.get<int>();
    return OkStatus();
  }
  Status NeedInt(const char* key, int* dst) const {
    VERITY_ASSIGN_OR_RETURN(nlohmann::json v, Need(key));
    return ToInt(key, v, dst);
  }
  Status NeedFloat(const char* key, float* dst) const {
    VERITY_ASSIGN_OR_RETURN(nlohmann::json v, Need(key));
    if (!v.is_number() || !(v.get<double>() > 0))
      return Status::Error(path + ": key '" + std::string(key) + "' must be a positive number");
    // Beyond float range the value would be read as inf (a RoPE without rotation, a norm that zeroes).
    if (v.get<double>() > FLT_MAX)
      return Status::Error(path + ": key '" + std::string(key) + "' is " + v.dump() + ", beyond float range");
    *dst = static_cast<float>(v.get<double>());
    return OkStatus();
  }
};

// A note for each key that is neither read nor known to change nothing.
void NoteUnknownKeys(const nlohmann::json& j, const std::string& path, std::vector<std::string>* notes) {
  for (const auto& [key, val] : j.items()) {
    bool known = false;
    for (const char* k : kIgnoredKeys) known |= key == k;
    for (const Neutral& n : kNeutralOnly) known |= key == n.key;
    if (!known) notes->push_back(path + ": key '" + key + "' is not one verity knows; ignored");
  }
}

// model_type: "llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3",
// "gemma2" or "gemma3_text".
Result<nlohmann::json> ReadModelType(const HfKeys& k) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json type, k.Need("model_type"));
  for (const char* known : {"llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text"})
    if (type == known) return type;
  if (type == "gemma3")  // Gemma3ForConditionalGeneration: text_config beside a vision_config
    return Status::Error(k.path + ": model_type \"gemma3\" is Gemma 3 with its vision tower " +
                         "(Gemma3ForConditionalGeneration), which verity does not run; it runs the text model, " +
                         "model_type \"gemma3_text\" (Gemma3ForCausalLM)");
  return Status::Error(k.path + ": model_type " + type.dump() +
                       " is not one verity runs (\"llama\", \"mistral\", \"mixtral\", \"qwen2\", \"qwen3\", " +
                       "\"phi3\", \"gemma2\", \"gemma3_text\")");
}

// Mistral's and Phi-3's sliding_window (MistralConfig, Phi3Config): null,
// or the positions each attends to (ModelConfig::sliding_window). Returns it
// as an inert key.
Result<std::vector<std::string>> ReadMistralWindow(const HfKeys& k, ModelConfig* c) {
  if (k.j.contains("sliding_window") && !k.j["sliding_window"].is_null())
    VERITY_RETURN_IF_ERROR(k.ToInt("sliding_window", k.j["sliding_window"], &c->sliding_window));
  return std::vector<std::string>{"sliding_window"};
}

// Qwen2's and Qwen3's window keys (Qwen2Config, Qwen3Config): `sliding_window` and `max_window_layers`
// act only when `use_sliding_window` is true, which RefuseNonNeutral refuses;
// Qwen2 checkpoints state a window (32768, 131072) with it false.
// `layer_types`, where written, must be full attention throughout. Returns
// the keys that are then inert, for the neutral-value check to pass over.
Result<std::vector<std::string>> ReadQwen2Window(const HfKeys& k) {
  if (k.j.contains("layer_types")) {
    const nlohmann::json& t = k.j["layer_types"];
    if (!t.is_array()) return Status::Error(k.path + ": key 'layer_types' must be a list");
    for (const auto& x : t)
      if (x != "full_attention")
        return Status::Error(k.path + ": key 'layer_types' holds " + x.dump() +
                             "; verity computes only \"full_attention\" layers");
  }
  return std::vector<std::string>{"sliding_window", "layer_types"};
}

// A number key `key`: required, null (0: none) only where `nullable`.
Status ReadGemmaNumber(const HfKeys& k, const char* key, bool nullable, float* dst) {
  if (nullable && k.j.contains(key) && k.j[key].is_null()) return OkStatus();
  VERITY_RETURN_IF_ERROR(k.NeedFloat(key, dst));
  return OkStatus();
}

// Gemma's layer kinds: `layer_types` where written (newer transformers),
// else gemma2's alternation (Gemma2Config: even layers windowed) or
// gemma3_text's sliding_window_pattern. verity computes the periodic
// pattern (a global layer every window_pattern-th), so a layer_types list
// must be one.
Status ReadGemmaLayerKinds(const HfKeys& k, bool gemma3, ModelConfig* c) {
  if (k.j.contains("layer_types") && !k.j["layer_types"].is_null()) {
    const nlohmann::json& t = k.j["layer_types"];
    if (!t.is_array()) return Status::Error(k.path + ": key 'layer_types' must be a list");
    int layers = 0;
    VERITY_RETURN_IF_ERROR(k.NeedInt("num_hidden_layers", &layers));
    if (static_cast<int>(t.size()) != layers)
      return Status::Error(k.path + ": key 'layer_types' holds " + std::to_string(t.size()) + " kinds for " +
                           std::to_string(layers) + " layers (num_hidden_layers)");
    std::vector<bool> windowed;
    for (const auto& kind : t) windowed.push_back(kind != "full_attention");
    const WindowPattern w = WindowPatternOf(windowed);
    c->window_pattern = w.pattern;
    int bad = w.mismatch;  // the first layer off the pattern, or of neither kind
    for (int l = 0; l < layers && bad < 0; l++)
      if (t[l] != "full_attention" && t[l] != "sliding_attention") bad = l;
    if (bad >= 0)
      return Status::Error(k.path + ": key 'layer_types' holds " + t[bad].dump() + " at layer " + std::to_string(bad) +
                           "; verity computes one global layer in every " + std::to_string(c->window_pattern) +
                           " (the last) and sliding ones between");
    return OkStatus();
  }
  if (!gemma3) {
    c->window_pattern = 2;
    return OkStatus();
  }
  return k.NeedInt("sliding_window_pattern", &c->window_pattern);
}

// Gemma 2 (Gemma2Config) and Gemma 3's text model (Gemma3TextConfig): the
// keys their classes default are required here, since the file can state
// them (query_pre_attn_scalar, the soft-caps, the window, the activation).
Result<std::vector<std::string>> ReadGemmaKeys(const HfKeys& k, bool gemma3, ModelConfig* c) {
  c->gemma = true;
  c->qk_norm = gemma3;
  VERITY_ASSIGN_OR_RETURN(nlohmann::json act, k.Need("hidden_activation"));
  if (act != "gelu_pytorch_tanh")
    return Status::Error(k.path + ": hidden_activation " + act.dump() +
                         " is not supported (Gemma's is \"gelu_pytorch_tanh\")");
  VERITY_RETURN_IF_ERROR(ReadGemmaNumber(k, "query_pre_attn_scalar", false, &c->query_pre_attn_scalar));
  VERITY_RETURN_IF_ERROR(ReadGemmaNumber(k, "attn_logit_softcapping", true, &c->attn_softcap));
  VERITY_RETURN_IF_ERROR(ReadGemmaNumber(k, "final_logit_softcapping", true, &c->final_softcap));
  VERITY_RETURN_IF_ERROR(k.NeedInt("sliding_window", &c->sliding_window));
  VERITY_RETURN_IF_ERROR(ReadGemmaLayerKinds(k, gemma3, c));
  if (gemma3) VERITY_RETURN_IF_ERROR(k.NeedFloat("rope_local_base_freq", &c->rope_local_theta));
  return std::vector<std::string>{
      "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "hidden_activation",
      "sliding_window",        "sliding_window_pattern", "rope_local_base_freq",    "layer_types"};
}

// What the model type adds to Llama's keys: Qwen2's biases (always there;
// its attention_bias key, if any, is not read by Qwen2Attention) and window
// keys; Qwen3's q/k norms (always there) and the same window keys, its
// attention_bias read (true would add biases to q, k, v and o: refused as
// non-neutral) and head_dim required (Qwen3Config defaults it to 128, not
// hidden_size / num_attention_heads: a value the file should state);
// Mistral's window. Returns the keys the type makes inert.
Result<std::vector<std::string>> ReadFamilyKeys(const HfKeys& k, const nlohmann::json& type, ModelConfig* c) {
  if (type == "qwen2") {
    VERITY_ASSIGN_OR_RETURN(std::vector<std::string> inert, ReadQwen2Window(k));
    inert.push_back("attention_bias");
    c->qkv_bias = true;
    return inert;
  }
  if (type == "qwen3") {
    if (!k.j.contains("head_dim") || k.j["head_dim"].is_null())
      return Status::Error(k.path + ": model_type qwen3 needs key 'head_dim' (Qwen3Config defaults it to 128, " +
                           "not hidden_size / num_attention_heads; verity does not guess it)");
    c->qk_norm = true;
    return ReadQwen2Window(k);
  }
  if (type == "gemma2" || type == "gemma3_text") return ReadGemmaKeys(k, type == "gemma3_text", c);
  if (type == "mistral") return ReadMistralWindow(k, c);
  if (type == "phi3") {  // Phi3Config: the same window key as Mistral's; q/k/v and gate/up fused
    c->fused_projections = true;
    return ReadMistralWindow(k, c);
  }
  return std::vector<std::string>{};
}

// Refuses a key that changes the math unless it holds its neutral value
// (or is one of `inert`: a key the model type says is not in use).
Status RefuseNonNeutral(const nlohmann::json& j, const std::string& path, const std::vector<std::string>& inert) {
  for (const Neutral& n : kNeutralOnly)
    if (j.contains(n.key) && !n.ok(j[n.key]) && std::find(inert.begin(), inert.end(), n.key) == inert.end())
      return Status::Error(path + ": key '" + n.key + "' is " + j[n.key].dump() + "; verity computes only " +
                           n.neutral + " (it changes the math)");
  return OkStatus();
}

// The widths, counts and head_dim.
Status ReadHfShape(const HfKeys& k, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  VERITY_RETURN_IF_ERROR(k.NeedInt("hidden_size", &c.dim));
  VERITY_RETURN_IF_ERROR(k.NeedInt("intermediate_size", &c.hidden_dim));
  VERITY_RETURN_IF_ERROR(k.NeedInt("num_hidden_layers", &c.n_layers));
  VERITY_RETURN_IF_ERROR(k.NeedInt("num_attention_heads", &c.n_heads));
  VERITY_RETURN_IF_ERROR(k.NeedInt("num_key_value_heads", &c.n_kv_heads));
  VERITY_RETURN_IF_ERROR(k.NeedInt("vocab_size", &c.vocab_size));
  VERITY_RETURN_IF_ERROR(k.NeedInt("max_position_embeddings", &c.max_positions));
  // head_dim: absent or null means hidden_size / num_attention_heads (LlamaConfig).
  if (k.j.contains("head_dim") && !k.j["head_dim"].is_null()) {
    VERITY_RETURN_IF_ERROR(k.ToInt("head_dim", k.j["head_dim"], &c.head_dim));
  } else {
    if (c.dim % c.n_heads != 0)
      return Status::Error(k.path + ": hidden_size (" + std::to_string(c.dim) +
                           ") is not divisible by num_attention_heads (" + std::to_string(c.n_heads) +
                           ") and no head_dim is given");
    c.head_dim = c.dim / c.n_heads;
  }
  return OkStatus();
}

// rms_norm_eps, rope_theta, rope_scaling, tie_word_embeddings, hidden_act and
// (for mixtral) the expert counts.
Status ReadHfMath(const HfKeys& k, const nlohmann::json& type, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  VERITY_RETURN_IF_ERROR(k.NeedFloat("rms_norm_eps", &c.norm_eps));
  VERITY_RETURN_IF_ERROR(k.NeedFloat("rope_theta", &c.rope_theta));
  if (k.j.contains("rope_scaling")) {
    VERITY_ASSIGN_OR_RETURN(c.rope_scaling, ReadRopeScaling(k.j["rope_scaling"], k.path));
  }
  // Gemma's configs leave tie_word_embeddings out: their classes default it
  // to true, as every Gemma checkpoint is (no lm_head.weight).
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  VERITY_ASSIGN_OR_RETURN(nlohmann::json tie, gemma && !k.j.contains("tie_word_embeddings")
                                                  ? Result<nlohmann::json>(nlohmann::json(true))
                                                  : k.Need("tie_word_embeddings"));
  if (!tie.is_boolean()) return Status::Error(k.path + ": key 'tie_word_embeddings' must be true or false");
  c.shared_classifier = tie.get<bool>();
  if (!gemma) {  // Gemma reads hidden_activation (ReadGemmaKeys); its hidden_act is not used
    VERITY_ASSIGN_OR_RETURN(nlohmann::json act, k.Need("hidden_act"));
    if (act != "silu")
      return Status::Error(k.path + ": hidden_act " + act.dump() + " is not supported (only \"silu\")");
  }
  if (type == "gemma2" && c.rope_scaling.type != RopeScalingType::kNone)
    return Status::Error(k.path +
                         ": rope_scaling is not part of Gemma 2 (Gemma2RotaryEmbedding as verity computes it)");
  if (type == "mixtral") {
    VERITY_RETURN_IF_ERROR(k.NeedInt("num_local_experts", &c.n_experts));
    VERITY_RETURN_IF_ERROR(k.NeedInt("num_experts_per_tok", &c.n_experts_per_tok));
    if (c.n_experts_per_tok > c.n_experts)
      return Status::Error(k.path + ": num_experts_per_tok exceeds num_local_experts");
  }
  return OkStatus();
}

// BOS/EOS (ReadHfConfig lets generation_config.json override them).
// Absent: the config class's defaults, 1 and 2 (LlamaConfig, MixtralConfig,
// ...), or Gemma's 2 and 1 (Gemma2Config, Gemma3TextConfig).
Status ReadHfTokenIds(const HfKeys& k, bool gemma, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  c.bos_id = gemma ? 2 : 1;
  c.eos_ids = {gemma ? 1 : 2};
  if (k.j.contains("bos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(std::vector<int> ids, ParseTokenIds(k.j["bos_token_id"], k.path, "bos_token_id"));
    if (ids.size() > 1) return Status::Error(k.path + ": key 'bos_token_id' must be one token id");
    c.bos_id = ids.empty() ? -1 : ids[0];
  }
  if (k.j.contains("eos_token_id")) {
    VERITY_ASSIGN_OR_RETURN(c.eos_ids, ParseTokenIds(k.j["eos_token_id"], k.path, "eos_token_id"));
  }
  return OkStatus();
}

}  // namespace

Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& path, std::vector<std::string>* notes) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(text, path));
  if (notes) NoteUnknownKeys(j, path, notes);
  const HfKeys keys{j, path};
  ModelConfig c;
  VERITY_ASSIGN_OR_RETURN(nlohmann::json type, ReadModelType(keys));
  VERITY_ASSIGN_OR_RETURN(const std::vector<std::string> inert, ReadFamilyKeys(keys, type, &c));
  VERITY_RETURN_IF_ERROR(RefuseNonNeutral(j, path, inert));
  VERITY_RETURN_IF_ERROR(ReadHfShape(keys, &c));
  VERITY_RETURN_IF_ERROR(ReadHfMath(keys, type, &c));
  VERITY_RETURN_IF_ERROR(ReadHfTokenIds(keys, c.gemma, &c));
  c.rope_style = RopeStyle::kHalves;                       // the Hugging Face convention
  c.seq_len = std::min(c.max_positions, kDefaultContext);  // --ctx changes it (SetContext)
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));
  return c;
}

namespace {
// An integer when `x` is one (as Hugging Face writes counts), else the double.
nlohmann::json IntegralOrDouble(double x) {
  if (std::floor(x) == x && std::fabs(x) < 9007199254740992.0) return static_cast<int64_t>(x);
  return x;
}

// Gemma2Config's and Gemma3TextConfig's keys for a Gemma model.
void WriteGemmaKeys(const ModelConfig& c, nlohmann::json* cfg) {
  nlohmann::json& j = *cfg;
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = IntegralOrDouble(c.query_pre_attn_scalar);
  auto cap = [](float v) { return v > 0.0f ? IntegralOrDouble(v) : nlohmann::json(); };
  j["attn_logit_softcapping"] = cap(c.attn_softcap);
  j["final_logit_softcapping"] = cap(c.final_softcap);
  if (c.qk_norm) {  // gemma3_text
    j["sliding_window_pattern"] = c.window_pattern;
    j["rope_local_base_freq"] = IntegralOrDouble(c.rope_local_theta);
  } else if (c.window_pattern != 2) {  // Gemma2Config alternates unless layer_types says otherwise
    nlohmann::json kinds = nlohmann::json::array();
    for (int l = 0; l < c.n_layers; l++) kinds.push_back(c.windowed(l) ? "sliding_attention" : "full_attention");
    j["layer_types"] = kinds;
  }
}

}  // namespace

std::string HfConfigText(const ModelConfig& c, const std::string& torch_dtype) {
  // The family its traits name (ValidateConfig allows at most one trait).
  const auto [type, arch] = c.gemma && c.qk_norm   ? std::pair{"gemma3_text", "Gemma3ForCausalLM"}
                            : c.gemma              ? std::pair{"gemma2", "Gemma2ForCausalLM"}
                            : c.n_experts > 0      ? std::pair{"mixtral", "MixtralForCausalLM"}
                            : c.qkv_bias           ? std::pair{"qwen2", "Qwen2ForCausalLM"}
                            : c.qk_norm            ? std::pair{"qwen3", "Qwen3ForCausalLM"}
                            : c.fused_projections  ? std::pair{"phi3", "Phi3ForCausalLM"}
                            : c.sliding_window > 0 ? std::pair{"mistral", "MistralForCausalLM"}
                                                   : std::pair{"llama", "LlamaForCausalLM"};
  nlohmann::json cfg = {{"architectures", {arch}},
                        {"model_type", type},
                        {"hidden_size", c.dim},
                        {"intermediate_size", c.hidden_dim},
                        {"num_hidden_layers", c.n_layers},
                        {"num_attention_heads", c.n_heads},
                        {"num_key_value_heads", c.n_kv_heads},
                        {"vocab_size", c.vocab_size},
                        {"max_position_embeddings", c.max_positions},
                        {"head_dim", c.head_dim},
                        {"rms_norm_eps", static_cast<double>(c.norm_eps)},
                        {"rope_theta", static_cast<double>(c.rope_theta)},
                        {"tie_word_embeddings", c.shared_classifier},
                        {"hidden_act", "silu"},
                        {"torch_dtype", torch_dtype}};
  if ((c.qkv_bias || c.qk_norm) && !c.gemma) cfg["use_sliding_window"] = false;
  if (c.qk_norm || c.gemma) cfg["attention_bias"] = false;
  if (c.gemma) WriteGemmaKeys(c, &cfg);
  if (c.sliding_window > 0) cfg["sliding_window"] = c.sliding_window;
  if (c.n_experts > 0) {
    cfg["num_local_experts"] = c.n_experts;
    cfg["num_experts_per_tok"] = c.n_experts_per_tok;
  }
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kLinear) {
    cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rs.factor}};
  } else if (rs.type == RopeScalingType::kLlama3) {
    cfg["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", rs.factor},
                           {"low_freq_factor", rs.low_freq_factor},
                           {"high_freq_factor", rs.high_freq_factor},
                           {"original_max_position_embeddings", IntegralOrDouble(rs.original_max_positions)}};
  } else {
    cfg["rope_scaling"] = nullptr;
  }
  // null when none (absent would read back as the spec's 1 and 2).
  cfg["bos_token_id"] = c.bos_id >= 0 ? nlohmann::json(c.bos_id) : nlohmann::json();
  cfg["eos_token_id"] = c.eos_ids.size() == 1 ? nlohmann::json(c.eos_ids[0])
                        : c.eos_ids.empty()   ? nlohmann::json()
                                              : nlohmann::json(c.eos_ids);
  return cfg.dump(2) + "\n";
}

}  // namespace verity
