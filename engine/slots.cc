// SlotDecoder: one RankForward over the whole model holding `slots` KV
// caches. A Step runs one position of each of its slots as the rows of one
// block whose matmuls read every weight matrix once for all rows
// (Backend::MatmulRows), each row bit for bit what that slot's position gives
// decoded alone; attention, RoPE and the MoE routing are per row anyway.
#include "engine/slots.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "engine/rank_forward.h"

namespace verity {
namespace {

std::string Str(long v) { return std::to_string(v); }

class BatchedDecoder final : public SlotDecoder {
 public:
  BatchedDecoder(const Model& m, std::unique_ptr<kernels::Backend> b, int slots)
      : model_(m),
        backend_(std::move(b)),
        slots_(slots),
        forward_(WholeModelForward(m, *backend_, slots)),
        busy_(slots, 0) {}

  int slots() const override { return slots_; }
  int context() const override { return model_.config.seq_len; }
  const Model& model() const override { return model_; }
  const char* backend_name() const override { return backend_->name(); }
  size_t kv_cache_bytes() const override { return forward_->kv_cache_bytes(); }

  const float* Prefill(int slot, const int* tokens, int T, int pos0) override {
    float* logits = forward_->logits();
    if (!Valid(&slot, 1) || !Valid(slot, tokens, T, pos0)) return Poisoned(logits, 1);
    // Transformer::Prefill's blocks, so the slot's cache and logits are its bits.
    const int block = backend_->prefill_block();
    for (int b = 0; b < T; b += block) {
      const int n = std::min(block, T - b);
      forward_->Block(tokens + b, n, pos0 + b, /*logits=*/b + n == T, slot);
    }
    return Checked(logits, 1);
  }

  void PrefillMany(const Prompt* prompts, int n, float* logits) override {
    std::vector<int> slot(std::max(n, 0));
    for (int i = 0; i < n; i++) slot[i] = prompts[i].slot;
    bool ok = Count(n) && Valid(slot.data(), n);
    for (int i = 0; ok && i < n; i++) ok = Valid(prompts[i].slot, prompts[i].tokens, prompts[i].T, prompts[i].pos0);
    if (!ok) return static_cast<void>(Poisoned(logits, std::max(n, 0)));
    const size_t vocab = model_.config.vocab_size;
    if (!backend_->batch_rows_independent()) {
      for (int i = 0; i < n; i++) {
        const Prompt& p = prompts[i];
        const float* l = Prefill(p.slot, p.tokens, p.T, p.pos0);
        std::copy(l, l + vocab, logits + i * vocab);
      }
      return;
    }
    int longest = 0;
    for (int i = 0; i < n; i++) longest = std::max(longest, prompts[i].T);
    for (int b = 0; b < longest; b += backend_->prefill_block()) Wave(prompts, n, b, logits);
    Checked(logits, n);
  }

  void Step(const int* slot, const int* token, const int* pos, int n, float* logits) override {
    if (!ValidStep(slot, token, pos, n)) return static_cast<void>(Poisoned(logits, std::max(n, 0)));
    forward_->Step(slot, token, pos, n, logits);
    Checked(logits, n);
  }

  void StepGreedy(const int* slot, const int* token, const int* pos, int n, int* picks) override {
    const bool ok = ValidStep(slot, token, pos, n);
    if (ok) forward_->StepGreedy(slot, token, pos, n, picks);
    if (!ok || !backend_->status().ok()) std::fill(picks, picks + std::max(n, 0), -1);
  }

  Status status() const override { return error_.ok() ? backend_->status() : error_; }

 private:
  // The rows of one pass of PrefillMany.
  struct Rows {
    std::vector<int> slot, token, pos;
    std::vector<int> last, prompt;  // a prompt's last row in this pass, and which prompt it ends
    void Add(const SlotDecoder::Prompt& p, int at) {
      slot.push_back(p.slot), token.push_back(p.tokens[at]), pos.push_back(p.pos0 + at);
    }
  };

  // Block b (from position b of each prompt) of every prompt that has one,
  // cut as Prefill cuts it. Blocks of 2+ rows share one batched pass; a
  // 1-row block (a prompt's tail) is what a decode step gives that row, so
  // those share one Step. Each prompt's last row's logits go to its row of
  // `logits`.
  void Wave(const Prompt* prompts, int n, int b, float* logits) {
    Rows batched, single;
    for (int i = 0; i < n; i++) {
      const Prompt& p = prompts[i];
      const int m = std::min(backend_->prefill_block(), p.T - b);
      if (m < 1) continue;
      Rows& to = m == 1 ? single : batched;
      for (int k = b; k < b + m; k++) to.Add(p, k);
      if (b + m == p.T) to.last.push_back(static_cast<int>(to.slot.size()) - 1), to.prompt.push_back(i);
    }
    const size_t vocab = model_.config.vocab_size;
    auto deliver = [&](const Rows& r) {
      for (size_t j = 0; j < r.prompt.size(); j++)
        std::copy(wave_logits_.begin() + j * vocab, wave_logits_.begin() + (j + 1) * vocab,
                  logits + r.prompt[j] * vocab);
    };
    if (!batched.slot.empty()) {
      wave_logits_.resize(batched.last.size() * vocab);
      forward_->PromptRows(batched.slot.data(), batched.token.data(), batched.pos.data(),
                           static_cast<int>(batched.slot.size()), batched.last.data(),
                           static_cast<int>(batched.last.size()), wave_logits_.data());
      deliver(batched);
    }
    if (!single.slot.empty()) {
      const int k = static_cast<int>(single.slot.size());
      wave_logits_.resize(k * vocab);
      forward_->Step(single.slot.data(), single.token.data(), single.pos.data(), k, wave_logits_.data());
      deliver(single);  // every row of a 1-row block is its prompt's last
    }
  }

  // 1 .. slots() sequences in one call, or the named error.
  bool Count(int n) {
    if (n >= 1 && n <= slots_) return true;
    return Fail(std::to_string(n) + " sequences in one call; between 1 and the " + Str(slots_) + " slots (--parallel)");
  }
  // A step's arguments: 1 .. slots() rows in distinct slots, each token and
  // position in range; else the named error (status()).
  bool ValidStep(const int* slot, const int* token, const int* pos, int n) {
    bool ok = Count(n) && Valid(slot, n);
    for (int i = 0; ok && i < n; i++) ok = Valid(slot[i], token + i, 1, pos[i]);
    return ok;
  }
  // Slots in range and distinct (two rows of one slot in a step would race on its cache).
  bool Valid(const int* slot, int n) {
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
      if (slot[i] < 0 || slot[i] >= slots_) {
        ok = Fail("slot " + Str(slot[i]) + " is not one of the " + Str(slots_) + " slots (--parallel)");
      } else if (busy_[slot[i]]) {
        ok = Fail("slot " + Str(slot[i]) + " appears twice in one step");
      }
      if (ok) busy_[slot[i]] = 1;
    }
    for (int i = 0; i < n; i++)
      if (slot[i] >= 0 && slot[i] < slots_) busy_[slot[i]] = 0;
    return ok;
  }
  // Tokens in the vocabulary, positions pos0 .. pos0+T-1 inside the context.
  bool Valid(int slot, const int* tokens, int T, int pos0) {
    const ModelConfig& c = model_.config;
    if (T < 1 || pos0 < 0 || pos0 > c.seq_len - T)
      return Fail("slot " + Str(slot) + ": positions " + Str(pos0) + " .. " + Str(static_cast<long>(pos0) + T - 1) +
                  " are outside the context of " + Str(c.seq_len));
    for (int i = 0; i < T; i++)
      if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
        return Fail("slot " + Str(slot) + ": token " + Str(tokens[i]) + " is outside the vocabulary of " +
                    Str(c.vocab_size));
    return true;
  }
  bool Fail(const std::string& why) {
    if (error_.ok()) error_ = Status::Error(why);
    return false;
  }
  // n rows of NaN: a caller that ignores status() still cannot use them.
  float* Poisoned(float* logits, int n) {
    std::fill(logits, logits + static_cast<size_t>(n) * model_.config.vocab_size,
              std::numeric_limits<float>::quiet_NaN());
    return logits;
  }
  // As Transformer: a failed backend's rows are NaN, never stale.
  float* Checked(float* logits, int n) { return backend_->status().ok() ? logits : Poisoned(logits, n); }

  const Model& model_;
  std::unique_ptr<kernels::Backend> backend_;
  const int slots_;
  std::unique_ptr<RankForward> forward_;
  std::vector<char> busy_;          // scratch of Valid: the slots seen in this step
  std::vector<float> wave_logits_;  // one PrefillMany pass's logits
  Status error_;
};

}  // namespace

Result<std::unique_ptr<SlotDecoder>> SlotDecoder::Create(const Model& model, std::unique_ptr<kernels::Backend> backend,
                                                         int slots) {
  if (slots < 1) return Status::Error("--parallel must be at least 1, got " + std::to_string(slots));
  VERITY_RETURN_IF_ERROR(CheckBackendRunsModel(model, *backend));
  const ModelConfig& c = model.config;
  // Refused before allocation, as Transformer::Create does for one context.
  const double kv_bytes = static_cast<double>(slots) * FootprintOf(model).kv_cache_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double physical = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
  auto mib = [](double b) { return std::to_string(static_cast<long long>(std::ceil(b / (1 << 20)))) + " MiB"; };
  const std::string what = "--parallel " + std::to_string(slots) + " x a context of " + std::to_string(c.seq_len) +
                           " positions needs " + mib(kv_bytes) + " of KV cache";
  if (physical > 0 && kv_bytes > physical)
    return Status::Error(model.source + ": " + what + ", more than this machine's " + mib(physical) +
                         "; choose a smaller --parallel or --ctx");
  try {
    return std::unique_ptr<SlotDecoder>(new BatchedDecoder(model, std::move(backend), slots));
  } catch (const std::bad_alloc&) {
    return Status::Error(model.source + ": " + what +
                         ", which cannot be allocated; choose a smaller --parallel or --ctx");
  }
}

}  // namespace verity
