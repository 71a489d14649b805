// Chat templates: the model's own (tokenizer_config.json's chat_template),
// rendered by serve/jinja.h exactly as Hugging Face's apply_chat_template
// renders it, or refused by name at startup when it uses Jinja outside that
// subset (a wrong prompt format is a silently wrong model); or, for a model
// with none, a format verity renders itself chosen by the operator by name
// (`verity serve --chat-template chatml`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::serve {

struct ChatMessage {
  std::string role, content;  // role: system, user or assistant
  std::string name;           // the API's optional participant name; "" when not given
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  virtual const char* name() const = 0;
  // The prompt text for `messages`, ending where the assistant's reply
  // begins; an error is the template's refusal of the conversation (its
  // raise_exception, e.g. roles that do not alternate).
  [[nodiscard]] virtual Result<std::string> Render(const std::vector<ChatMessage>& messages) const = 0;
  // Text whose appearance in the reply ends it (the end-of-turn marker).
  virtual std::vector<std::string> Stops() const = 0;
  // True when the text carries the model's special tokens itself (a model's
  // own template writes bos_token): it is encoded as apply_chat_template
  // encodes it, with no BOS added. False: encoded as a completion's prompt.
  virtual bool carries_special_tokens() const = 0;
};

// The built-in template `name` ("chatml"); an error lists the known ones.
[[nodiscard]] Result<std::unique_ptr<ChatTemplate>> BuiltinChatTemplate(const std::string& name);

// The model's own template from the tokenizer_config.json in `dir` (or beside
// the file `path`): nullptr when it has none; an error names the file and,
// for a template outside serve/jinja.h's subset, the construct and its line.
// The special tokens' text (transformers' special_tokens_map) comes from the
// same file, read once.
[[nodiscard]] Result<std::unique_ptr<ChatTemplate>> ModelChatTemplateOf(const std::string& path);

}  // namespace verity::serve
