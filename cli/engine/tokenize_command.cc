// tokenize: thin wiring over formats/tokenizer.h (encode or decode text with
// any tokenizer file verity reads).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/engine/commands.h"
#include "formats/tokenizer.h"

namespace verity::cli {
namespace {

std::string JoinIds(const std::vector<int>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

// "1 2 3" -> ids; `where` names the input in errors.
Result<std::vector<int>> ParseIds(const std::string& text, const std::string& where) {
  std::vector<int> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (...) {
      used = 0;
    }
    if (used != word.size() || v < INT32_MIN || v > INT32_MAX)
      return Status::Error(where + ": \"" + word + "\" is not a token id");
    ids.push_back(static_cast<int>(v));
  }
  return ids;
}

// One JSONL line of --decode input: an array of integers or a string "1 2 3".
Result<std::vector<int>> IdsFromJson(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) return ParseIds(j.get<std::string>(), where);
  if (!j.is_array()) return Status::Error(where + ": expected an array of token ids or a string of them");
  std::vector<int> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
      return Status::Error(where + ": " + v.dump() + " is not a token id");
    ids.push_back(v.get<int>());
  }
  return ids;
}

int RunTokenize(const std::string& tok_path, const std::string& text, const std::string& jsonl, bool special,
                bool decode) {
  auto tok = LoadTokenizer(tok_path);
  if (!tok.ok()) return Fail(tok.status());
  std::string out;
  if (!jsonl.empty()) {
    std::ifstream in(jsonl, std::ios::binary);
    if (!in) return Fail(Status::Error(jsonl + ": cannot open"));
    std::string line;
    for (int n = 1; std::getline(in, line); n++) {
      const std::string where = jsonl + ":" + std::to_string(n);
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return Fail(Status::Error(where + ": not valid JSON"));
      if (decode) {
        auto ids = IdsFromJson(j, where);
        if (!ids.ok()) return Fail(ids.status());
        auto s = (*tok)->Decode(*ids);
        if (!s.ok()) return Fail(Status::Error(where + ": " + s.status().message()));
        out += JsonLine(nlohmann::json(*s)) + "\n";
      } else {
        if (!j.is_string()) return Fail(Status::Error(where + ": expected a JSON string"));
        auto ids = (*tok)->Encode(j.get<std::string>(), special);
        if (!ids.ok()) return Fail(Status::Error(where + ": " + ids.status().message()));
        out += JoinIds(*ids) + "\n";
      }
    }
  } else if (decode) {
    auto ids = ParseIds(text, "--text");
    if (!ids.ok()) return Fail(ids.status());
    auto s = (*tok)->Decode(*ids);
    if (!s.ok()) return Fail(s.status());
    out = *s + "\n";
  } else {
    auto ids = (*tok)->Encode(text, special);
    if (!ids.ok()) return Fail(Status::Error("--text: " + ids.status().message()));
    out = JoinIds(*ids) + "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "tokenize",
      "Token ids of text, one line per input, space-separated (llama2.c tokenizer.bin, Hugging Face "
      "tokenizer.json, SentencePiece .model). With --decode, ids back to text: --text \"1 2 3\" prints the "
      "text; --jsonl lines (arrays of ids, or strings of them) print one JSON string each.");
  auto tok = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto jsonl = std::make_shared<std::string>();
  auto special = std::make_shared<bool>(false);
  auto decode = std::make_shared<bool>(false);
  sub->add_option("--tokenizer", *tok, "tokenizer file (or a directory holding one)")->required();
  auto* t = sub->add_option("--text", *text, "one input");
  auto* j = sub->add_option("--jsonl", *jsonl, "a file of inputs, one JSON string per line");
  t->excludes(j);
  sub->add_flag("--special", *special, "add the BOS/EOS the tokenizer's files ask for (encoding only)");
  sub->add_flag("--decode", *decode, "turn ids into text");
  reg.On(sub, [=] {
    if (t->count() == 0 && j->count() == 0) return Fail(Status::Error("tokenize: give --text or --jsonl"));
    return RunTokenize(*tok, *text, *jsonl, *special, *decode);
  });
}

}  // namespace verity::cli
