#include "serve/request.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace verity::serve {
namespace {

using json = nlohmann::json;

ApiError Bad(const std::string& param, const std::string& message) {
  return {400, "invalid_request_error", message, param, ""};
}

// Fields the API defines that verity honours, and those it accepts only at
// the value that changes nothing.
const std::set<std::string>& Known(bool chat) {
  static const std::set<std::string> completions = {
      "model",      "prompt", "max_tokens", "temperature",      "top_p",
      "seed",       "stop",   "logprobs",   "stream",           "stream_options",
      "n",          "echo",   "best_of",    "presence_penalty", "frequency_penalty",
      "logit_bias", "user",   "suffix",     "ignore_eos"};
  static const std::set<std::string> chats = {"model",
                                              "messages",
                                              "max_tokens",
                                              "max_completion_tokens",
                                              "temperature",
                                              "top_p",
                                              "seed",
                                              "stop",
                                              "logprobs",
                                              "top_logprobs",
                                              "stream",
                                              "stream_options",
                                              "n",
                                              "presence_penalty",
                                              "frequency_penalty",
                                              "logit_bias",
                                              "user",
                                              "ignore_eos"};
  return chat ? chats : completions;
}

// A field given at a value other than its no-op is refused, naming it.
std::optional<ApiError> CheckNoOps(const json& j) {
  struct NoOp {
    const char* field;
    json neutral;
  } no_ops[] = {{"n", 1},
                {"echo", false},
                {"best_of", 1},
                {"presence_penalty", 0},
                {"frequency_penalty", 0},
                {"logit_bias", json::object()},
                {"suffix", nullptr},
                {"top_logprobs", 0}};
  for (const NoOp& n : no_ops) {
    auto it = j.find(n.field);
    if (it == j.end() || it->is_null() || *it == n.neutral) continue;
    return Bad(n.field, std::string(n.field) + "=" + it->dump() + " is not supported by verity serve (only " +
                            n.neutral.dump() + ")");
  }
  if (auto it = j.find("user"); it != j.end() && !it->is_string()) return Bad("user", "user must be a string");
  return std::nullopt;
}

std::optional<ApiError> Number(const json& j, const char* f, double lo, double hi, float* out) {
  auto it = j.find(f);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return Bad(f, std::string(f) + " must be a number, got " + it->dump());
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return Bad(f, std::string(f) + "=" + it->dump() + " is outside [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> Bool(const json& j, const char* f, bool* out) {
  auto it = j.find(f);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return Bad(f, std::string(f) + " must be true or false, got " + it->dump());
  *out = it->get<bool>();
  return std::nullopt;
}

// An integer field; `present` says whether it was given.
std::optional<ApiError> Integer(const json& j, const char* f, long long lo, long long hi, long long* out,
                                bool* present = nullptr) {
  auto it = j.find(f);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return Bad(f, std::string(f) + " must be an integer, got " + it->dump());
  // An unsigned value past hi would wrap in a long long: out of range as it stands.
  const bool past = it->is_number_unsigned() && it->get<unsigned long long>() > static_cast<unsigned long long>(hi);
  const long long v = past ? hi : it->get<long long>();
  if (past || v < lo || v > hi)
    return Bad(
        f, std::string(f) + "=" + it->dump() + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  if (present) *present = true;
  return std::nullopt;
}

std::optional<ApiError> Stops(const json& j, std::vector<std::string>* out) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
  } else if (it->is_array() && it->size() <= 4) {
    for (const json& s : *it) {
      if (!s.is_string()) return Bad("stop", "stop: every entry must be a string, got " + s.dump());
      out->push_back(s.get<std::string>());
    }
  } else {
    return Bad("stop", "stop must be a string or an array of at most 4 strings");
  }
  for (const std::string& s : *out)
    if (s.empty()) return Bad("stop", "stop: an empty string would stop before the first token");
  return std::nullopt;
}

// prompt: one string, or one array of token ids (an array of strings or of
// arrays would be several prompts: n completions, which verity does not do).
std::optional<ApiError> Prompt(const json& j, const ServedModel& m, std::vector<int>* ids) {
  auto it = j.find("prompt");
  if (it == j.end()) return Bad("prompt", "prompt is required");
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) return Prompt({{"prompt", (*it)[0]}}, m, ids);
  if (it->is_string()) {
    auto e = m.codec->EncodePrompt(it->get<std::string>());
    if (!e.ok()) return Bad("prompt", e.status().message());
    *ids = *e;
    return std::nullopt;
  }
  if (!it->is_array() || it->empty()) return Bad("prompt", "prompt must be a string or a non-empty array of token ids");
  for (const json& v : *it) {
    if (!v.is_number_integer())
      return Bad("prompt", "prompt: one prompt per request (a string or an array of token ids), got " + v.dump() +
                               " in the array");
    const long long id = v.get<long long>();
    if (id < 0 || id >= m.vocab)
      return Bad("prompt", "prompt: token id " + v.dump() + " is outside [0, " + std::to_string(m.vocab) + ")");
    ids->push_back(static_cast<int>(id));
  }
  return std::nullopt;
}

std::optional<ApiError> Messages(const json& j, const ServedModel& m, std::vector<int>* ids,
                                 std::vector<std::string>* stops) {
  if (!m.chat) return ApiError{400, "invalid_request_error", m.no_chat_reason, "messages", "chat_unavailable"};
  auto it = j.find("messages");
  if (it == j.end() || !it->is_array() || it->empty()) return Bad("messages", "messages must be a non-empty array");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < it->size(); i++) {
    const json& e = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!e.is_object()) return Bad(where, where + " must be an object");
    for (auto f = e.begin(); f != e.end(); ++f)
      if (f.key() != "role" && f.key() != "content" && f.key() != "name")
        return Bad(where + "." + f.key(), where + ": unknown field '" + f.key() + "'");
    auto role = e.find("role"), content = e.find("content");
    if (role == e.end() || !role->is_string()) return Bad(where + ".role", where + ".role must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant")
      return Bad(where + ".role", where + ".role '" + r + "' is not system, user or assistant");
    if (content == e.end() || !content->is_string())
      return Bad(where + ".content", where + ".content must be a string");
    std::string name;
    if (auto n = e.find("name"); n != e.end()) {
      if (!n->is_string() || n->get<std::string>().empty())
        return Bad(where + ".name", where + ".name must be a non-empty string");
      name = n->get<std::string>();
    }
    msgs.push_back({r, content->get<std::string>(), name});
  }
  auto text = m.chat->Render(msgs);
  if (!text.ok()) return Bad("messages", text.status().message());
  auto e = m.chat->carries_special_tokens() ? m.codec->EncodeChat(*text) : m.codec->EncodePrompt(*text);
  if (!e.ok()) return Bad("messages", e.status().message());
  *ids = *e;
  for (const std::string& s : m.chat->Stops()) stops->push_back(s);
  return std::nullopt;
}

std::optional<ApiError> Parse(const json& j, bool chat, const ServedModel& m, CompletionRequest* r) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!Known(chat).count(it.key())) return Bad(it.key(), "unknown field '" + it.key() + "'");
  if (auto e = CheckNoOps(j)) return e;
  auto model = j.find("model");
  if (model == j.end() || !model->is_string()) return Bad("model", "model must be a string naming the served model");
  r->model = model->get<std::string>();
  if (r->model != m.id)
    return ApiError{404, "invalid_request_error",
                    "The model '" + r->model + "' does not exist; this server serves '" + m.id + "'", "model",
                    "model_not_found"};
  if (auto e = chat ? Messages(j, m, &r->prompt, &r->stop) : Prompt(j, m, &r->prompt)) return e;
  if (auto e = Number(j, "temperature", 0, 2, &r->temperature)) return e;
  if (auto e = Number(j, "top_p", 0, 1, &r->top_p)) return e;
  if (auto e = Bool(j, "stream", &r->stream)) return e;
  if (auto e = Bool(j, "ignore_eos", &r->ignore_eos)) return e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("stream_options", "stream_options must be an object");
    for (auto f = it->begin(); f != it->end(); ++f)
      if (f.key() != "include_usage")
        return Bad("stream_options." + f.key(), "stream_options: unknown field '" + f.key() + "'");
    if (auto e = Bool(*it, "include_usage", &r->include_usage)) return e;
  }
  if (auto e = Stops(j, &r->stop)) return e;
  long long v = 0;
  bool has_seed = false;
  if (auto e = Integer(j, "seed", INT64_MIN, INT64_MAX, &v, &has_seed)) return e;
  if (has_seed) r->seed = static_cast<uint64_t>(v);
  if (!chat) {
    long long lp = -1;
    if (auto e = Integer(j, "logprobs", 0, 5, &lp)) return e;
    r->logprobs = static_cast<int>(lp);
  } else if (auto it = j.find("logprobs"); it != j.end() && !it->is_null() && *it != false) {
    return Bad("logprobs", "logprobs for chat completions is not supported by verity serve (use /v1/completions)");
  }
  return std::nullopt;
}

// max_tokens (or chat's max_completion_tokens): the API's default is 16 for
// completions and "until the context ends" for chat; prompt + max_tokens
// past the context is refused, not silently cut.
std::optional<ApiError> Length(const json& j, bool chat, const ServedModel& m, CompletionRequest* r) {
  const int n_prompt = static_cast<int>(r->prompt.size());
  if (n_prompt >= m.context)
    return Bad(chat ? "messages" : "prompt", "the prompt is " + std::to_string(n_prompt) +
                                                 " tokens; the context holds " + std::to_string(m.context) +
                                                 " (at least one must be left to generate)");
  const char* f = chat && j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  long long mt = -1;
  bool given = false;
  if (auto e = Integer(j, f, 1, INT32_MAX, &mt, &given)) return e;
  if (!given) mt = chat ? m.context - n_prompt : std::min(16, m.context - n_prompt);
  if (n_prompt + mt > m.context)
    return Bad(f, std::string(f) + "=" + std::to_string(mt) + " with a " + std::to_string(n_prompt) +
                      "-token prompt exceeds the context of " + std::to_string(m.context) + " tokens");
  r->max_tokens = static_cast<int>(mt);
  return std::nullopt;
}

// True iff `body` nests arrays and objects deeper than `limit` (strings
// skipped). Error messages print values (dump() recurses), so a deep body
// would overflow a handler's stack: it is refused before it is parsed.
bool NestsDeeperThan(const std::string& body, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > limit) return true;
    } else if (ch == ']' || ch == '}') {
      depth--;
    }
  }
  return false;
}

}  // namespace

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const std::string& body, bool chat,
                                                                 const ServedModel& served, uint64_t seed_if_absent) {
  if (NestsDeeperThan(body, 32)) return Bad("", "the body nests arrays or objects deeper than 32 levels");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("", "the body is not valid JSON (or not valid UTF-8)");
  if (!j.is_object()) return Bad("", "the body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  r.seed = seed_if_absent;
  if (auto e = Parse(j, chat, served, &r)) return *e;
  if (auto e = Length(j, chat, served, &r)) return *e;
  return r;
}

}  // namespace verity::serve
