// Chat templates verity renders itself, exactly. A model's own template
// (tokenizer_config.json's chat_template) is Jinja; verity has no Jinja
// engine, so such a template is refused by name at startup rather than
// approximated (a wrong prompt format is a silently wrong model). A model
// with no template can be given one of the formats below by name
// (`verity serve --chat-template chatml`): the operator's choice, stated.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::serve {

struct ChatMessage {
  std::string role, content;  // role: system, user or assistant
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  virtual const char* name() const = 0;
  // The prompt text for `messages`, ending where the assistant's reply begins.
  virtual std::string Render(const std::vector<ChatMessage>& messages) const = 0;
  // Text whose appearance in the reply ends it (the end-of-turn marker).
  virtual std::vector<std::string> Stops() const = 0;
};

// The built-in template `name` ("chatml"); an error lists the known ones.
[[nodiscard]] Result<std::unique_ptr<ChatTemplate>> BuiltinChatTemplate(const std::string& name);

// The chat_template of the tokenizer_config.json in `dir` (or beside the
// file `path`), or empty when there is none; an error names the file when
// it exists but cannot be read as JSON.
[[nodiscard]] Result<std::string> ModelChatTemplate(const std::string& path);

}  // namespace verity::serve
