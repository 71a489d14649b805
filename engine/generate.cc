// run.c's generate loop (the prompt prefilled) and the teacher-forced forward
// used by logits/parity.
#include <cctype>
#include <chrono>
#include <climits>
#include <cstring>

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

Result<GenerateResult> Generate(Transformer& t, const Tokenizer& tok, const GenerateOptions& opt) {
  const ModelConfig& c = t.model().config;
  if (opt.steps < 1 || opt.steps > c.seq_len)
    return Status::Error("--steps " + std::to_string(opt.steps) + " is outside [1, seq_len=" +
                         std::to_string(c.seq_len) + "] of " + t.model().source);
  if (opt.temperature < 0.0f) return Status::Error("--temperature must be >= 0");
  if (opt.topp < 0.0f || opt.topp > 1.0f) return Status::Error("--topp must be in [0, 1]");
  std::vector<int> prompt = tok.Encode(opt.prompt, /*bos=*/true, /*eos=*/false);
  if (static_cast<int>(prompt.size()) > c.seq_len)
    return Status::Error("--prompt: " + std::to_string(prompt.size()) +
                         " tokens do not fit the context seq_len=" + std::to_string(c.seq_len));
  if (static_cast<int>(prompt.size()) > opt.steps)
    return Status::Error("--prompt: " + std::to_string(prompt.size()) + " tokens exceed --steps " +
                         std::to_string(opt.steps) + " (steps count the prompt's positions)");

  Sampler sampler(c.vocab_size, opt.temperature, opt.topp, opt.seed);
  GenerateResult r;
  const int n_prompt = static_cast<int>(prompt.size());
  r.prompt_tokens = n_prompt;
  std::vector<float> logits(c.vocab_size);
  using Clock = std::chrono::steady_clock;

  // The prompt's positions in one prefill; its pieces print as run.c prints them.
  auto t0 = Clock::now();
  const float* out = t.Prefill(prompt.data(), n_prompt, 0);
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.positions = n_prompt;
  for (int i = 0; i + 1 < n_prompt; i++) {
    if (prompt[i + 1] == tok.bos_id()) {  // BOS delimits sequences
      r.text += "\n";
      return r;
    }
    r.text += SafePiece(tok.Decode(prompt[i], prompt[i + 1]));
    r.ids.push_back(prompt[i + 1]);
  }
  // Then one sampled token per position, each fed back in.
  int token = prompt[n_prompt - 1];
  for (int pos = n_prompt - 1; pos < opt.steps; pos++) {
    auto t1 = Clock::now();
    if (pos > n_prompt - 1) {
      out = t.Forward(token, pos);
      r.positions++;
    }
    std::memcpy(logits.data(), out, logits.size() * sizeof(float));
    const int next = sampler.Sample(logits.data());
    r.sample_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
    if (next == tok.bos_id()) break;  // BOS delimits sequences
    r.text += SafePiece(tok.Decode(token, next));
    r.ids.push_back(next);
    token = next;
  }
  r.text += "\n";
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

std::vector<float> TeacherForcedLogits(Transformer& t, const std::vector<int>& ids) {
  const int v = t.model().config.vocab_size;
  std::vector<float> all(ids.size() * static_cast<size_t>(v));
  for (size_t pos = 0; pos < ids.size(); pos++) {
    const float* out = t.Forward(ids[pos], static_cast<int>(pos));
    std::memcpy(all.data() + pos * v, out, v * sizeof(float));
  }
  return all;
}

}  // namespace verity
