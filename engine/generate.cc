// run.c's generate loop (the prompt prefilled) and the teacher-forced forward
// used by logits/parity.
#include <cctype>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>

#include "engine/engine.h"

namespace verity {

std::string SafePiece(const std::string& piece) {
  if (piece.empty()) return std::string();
  if (piece.size() == 1) {
    unsigned char b = static_cast<unsigned char>(piece[0]);
    if (!(std::isprint(b) || std::isspace(b))) return std::string();
  }
  return piece;
}

namespace {

// How the loop turns ids into text and where a sequence ends: run.c's pieces
// and BOS for llama2.c; the tokenizer's own decoder and EOS otherwise.
struct TextRules {
  std::function<std::string(int prev, int token)> piece;  // empty: decode all ids at the end
  std::function<bool(int token)> ends;
};

Result<GenerateResult> RunLoop(Decoder& t, const std::vector<int>& prompt, const GenerateOptions& opt,
                               const TextRules& rules) {
  const ModelConfig& c = t.model().config;
  if (static_cast<int>(prompt.size()) > c.seq_len)
    return Status::Error("--prompt: " + std::to_string(prompt.size()) +
                         " tokens do not fit the context seq_len=" + std::to_string(c.seq_len) + " (--ctx)");
  if (static_cast<int>(prompt.size()) > opt.steps)
    return Status::Error("--prompt: " + std::to_string(prompt.size()) + " tokens exceed --steps " +
                         std::to_string(opt.steps) + " (steps count the prompt's positions)");
  VERITY_RETURN_IF_ERROR(ValidateIds(prompt, c, "--prompt"));

  Sampler sampler(c.vocab_size, opt.temperature, opt.topp, opt.seed);
  GenerateResult r;
  const int n_prompt = static_cast<int>(prompt.size());
  r.prompt_tokens = n_prompt;
  std::vector<float> logits(c.vocab_size);
  using Clock = std::chrono::steady_clock;

  // The prompt's positions in one prefill; its pieces print as run.c prints them.
  auto t0 = Clock::now();
  const float* out = t.Prefill(prompt.data(), n_prompt, 0);
  VERITY_RETURN_IF_ERROR(t.status());
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.positions = n_prompt;
  for (int i = 0; i + 1 < n_prompt; i++) {
    if (rules.ends(prompt[i + 1])) {
      r.text += "\n";
      return r;
    }
    if (rules.piece) r.text += rules.piece(prompt[i], prompt[i + 1]);
    r.ids.push_back(prompt[i + 1]);
  }
  // Then one sampled token per position, each fed back in. At temperature 0
  // the pick is the decoder's (Decoder::ForwardGreedy: a GPU picks on the
  // device and sends one int, not the vocabulary's logits); the same token as
  // the sampler's argmax, ties to the lower index.
  auto sample = [&](const float* l) {
    std::memcpy(logits.data(), l, logits.size() * sizeof(float));
    return sampler.Sample(logits.data());
  };
  const bool greedy = opt.temperature == 0.0f;
  int token = prompt[n_prompt - 1];
  for (int pos = n_prompt - 1; pos < opt.steps; pos++) {
    auto t1 = Clock::now();
    int next = 0;
    if (pos > n_prompt - 1) {
      if (greedy) {
        next = t.ForwardGreedy(token, pos);
      } else {
        out = t.Forward(token, pos);
      }
      VERITY_RETURN_IF_ERROR(t.status());
      r.positions++;
    }
    if (pos == n_prompt - 1 || !greedy) next = sample(out);  // the prompt's last logits, or a sampled pick
    r.sample_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
    if (rules.ends(next)) break;
    if (rules.piece) r.text += rules.piece(token, next);
    r.ids.push_back(next);
    token = next;
  }
  r.text += "\n";
  return r;
}

// Returns true iff `token` is one of the model's EOS ids.
bool ModelEnds(const ModelConfig& c, int token) {
  for (int e : c.eos_ids)
    if (token == e) return true;
  return false;
}

Status CheckOptions(const Decoder& t, const GenerateOptions& opt) {
  const ModelConfig& c = t.model().config;
  if (opt.steps < 1 || opt.steps > c.seq_len)
    return Status::Error("--steps " + std::to_string(opt.steps) + " is outside [1, seq_len=" +
                         std::to_string(c.seq_len) + "] of " + t.model().source + " (the context: --ctx)");
  if (opt.temperature < 0.0f) return Status::Error("--temperature must be >= 0");
  if (opt.topp < 0.0f || opt.topp > 1.0f) return Status::Error("--topp must be in [0, 1]");
  return OkStatus();
}

}  // namespace

Result<GenerateResult> Generate(Decoder& t, const Tokenizer& tok, const GenerateOptions& opt) {
  VERITY_RETURN_IF_ERROR(CheckOptions(t, opt));
  // The model's BOS (from its files; llama2.c: 1) starts the prompt and, as in
  // run.c, delimits sequences; the model's EOS ids end one.
  const ModelConfig& c = t.model().config;
  const int bos = c.bos_id >= 0 ? c.bos_id : tok.bos_id();
  std::vector<int> prompt;
  if (bos >= 0) prompt.push_back(bos);
  for (int id : tok.Encode(opt.prompt, /*bos=*/false, /*eos=*/false)) prompt.push_back(id);
  if (prompt.empty()) return Status::Error("--prompt is empty and " + t.model().source + " defines no BOS token");
  TextRules rules;
  rules.piece = [&tok](int prev, int token) { return SafePiece(tok.Decode(prev, token)); };
  rules.ends = [&c, bos](int token) { return token == bos || ModelEnds(c, token); };
  return RunLoop(t, prompt, opt, rules);
}

Result<GenerateResult> Generate(Decoder& t, const TextTokenizer& tok, const GenerateOptions& opt) {
  if (const auto* l = dynamic_cast<const Llama2cTokenizer*>(&tok)) return Generate(t, *l, opt);
  VERITY_RETURN_IF_ERROR(CheckOptions(t, opt));
  VERITY_ASSIGN_OR_RETURN(auto prompt, tok.Encode(opt.prompt, /*add_special=*/true));
  if (prompt.empty()) {  // nothing to start from: the tokenizer's BOS, if it has one
    if (tok.bos_id() < 0)
      return Status::Error("--prompt: empty, and the tokenizer (" + tok.kind() + ") defines no BOS to start from");
    prompt.push_back(tok.bos_id());
  }
  TextRules rules;
  const ModelConfig& c = t.model().config;  // the model's EOS ids (generation_config.json) end it too
  rules.ends = [&tok, &c](int token) { return token == tok.eos_id() || ModelEnds(c, token); };
  VERITY_ASSIGN_OR_RETURN(auto r, RunLoop(t, prompt, opt, rules));
  // A prompt that does not open with BOS (Llama 3's files add none) starts with text.
  if (prompt[0] != tok.bos_id()) r.ids.insert(r.ids.begin(), prompt[0]);
  VERITY_ASSIGN_OR_RETURN(auto text, tok.Decode(r.ids));
  r.text = text + "\n";
  return r;
}

Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& what, long min_value) {
  std::vector<int> out;
  std::string tok;
  auto flush = [&]() -> Status {
    if (tok.empty()) return OkStatus();
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(tok, &used);
    } catch (...) {
      used = 0;
    }
    if (used != tok.size() || v < INT32_MIN || v > INT32_MAX)
      return Status::Error(what + ": '" + tok + "' is not an integer");
    if (v < min_value) return Status::Error(what + ": " + tok + " is below " + std::to_string(min_value));
    out.push_back(static_cast<int>(v));
    tok.clear();
    return OkStatus();
  };
  for (char ch : text) {
    if (ch == ' ' || ch == ',' || ch == '\n' || ch == '\t' || ch == '\r') {
      VERITY_RETURN_IF_ERROR(flush());
    } else {
      tok += ch;
    }
  }
  VERITY_RETURN_IF_ERROR(flush());
  if (out.empty()) return Status::Error(what + ": no values given");
  return out;
}

Result<std::vector<float>> TeacherForcedLogits(Decoder& t, const std::vector<int>& ids) {
  const int v = t.model().config.vocab_size;
  std::vector<float> all(ids.size() * static_cast<size_t>(v));
  for (size_t pos = 0; pos < ids.size(); pos++) {
    const float* out = t.Forward(ids[pos], static_cast<int>(pos));
    VERITY_RETURN_IF_ERROR(t.status());
    std::memcpy(all.data() + pos * v, out, v * sizeof(float));
  }
  return all;
}

}  // namespace verity
