// run.c's sampler, so that a seed names the same text in both programs.
#include <algorithm>

#include "engine/engine.h"

namespace verity {

Sampler::Sampler(int vocab_size, float temperature, float topp, uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), topp_(topp), state_(seed) {
  candidates_.reserve(vocab_size);
}

float Sampler::RandomF32() {
  // xorshift*, as in run.c
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  uint32_t r = static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  return static_cast<float>(r >> 8) / 16777216.0f;
}

int Sampler::Sample(float* logits) {
  const int n = vocab_size_;
  if (temperature_ == 0.0f) return kernels::ArgmaxReference(logits, n);
  for (int i = 0; i < n; i++) logits[i] /= temperature_;
  kernels::Softmax(logits, n);
  const float coin = RandomF32();
  if (topp_ <= 0.0f || topp_ >= 1.0f) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
      cdf += logits[i];
      if (coin < cdf) return i;
    }
    return n - 1;  // rounding
  }
  // Top-p: tokens below (1 - p) / (n - 1) cannot be in the nucleus; drop them first.
  const float cutoff = (1.0f - topp_) / static_cast<float>(n - 1);
  candidates_.clear();
  for (int i = 0; i < n; i++)
    if (logits[i] >= cutoff) candidates_.emplace_back(logits[i], i);
  std::sort(candidates_.begin(), candidates_.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  float cumulative = 0.0f;
  size_t last = candidates_.size() - 1;
  for (size_t i = 0; i < candidates_.size(); i++) {
    cumulative += candidates_[i].first;
    if (cumulative > topp_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (size_t i = 0; i <= last; i++) {
    cdf += candidates_[i].first;
    if (r < cdf) return candidates_[i].second;
  }
  return candidates_[last].second;
}

}  // namespace verity
