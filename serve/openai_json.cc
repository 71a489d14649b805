#include "serve/openai_json.h"

namespace verity::serve {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ErrorBody(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt}, {"completion_tokens", u.completion}, {"total_tokens", u.prompt + u.completion}};
}

json LogprobsJson(const std::vector<TokenLog>& tokens) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  size_t off = 0;
  for (const TokenLog& t : tokens) {
    toks.push_back(t.text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [s, lp] : t.top) top[s] = lp;
    tops.push_back(top);
    offs.push_back(off);
    off += t.text.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

namespace {
json Head(const CompletionHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}
json Finish(const std::string& f) { return f.empty() ? json(nullptr) : json(f); }
}  // namespace

json CompletionBody(const CompletionHead& h, const std::string& text, const std::string& finish, const Usage& u,
                    const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", Finish(finish)}};
  json body = Head(h, h.chat ? "chat.completion" : "text_completion");
  if (h.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    choice["logprobs"] = nullptr;
  } else {
    choice["text"] = text;
    choice["logprobs"] = logprobs;
  }
  body["choices"] = json::array({choice});
  body["usage"] = UsageJson(u);
  return body;
}

json ChunkBody(const CompletionHead& h, const std::string& text, const std::string& finish, bool first) {
  json choice = {{"index", 0}, {"finish_reason", Finish(finish)}, {"logprobs", nullptr}};
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json body = Head(h, h.chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array({choice});
  return body;
}

json UsageChunk(const CompletionHead& h, const Usage& u) {
  json body = Head(h, h.chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array();
  body["usage"] = UsageJson(u);
  return body;
}

}  // namespace verity::serve
