// generate, logits, synth: thin wiring over engine/ (bench: bench_command.cc).
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/build_info.h"
#include "cli/engine/commands.h"
#include "engine/engine.h"
#include "formats/tokenizer.h"

namespace verity::cli {

namespace {

// A tokenizer whose added tokens run past the model's vocabulary (Gemma 3
// 1B: <image_soft_token> is id 262144 of a 262144-row table): text naming
// one of them is refused by name, since the model has no row for it; every
// other text encodes as the tokenizer encodes it.
class ModelVocabTokenizer final : public TextTokenizer {
 public:
  ModelVocabTokenizer(std::unique_ptr<TextTokenizer> inner, int vocab, std::string where)
      : inner_(std::move(inner)), vocab_(vocab), where_(std::move(where)) {}
  Result<std::vector<int>> Encode(const std::string& text, bool add_special) const override {
    VERITY_ASSIGN_OR_RETURN(std::vector<int> ids, inner_->Encode(text, add_special));
    for (int id : ids)
      if (id >= vocab_) {
        auto piece = inner_->Decode({id});
        return Status::Error(where_ + ": the text holds the added token " + (piece.ok() ? *piece : "?") + " (id " +
                             std::to_string(id) + "), past the model's vocab_size " + std::to_string(vocab_) +
                             ": the model has no embedding for it");
      }
    return ids;
  }
  Result<std::string> Decode(const std::vector<int>& ids) const override { return inner_->Decode(ids); }
  int bos_id() const override { return inner_->bos_id(); }
  int eos_id() const override { return inner_->eos_id(); }
  int vocab_size() const override { return vocab_; }
  bool is_added_token(int id) const override { return inner_->is_added_token(id); }
  std::string kind() const override { return inner_->kind(); }

 private:
  std::unique_ptr<TextTokenizer> inner_;
  int vocab_;
  std::string where_;
};

}  // namespace

// The tokenizer for `model`: a llama2.c one must match its vocabulary exactly;
// any other may be smaller (checkpoints pad their embedding tables), or larger
// by added tokens alone, which text may then not name (ModelVocabTokenizer).
Result<std::unique_ptr<TextTokenizer>> LoadModelTokenizer(const std::string& path, const Model& model) {
  const int vocab = model.config.vocab_size;
  VERITY_ASSIGN_OR_RETURN(auto tok, LoadTokenizer(path));
  if (tok->kind() == "llama2c") {
    VERITY_ASSIGN_OR_RETURN(auto exact, Tokenizer::Load(path, vocab));
    return std::unique_ptr<TextTokenizer>(new Tokenizer(std::move(exact)));
  }
  if (tok->vocab_size() <= vocab) return tok;
  for (int id = vocab; id < tok->vocab_size(); id++)
    if (!tok->is_added_token(id))
      return Status::Error(path + ": tokenizer vocabulary size " + std::to_string(tok->vocab_size()) +
                           " exceeds the model's vocab_size " + std::to_string(vocab) + " (id " + std::to_string(id) +
                           " is not an added token)");
  std::fprintf(stderr,
               "verity: note: %s: %d added token(s) from id %d on are past the model's vocab_size; text "
               "naming one is refused\n",
               path.c_str(), tok->vocab_size() - vocab, vocab);
  return std::unique_ptr<TextTokenizer>(new ModelVocabTokenizer(std::move(tok), vocab, path));
}

namespace {

// --dtype's value, or an error naming the flag.
Result<kernels::DType> ParseDType(const std::string& name) {
  auto d = kernels::DTypeFromName(name);
  if (!d.ok()) return Status::Error("--dtype: " + d.status().message());
  return d;
}

int RunGenerate(const std::string& model_path, const std::string& tok_path, const GenerateOptions& opt,
                const std::string& format, const std::string& backend, const std::string& dtype_name, const TpFlags& tp,
                int ctx) {
  auto dtype = ParseDType(dtype_name);
  if (!dtype.ok()) return Fail(dtype.status());
  return WithDecoder(tp, model_path, backend, *dtype, ctx, [&](Decoder& t, const Model& model) {
    auto tok = LoadModelTokenizer(tok_path.empty() ? model_path : tok_path, model);
    if (!tok.ok()) return Fail(tok.status());
    auto r = Generate(t, **tok, opt);
    if (!r.ok()) return Fail(r.status());
    if (format == "ids") {
      std::string line;
      for (size_t i = 0; i < r->ids.size(); i++) line += (i ? " " : "") + std::to_string(r->ids[i]);
      std::printf("%s\n", line.c_str());
    } else {
      std::fwrite(r->text.data(), 1, r->text.size(), stdout);
    }
    std::fflush(stdout);
    const int sampled = r->positions - (r->prompt_tokens - 1);
    std::fprintf(stderr,
                 "verity: %s backend, %s weights, %d positions, %.1f tok/s (prompt %d prefilled in %.3fs, %d sampled "
                 "in %.3fs)\n",
                 t.backend_name(), kernels::DTypeName(model.dtype), r->positions,
                 r->positions / std::max(1e-9, r->prompt_seconds + r->sample_seconds), r->prompt_tokens,
                 r->prompt_seconds, sampled, r->sample_seconds);
    return 0;
  });
}

int RunLogits(const std::string& model_path, const std::string& ids_text, const std::string& out,
              const std::string& backend, const std::string& dtype_name, const TpFlags& tp, int ctx) {
  auto ids = ParseIntList(ids_text, "--ids", LONG_MIN);
  if (!ids.ok()) return Fail(ids.status());
  auto dtype = ParseDType(dtype_name);
  if (!dtype.ok()) return Fail(dtype.status());
  return WithDecoder(tp, model_path, backend, *dtype, ctx, [&](Decoder& t, const Model& model) {
    Status v = ValidateIds(ids.value(), model.config, "--ids");
    if (!v.ok()) return Fail(v);
    auto logits = TeacherForcedLogits(t, ids.value());
    if (!logits.ok()) return Fail(logits.status());
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    if (!f) return Fail(Status::Error(out + ": cannot create --out file"));
    f.write(reinterpret_cast<const char*>(logits->data()), static_cast<std::streamsize>(logits->size() * 4));
    f.close();
    if (!f) return Fail(Status::Error(out + ": write failed"));
    std::fprintf(stderr, "verity: wrote %zu positions x %d logits to %s (%s backend, %s weights)\n", ids->size(),
                 model.config.vocab_size, out.c_str(), t.backend_name(), kernels::DTypeName(model.dtype));
    return 0;
  });
}

// --config's text as a JSON object.
Result<nlohmann::json> ParseConfigObject(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return Status::Error(std::string("--config: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::Error("--config: expected a JSON object");
  return j;
}

// The keys every --config names (the llama2.c header's), and the expert pair.
Status ReadRequiredKeys(const nlohmann::json& j, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  const std::pair<const char*, int*> keys[] = {
      {"dim", &c.dim},         {"hidden_dim", &c.hidden_dim}, {"n_layers", &c.n_layers},
      {"n_heads", &c.n_heads}, {"n_kv_heads", &c.n_kv_heads}, {"vocab_size", &c.vocab_size},
      {"seq_len", &c.seq_len}};
  for (const auto& [name, dst] : keys) {
    if (!j.contains(name)) return Status::Error(std::string("--config: required key '") + name + "' is missing");
    if (!j[name].is_number_integer())
      return Status::Error(std::string("--config: key '") + name + "' must be an integer");
    *dst = j[name].get<int>();
  }
  if (!j.contains("shared_classifier") || !j["shared_classifier"].is_boolean())
    return Status::Error("--config: required boolean key 'shared_classifier' is missing");
  c.shared_classifier = j["shared_classifier"].get<bool>();
  if (j.contains("n_experts") != j.contains("n_experts_per_tok"))
    return Status::Error("--config: 'n_experts' and 'n_experts_per_tok' go together");
  if (j.contains("n_experts")) {
    if (!j["n_experts"].is_number_integer() || !j["n_experts_per_tok"].is_number_integer() ||
        j["n_experts"].get<int>() < 1 || j["n_experts_per_tok"].get<int>() < 1 ||
        j["n_experts_per_tok"].get<int>() > j["n_experts"].get<int>())
      return Status::Error("--config: need 1 <= n_experts_per_tok <= n_experts");
    c.n_experts = j["n_experts"].get<int>();
    c.n_experts_per_tok = j["n_experts_per_tok"].get<int>();
  }
  return OkStatus();
}

// The values a llama2.c file fixes, which the optional keys below may change.
void SetLlama2cDefaults(ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  c.max_positions = c.seq_len;
  c.rope_theta = Llama2cFormat::kRopeTheta;
  c.norm_eps = Llama2cFormat::kNormEps;
  c.bos_id = Llama2cFormat::kBos;
  c.eos_ids = {Llama2cFormat::kEos};
  if (c.n_heads > 0 && c.dim % c.n_heads == 0) c.head_dim = c.dim / c.n_heads;
}

// head_dim, rope_theta, norm_eps and max_position_embeddings, where given.
Status ReadShapeKeys(const nlohmann::json& j, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  if (j.contains("head_dim")) {
    if (!j["head_dim"].is_number_integer()) return Status::Error("--config: key 'head_dim' must be an integer");
    c.head_dim = j["head_dim"].get<int>();
  } else if (c.n_heads <= 0 || c.dim % c.n_heads != 0) {
    return Status::Error("--config: dim (" + std::to_string(c.dim) + ") is not divisible by n_heads (" +
                         std::to_string(c.n_heads) + ") and no head_dim is given");
  }
  for (const auto& [key, dst] :
       {std::pair<const char*, float*>{"rope_theta", &c.rope_theta}, {"norm_eps", &c.norm_eps}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number()) return Status::Error(std::string("--config: key '") + key + "' must be a number");
    *dst = j[key].get<float>();
  }
  if (j.contains("max_position_embeddings")) {
    if (!j["max_position_embeddings"].is_number_integer() || j["max_position_embeddings"].get<int64_t>() < c.seq_len ||
        j["max_position_embeddings"].get<int64_t>() > INT32_MAX)
      return Status::Error("--config: key 'max_position_embeddings' must be an integer >= seq_len");
    c.max_positions = j["max_position_embeddings"].get<int>();
  }
  return OkStatus();
}

// The rope_scaling object (linear or llama3), where given.
Status ReadRopeScalingKey(const nlohmann::json& j, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  if (j.contains("rope_scaling")) {
    const nlohmann::json& r = j["rope_scaling"];
    if (!r.is_object() || !r.contains("rope_type") || !r["rope_type"].is_string())
      return Status::Error("--config: key 'rope_scaling' must be an object with a rope_type");
    auto num = [&](const char* k, double* dst) -> Status {
      if (!r.contains(k) || !r[k].is_number())
        return Status::Error(std::string("--config: rope_scaling needs a number '") + k + "'");
      *dst = r[k].get<double>();
      return OkStatus();
    };
    const std::string type = r["rope_type"];
    if (type == "linear") {
      c.rope_scaling.type = RopeScalingType::kLinear;
      VERITY_RETURN_IF_ERROR(num("factor", &c.rope_scaling.factor));
    } else if (type == "llama3") {
      c.rope_scaling.type = RopeScalingType::kLlama3;
      VERITY_RETURN_IF_ERROR(num("factor", &c.rope_scaling.factor));
      VERITY_RETURN_IF_ERROR(num("low_freq_factor", &c.rope_scaling.low_freq_factor));
      VERITY_RETURN_IF_ERROR(num("high_freq_factor", &c.rope_scaling.high_freq_factor));
      VERITY_RETURN_IF_ERROR(num("original_max_position_embeddings", &c.rope_scaling.original_max_positions));
    } else {
      return Status::Error("--config: rope_scaling rope_type \"" + type + "\" is not supported (linear, llama3)");
    }
  }
  return OkStatus();
}

// bos_token_id and eos_token_id (one id or a list), where given.
Status ReadTokenIdKeys(const nlohmann::json& j, ModelConfig* cfg) {
  ModelConfig& c = *cfg;
  if (j.contains("bos_token_id")) {
    if (!j["bos_token_id"].is_number_integer()) return Status::Error("--config: key 'bos_token_id' must be an integer");
    c.bos_id = j["bos_token_id"].get<int>();
  }
  if (j.contains("eos_token_id")) {
    const nlohmann::json& e = j["eos_token_id"];
    c.eos_ids.clear();
    for (const auto& x : e.is_array() ? e : nlohmann::json::array({e})) {
      if (!x.is_number_integer())
        return Status::Error("--config: key 'eos_token_id' must be an integer or a list of them");
      c.eos_ids.push_back(x.get<int>());
    }
  }
  return OkStatus();
}

Status ReadGemmaKeys(const nlohmann::json& j, ModelConfig* c);

// The traits of other families, where given: sliding_window (mistral, phi3,
// gemma), qkv_bias (qwen2), qk_norm (qwen3, gemma3), fused_projections
// (phi3), gemma and its numbers (gemma2, gemma3).
Status ReadFamilyKeys(const nlohmann::json& j, ModelConfig* c) {
  if (j.contains("sliding_window")) {
    if (!j["sliding_window"].is_number_integer() || j["sliding_window"].get<int64_t>() < 1 ||
        j["sliding_window"].get<int64_t>() > INT32_MAX)
      return Status::Error("--config: key 'sliding_window' must be a positive integer");
    c->sliding_window = j["sliding_window"].get<int>();
  }
  for (const auto& [key, dst] : {std::pair{"qkv_bias", &c->qkv_bias},
                                 {"qk_norm", &c->qk_norm},
                                 {"fused_projections", &c->fused_projections},
                                 {"gemma", &c->gemma}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean()) return Status::Error(std::string("--config: key '") + key + "' must be true or false");
    *dst = j[key].get<bool>();
  }
  return ReadGemmaKeys(j, c);
}

// Gemma's numbers, where given: query_pre_attn_scalar, attn_softcap,
// final_softcap, rope_local_theta (numbers) and window_pattern (an integer).
Status ReadGemmaKeys(const nlohmann::json& j, ModelConfig* c) {
  for (const auto& [key, dst] : {std::pair{"query_pre_attn_scalar", &c->query_pre_attn_scalar},
                                 {"attn_softcap", &c->attn_softcap},
                                 {"final_softcap", &c->final_softcap},
                                 {"rope_local_theta", &c->rope_local_theta}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number()) return Status::Error(std::string("--config: key '") + key + "' must be a number");
    *dst = j[key].get<float>();
  }
  if (j.contains("window_pattern")) {
    if (!j["window_pattern"].is_number_integer() || j["window_pattern"].get<int64_t>() < 1 ||
        j["window_pattern"].get<int64_t>() > INT32_MAX)
      return Status::Error("--config: key 'window_pattern' must be a positive integer");
    c->window_pattern = j["window_pattern"].get<int>();
  }
  return OkStatus();
}

Result<ModelConfig> ConfigFromJson(const std::string& text) {
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, ParseConfigObject(text));
  ModelConfig c;
  VERITY_RETURN_IF_ERROR(ReadRequiredKeys(j, &c));
  SetLlama2cDefaults(&c);
  // Optional keys for Hugging Face directories (llama2.c files fix them).
  VERITY_RETURN_IF_ERROR(ReadShapeKeys(j, &c));
  VERITY_RETURN_IF_ERROR(ReadRopeScalingKey(j, &c));
  VERITY_RETURN_IF_ERROR(ReadTokenIdKeys(j, &c));
  VERITY_RETURN_IF_ERROR(ReadFamilyKeys(j, &c));
  return c;
}

// --like's family preset with --config's keys on top (either may be empty).
Result<std::string> MergeLike(const std::string& like, const std::string& config) {
  nlohmann::json base = nlohmann::json::object();
  if (like == "llama3") {
    // Llama 3.1's rope_scaling numbers, with the original context shrunk to 64
    // so the three wavelength bands all occur within a short test.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":160,"n_layers":2,"n_heads":4,"n_kv_heads":2,"head_dim":32,
      "vocab_size":320,"seq_len":512,"max_position_embeddings":512,"shared_classifier":true,"rope_theta":500000,
      "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
                      "original_max_position_embeddings":64},
      "norm_eps":1e-5,"bos_token_id":256,"eos_token_id":[257,258]})");
  } else if (like == "qwen2") {
    // Qwen2.5-0.5B's traits: q/k/v biases, rope_theta 1e6, tied embeddings,
    // GQA, RMSNorm epsilon 1e-6.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":160,"n_layers":2,"n_heads":4,"n_kv_heads":2,
      "vocab_size":320,"seq_len":256,"max_position_embeddings":256,"shared_classifier":true,"rope_theta":1000000,
      "norm_eps":1e-6,"qkv_bias":true,"bos_token_id":256,"eos_token_id":257})");
  } else if (like == "qwen3") {
    // Qwen3-0.6B's traits: per-head q/k RMSNorms, head_dim (128 there) wider
    // than hidden_size / heads so q is wider than the residual, no biases,
    // rope_theta 1e6, tied embeddings, GQA 2:1, RMSNorm epsilon 1e-6.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":192,"n_layers":2,"n_heads":4,"n_kv_heads":2,"head_dim":32,
      "vocab_size":320,"seq_len":256,"max_position_embeddings":256,"shared_classifier":true,"rope_theta":1000000,
      "norm_eps":1e-6,"qk_norm":true,"bos_token_id":256,"eos_token_id":257})");
  } else if (like == "phi3") {
    // Phi-3-mini-4k's traits: q/k/v fused in one tensor and gate/up in
    // another, a sliding window (2047 there, under max_position_embeddings
    // 4096; 192 of 256 here), MHA, untied, rope_theta 10000.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":160,"n_layers":2,"n_heads":4,"n_kv_heads":4,
      "vocab_size":320,"seq_len":256,"max_position_embeddings":256,"sliding_window":192,"shared_classifier":false,
      "rope_theta":10000,"norm_eps":1e-5,"fused_projections":true,"bos_token_id":1,"eos_token_id":2})");
  } else if (like == "gemma2") {
    // Gemma 2 2B's traits: head_dim (256 there) wider than hidden_size /
    // heads, query_pre_attn_scalar = head_dim (as llama.cpp assumes for all
    // but the 27B), an attention soft-cap of 50, a window (4096 there, 32
    // here) on even layers, GQA 2:1, tied, RMSNorm epsilon 1e-6; 4 layers,
    // so two of each kind. The final soft-cap is 3, not 30: this synth's
    // logits reach ~2 where Gemma 2's reach ~30, and the cap must bend them
    // as it bends Gemma's for skipping it to show.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":192,"n_layers":4,"n_heads":4,"n_kv_heads":2,"head_dim":32,
      "vocab_size":320,"seq_len":256,"max_position_embeddings":256,"shared_classifier":true,"rope_theta":10000,
      "norm_eps":1e-6,"gemma":true,"query_pre_attn_scalar":32,"attn_softcap":50,"final_softcap":3,
      "sliding_window":32,"window_pattern":2,"bos_token_id":2,"eos_token_id":1})");
  } else if (like == "gemma3") {
    // Gemma 3 1B's traits: per-head q/k norms, no soft-caps, a global layer
    // every 6th (rope_theta 1e6) and windowed ones between (512 there, 32
    // here; rope_local_base_freq 10000), head_dim 32 != dim / heads, GQA
    // 4:1, tied; 6 layers, so one global.
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":192,"n_layers":6,"n_heads":4,"n_kv_heads":1,"head_dim":32,
      "vocab_size":320,"seq_len":256,"max_position_embeddings":256,"shared_classifier":true,"rope_theta":1000000,
      "norm_eps":1e-6,"gemma":true,"qk_norm":true,"query_pre_attn_scalar":32,"sliding_window":32,
      "window_pattern":6,"rope_local_theta":10000,"bos_token_id":2,"eos_token_id":[1,106]})");
  } else if (like == "mistral") {
    // Mistral 7B v0.1's traits: a sliding window (4096 there; 128 here),
    // GQA 4:1, rope_theta 10000, untied; max_position_embeddings past the
    // window, as its config states (32768).
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":224,"n_layers":2,"n_heads":4,"n_kv_heads":1,
      "vocab_size":320,"seq_len":512,"max_position_embeddings":512,"sliding_window":128,"shared_classifier":false,
      "rope_theta":10000,"norm_eps":1e-5,"bos_token_id":1,"eos_token_id":2})");
  } else if (like == "llama2") {
    base = nlohmann::json::parse(R"({"dim":64,"hidden_dim":172,"n_layers":2,"n_heads":4,"n_kv_heads":4,
      "vocab_size":320,"seq_len":256,"shared_classifier":false,"rope_theta":10000,"norm_eps":1e-5,
      "bos_token_id":1,"eos_token_id":2})");
  }
  if (!config.empty()) {
    nlohmann::json over;
    try {
      over = nlohmann::json::parse(config);
    } catch (const std::exception& e) {
      return Status::Error(std::string("--config: not valid JSON: ") + e.what());
    }
    if (!over.is_object()) return Status::Error("--config: expected a JSON object");
    for (const auto& [k, v] : over.items()) base[k] = v;
  }
  return base.dump();
}

}  // namespace

namespace {

// generate: text from a model, as llama2.c's run does.
void RegisterGenerate(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("generate", "Generate text from a model, as llama2.c's run does.");
  auto model = std::make_shared<std::string>(), tok = std::make_shared<std::string>();
  auto opt = std::make_shared<GenerateOptions>();
  opt->steps = 256;
  opt->temperature = 1.0f;
  opt->topp = 0.9f;
  opt->seed = 1;
  auto format = std::make_shared<std::string>("text"), backend = std::make_shared<std::string>("fast");
  auto dtype = std::make_shared<std::string>("f32");
  sub->add_option("--model", *model, "llama2.c .bin, GGUF file or Hugging Face directory")->required();
  sub->add_option("--tokenizer", *tok,
                  "llama2.c tokenizer.bin, tokenizer.json or SentencePiece .model (default for a Hugging Face "
                  "directory: its own tokenizer.json / tokenizer.model)");
  sub->add_option("--prompt", opt->prompt, "prompt text (default: empty, start from BOS)");
  sub->add_option("--steps", opt->steps, "positions to run, including the prompt (llama2.c -n)")->capture_default_str();
  sub->add_option("--temperature", opt->temperature, "0 = greedy")->capture_default_str();
  sub->add_option("--topp", opt->topp, "nucleus sampling p; 0 or 1 disables")->capture_default_str();
  sub->add_option("--seed", opt->seed, "sampler seed (same seed, same text)")->capture_default_str();
  sub->add_option("--format", *format, "text (as llama2.c prints) or ids (token ids after BOS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "ids"}));
  sub->add_option("--backend", *backend, "reference, fast or cuda")->capture_default_str();
  sub->add_option("--dtype", *dtype, "weights: f32, bf16 or q8_0 (matrices converted at load)")->capture_default_str();
  auto tp = std::make_shared<TpFlags>();
  AddTpFlags(sub, tp.get());
  auto ctx = std::make_shared<int>(kModelContext);
  sub->add_option("--ctx", *ctx, kCtxHelp);
  reg.On(sub, [=] {
    std::error_code ec;
    if (tok->empty() && !std::filesystem::is_directory(*model, ec))
      return Fail(Status::Error("generate: --tokenizer is required for a llama2.c model (" + *model + ")"));
    return RunGenerate(*model, *tok, *opt, *format, *backend, *dtype, *tp, *ctx);
  });
}

// logits: a teacher-forced forward's raw f32 logits.
void RegisterLogits(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("logits", "Teacher-forced forward; writes raw little-endian f32 logits.");
  auto model = std::make_shared<std::string>(), ids = std::make_shared<std::string>(),
       out = std::make_shared<std::string>(), backend = std::make_shared<std::string>("reference"),
       dtype = std::make_shared<std::string>("f32");
  sub->add_option("--model", *model, "llama2.c checkpoint")->required();
  sub->add_option("--ids", *ids, "token ids, e.g. \"1 403 407\"")->required();
  sub->add_option("--out", *out, "output file: one row of vocab_size f32 per position")->required();
  sub->add_option("--backend", *backend, "reference, fast or cuda")->capture_default_str();
  sub->add_option("--dtype", *dtype, "weights: f32, bf16 or q8_0 (matrices converted at load)")->capture_default_str();
  auto tp = std::make_shared<TpFlags>();
  AddTpFlags(sub, tp.get());
  auto ctx = std::make_shared<int>(kModelContext);
  sub->add_option("--ctx", *ctx, kCtxHelp);
  reg.On(sub, [=] { return RunLogits(*model, *ids, *out, *backend, *dtype, *tp, *ctx); });
}

// synth: a deterministic synthetic checkpoint, llama2.c file or Hugging Face directory.
void RegisterSynth(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("synth",
                                 "Write a deterministic synthetic checkpoint: FILE.bin (llama2.c) or DIR "
                                 "(Hugging Face safetensors, dense or MoE).");
  auto out = std::make_shared<std::string>(), config = std::make_shared<std::string>();
  auto seed = std::make_shared<uint64_t>(1);
  auto shards = std::make_shared<int>(1);
  auto dtype = std::make_shared<std::string>("f32");
  sub->add_option("--out", *out, "FILE.bin for llama2.c, otherwise a directory for Hugging Face")->required();
  auto like = std::make_shared<std::string>();
  sub->add_option("--config", *config,
                  "JSON: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, shared_classifier "
                  "(required unless --like gives them); n_experts and n_experts_per_tok for MoE; directories also "
                  "take head_dim, rope_theta, rope_scaling ({rope_type: linear|llama3, ...} as in config.json), "
                  "norm_eps, max_position_embeddings, bos_token_id, eos_token_id (an id or a list), qkv_bias (qwen2), "
                  "qk_norm (qwen3, gemma3), fused_projections (phi3), sliding_window (mistral, phi3, gemma), gemma "
                  "(gemma2, gemma3) with query_pre_attn_scalar, attn_softcap, final_softcap, window_pattern and "
                  "rope_local_theta");
  sub->add_option("--like", *like,
                  "start from a small model of this family, --config keys overriding: llama3 (head_dim 32 != "
                  "dim/heads, rope_theta 500000, llama3 rope_scaling, tied embeddings, GQA, two EOS ids) or llama2 "
                  "(head_dim = dim/heads, rope_theta 10000, untied) or qwen2 (q/k/v biases, rope_theta 1e6, tied "
                  "embeddings, GQA) or qwen3 (per-head q/k norms, head_dim 32 != dim/heads, rope_theta 1e6, tied) or "
                  "mistral (a sliding window of 128 in 512 positions; GQA 4:1, untied) or phi3 (fused qkv_proj and "
                  "gate_up_proj, a sliding window of 192 in 256; untied) or gemma2 (soft-caps 50 and 3, a window "
                  "of 32 on even layers, GeGLU, scaled embedding, four norms a layer, tied) or gemma3 (q/k norms, "
                  "one global layer in 6, local RoPE base 10000, tied)")
      ->check(CLI::IsMember({"llama3", "llama2", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3"}));
  sub->add_option("--seed", *seed, "weight generator seed")->capture_default_str();
  sub->add_option("--shards", *shards, "directories: number of safetensors shards")->capture_default_str();
  sub->add_option("--dtype", *dtype, "directories: f32 or bf16")->capture_default_str();
  reg.On(sub, [=] {
    if (config->empty() && like->empty()) return Fail(Status::Error("synth: give --config, --like, or both"));
    auto merged = MergeLike(*like, *config);
    if (!merged.ok()) return Fail(merged.status());
    auto c = ConfigFromJson(merged.value());
    if (!c.ok()) return Fail(c.status());
    const bool file = out->size() > 4 && out->substr(out->size() - 4) == ".bin";
    Status s;
    if (file) {
      if (c->n_experts > 0)
        return Fail(Status::Error("--out " + *out + ": llama2.c files cannot hold MoE; write a directory"));
      if (c->qkv_bias) return Fail(Status::Error("--out " + *out + ": llama2.c files cannot hold q/k/v biases"));
      if (c->qk_norm) return Fail(Status::Error("--out " + *out + ": llama2.c files cannot hold q/k norms"));
      if (c->fused_projections)
        return Fail(Status::Error("--out " + *out + ": llama2.c files cannot hold fused projections"));
      if (c->sliding_window)
        return Fail(Status::Error("--out " + *out + ": llama2.c files cannot state a sliding window"));
      if (c->gemma) return Fail(Status::Error("--out " + *out + ": llama2.c files cannot hold a Gemma"));
      if (c->rope_scaling.type != RopeScalingType::kNone || c->rope_theta != Llama2cFormat::kRopeTheta ||
          c->norm_eps != Llama2cFormat::kNormEps || c->max_positions != c->seq_len ||
          c->bos_id != Llama2cFormat::kBos || c->eos_ids != std::vector<int>{Llama2cFormat::kEos})
        return Fail(Status::Error("--out " + *out +
                                  ": a llama2.c file fixes rope_theta, rope_scaling, norm_eps, the "
                                  "context and BOS/EOS; write a directory for other values"));
      s = WriteSyntheticLlama2c(c.value(), *seed, *out);
    } else {
      c->rope_style = RopeStyle::kHalves;
      auto m = SyntheticModel(c.value(), *seed);
      if (!m.ok()) return Fail(m.status());
      s = WriteHfCheckpoint(**m, *out, *shards, *dtype);
    }
    if (!s.ok()) return Fail(s);
    std::fprintf(stderr, "verity: wrote %s\n", out->c_str());
    return 0;
  });
}

}  // namespace

void RegisterEngineCommands(CLI::App& app, Registry& reg) {
  RegisterGenerate(app, reg);
  RegisterLogits(app, reg);
  RegisterSynth(app, reg);
}

}  // namespace verity::cli
