#include "serve/chat.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serve/jinja.h"

namespace verity::serve {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// ChatML (OpenAI's, as Qwen and many fine-tunes use it): each message
// "<|im_start|>{role}\n{content}<|im_end|>\n", then "<|im_start|>assistant\n".
class ChatMl final : public ChatTemplate {
 public:
  const char* name() const override { return "chatml"; }
  Result<std::string> Render(const std::vector<ChatMessage>& messages) const override {
    std::string s;
    for (const ChatMessage& m : messages) {
      // Dropping it would change the conversation unannounced.
      if (!m.name.empty())
        return Status::Error("a message's name: the chatml format verity renders has no place for one");
      s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    return s + "<|im_start|>assistant\n";
  }
  std::vector<std::string> Stops() const override { return {"<|im_end|>", "<|im_start|>"}; }
  bool carries_special_tokens() const override { return false; }
};

// The model's own Jinja template, with apply_chat_template's variables:
// messages, add_generation_prompt (true: the reply is what is asked for) and
// the special tokens' text. The reply ends at the model's EOS, not at text.
class ModelTemplate final : public ChatTemplate {
 public:
  ModelTemplate(std::unique_ptr<jinja::Template> t, std::map<std::string, jinja::Value> tokens)
      : t_(std::move(t)), tokens_(std::move(tokens)) {}
  const char* name() const override { return "the model's own (tokenizer_config.json chat_template)"; }
  Result<std::string> Render(const std::vector<ChatMessage>& messages) const override {
    std::map<std::string, jinja::Value> vars = tokens_;
    jinja::List list;
    for (const ChatMessage& m : messages) {
      jinja::Dict d = {{"role", jinja::Value::Str(m.role)}, {"content", jinja::Value::Str(m.content)}};
      if (!m.name.empty()) d.emplace_back("name", jinja::Value::Str(m.name));  // as the request gave it
      list.push_back(jinja::Value::MakeDict(std::move(d)));
    }
    vars["messages"] = jinja::Value::MakeList(std::move(list));
    vars["add_generation_prompt"] = jinja::Value::Bool(true);
    // apply_chat_template passes both, None when not given: `tools is not none` must be false.
    vars["tools"] = jinja::Value::None();
    vars["documents"] = jinja::Value::None();
    return t_->Render(vars);
  }
  std::vector<std::string> Stops() const override { return {}; }
  bool carries_special_tokens() const override { return true; }

 private:
  std::unique_ptr<jinja::Template> t_;
  std::map<std::string, jinja::Value> tokens_;
};

// tokenizer_config.json, or a null json when the directory has none.
Result<nlohmann::json> TokenizerConfig(const std::string& path, std::string* file) {
  const std::string dir =
      IsDir(path) ? path : path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  *file = (dir.empty() ? std::string(".") : dir) + "/tokenizer_config.json";
  std::ifstream in(*file, std::ios::binary);
  if (!in) return nlohmann::json();
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Error(*file + ": not a JSON object");
  return j;
}

}  // namespace

Result<std::unique_ptr<ChatTemplate>> BuiltinChatTemplate(const std::string& name) {
  if (name == "chatml") return std::unique_ptr<ChatTemplate>(new ChatMl());
  return Status::Error("--chat-template: '" + name + "' is not a template verity renders (known: chatml)");
}

Result<std::unique_ptr<ChatTemplate>> ModelChatTemplateOf(const std::string& path) {
  std::string file;
  VERITY_ASSIGN_OR_RETURN(nlohmann::json j, TokenizerConfig(path, &file));
  if (j.is_null()) return std::unique_ptr<ChatTemplate>();
  auto src = j.find("chat_template");
  if (src == j.end() || src->is_null()) return std::unique_ptr<ChatTemplate>();
  if (!src->is_string())
    return Status::Error(file + ": chat_template is not a string (named templates are not rendered)");
  auto t = jinja::Template::Parse(src->get<std::string>());
  if (!t.ok())
    return Status::Error(file + ": chat_template is Jinja verity does not render exactly (" + t.status().message() +
                         "); refusing to approximate it");
  // transformers' special_tokens_map: each token a string or an AddedToken
  // object with "content"; additional_special_tokens a list of them.
  std::map<std::string, jinja::Value> tokens;
  auto text_of = [&](const nlohmann::json& v, const std::string& name) -> Result<jinja::Value> {
    if (v.is_string()) return jinja::Value::Str(v.get<std::string>());
    if (v.is_object() && v.contains("content") && v["content"].is_string())
      return jinja::Value::Str(v["content"].get<std::string>());
    return Status::Error(file + ": " + name + " is neither a string nor an object with a string content");
  };
  for (const char* name :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto v = j.find(name);
    if (v == j.end() || v->is_null()) continue;
    VERITY_ASSIGN_OR_RETURN(tokens[name], text_of(*v, name));
  }
  if (auto extra = j.find("additional_special_tokens"); extra != j.end() && !extra->is_null()) {
    if (!extra->is_array()) return Status::Error(file + ": additional_special_tokens is not a list");
    jinja::List list;
    for (size_t i = 0; i < extra->size(); i++) {
      VERITY_ASSIGN_OR_RETURN(jinja::Value t,
                              text_of((*extra)[i], "additional_special_tokens[" + std::to_string(i) + "]"));
      list.push_back(std::move(t));
    }
    tokens["additional_special_tokens"] = jinja::Value::MakeList(std::move(list));
  }
  return std::unique_ptr<ChatTemplate>(new ModelTemplate(std::move(t).value(), std::move(tokens)));
}

}  // namespace verity::serve
