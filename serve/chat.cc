#include "serve/chat.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace verity::serve {
namespace {

// ChatML (OpenAI's, as Qwen and many fine-tunes use it): each message
// "<|im_start|>{role}\n{content}<|im_end|>\n", then "<|im_start|>assistant\n".
class ChatMl final : public ChatTemplate {
 public:
  const char* name() const override { return "chatml"; }
  std::string Render(const std::vector<ChatMessage>& messages) const override {
    std::string s;
    for (const ChatMessage& m : messages) s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    return s + "<|im_start|>assistant\n";
  }
  std::vector<std::string> Stops() const override { return {"<|im_end|>", "<|im_start|>"}; }
};

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Result<std::unique_ptr<ChatTemplate>> BuiltinChatTemplate(const std::string& name) {
  if (name == "chatml") return std::unique_ptr<ChatTemplate>(new ChatMl());
  return Status::Error("--chat-template: '" + name + "' is not a template verity renders (known: chatml)");
}

Result<std::string> ModelChatTemplate(const std::string& path) {
  const std::string dir = IsDir(path) ? path : path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  const std::string file = (dir.empty() ? std::string(".") : dir) + "/tokenizer_config.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::string();
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Error(file + ": not a JSON object");
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  return Status::Error(file + ": chat_template is not a string (named templates are not rendered)");
}

}  // namespace verity::serve
