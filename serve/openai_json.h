// The JSON bodies the OpenAI API answers with: errors, completions and chat
// completions whole or as server-sent-event chunks, usage, logprobs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/request.h"
#include "serve/scheduler.h"

namespace verity::serve {

// {"error": {"message", "type", "param", "code"}}
nlohmann::json ErrorBody(const ApiError& e);

// What a finished (or streaming) completion has to say about itself.
struct CompletionHead {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

struct Usage {
  int prompt = 0, completion = 0;
};
nlohmann::json UsageJson(const Usage& u);

// logprobs of a completion: tokens, token_logprobs, top_logprobs, text_offset.
struct TokenLog {
  std::string text;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};
nlohmann::json LogprobsJson(const std::vector<TokenLog>& tokens);

// The whole response of a request that finished.
nlohmann::json CompletionBody(const CompletionHead& h, const std::string& text, const std::string& finish,
                              const Usage& u, const nlohmann::json& logprobs);
// One streamed chunk: `text` (empty allowed), finish reason or null; chat's
// first chunk carries the assistant role.
nlohmann::json ChunkBody(const CompletionHead& h, const std::string& text, const std::string& finish, bool first);
// The final usage chunk (stream_options.include_usage): no choices.
nlohmann::json UsageChunk(const CompletionHead& h, const Usage& u);

// A JSON value as text; invalid UTF-8 (from a byte-level piece) is written as U+FFFD, never an exception.
std::string Dump(const nlohmann::json& j);

}  // namespace verity::serve
