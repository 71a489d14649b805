// An OpenAI completions or chat request, parsed and checked against the
// served model before it reaches the scheduler. Every field the API defines
// is either honoured or refused by name when it asks for something verity
// does not do (n > 1, penalties, logit_bias, echo); a field the API does not
// define is refused too. A refusal is an ApiError: the HTTP status and an
// OpenAI-shaped error body naming the parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "serve/chat.h"
#include "serve/text.h"

namespace verity::serve {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the field at fault, or empty
  std::string code;   // OpenAI's code ("model_not_found", ...), or empty
};

// What a request asks the scheduler and the responder for.
struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::vector<int> prompt;  // the ids fed, BOS included
  int max_tokens = 0;       // resolved: never past the context
  float temperature = 1.0f, top_p = 1.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  int logprobs = -1;  // completions: top alternatives per token (0..5); -1: none
  bool stream = false, include_usage = false;
  bool ignore_eos = false;  // verity's extension (as llama-server's): run max_tokens past EOS
};

// What the parser needs to know about the served model.
struct ServedModel {
  std::string id;  // the name /v1/models lists; a request naming another is a 404
  const TextCodec* codec = nullptr;
  const ChatTemplate* chat = nullptr;  // null: the model has none (chat requests are refused, naming why)
  std::string no_chat_reason;
  int context = 0, vocab = 0;
};

// Parses `body` (bytes as received) as a /v1/completions (chat = false) or
// /v1/chat/completions request. `seed_if_absent` seeds requests that give none.
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const std::string& body, bool chat,
                                                                 const ServedModel& served, uint64_t seed_if_absent);

}  // namespace verity::serve
