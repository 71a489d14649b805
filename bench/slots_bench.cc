// A continuous-batching step against the same sequences decoded one by one:
// for n slots, one SlotDecoder::Step of n rows versus n Transformer::Forward
// calls (one Transformer per sequence), both on the fast backend with the
// given threads, timed in interleaved rounds (so both see the same machine),
// and the logits compared bit for bit on every step.
// Run: build/bench/slots_bench MODEL [dtype] [rounds]
// Prints per n and thread count: the aggregate tokens/s of each, the median
// of the per-round ratios, and Step(n)'s aggregate against one stream.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/median.h"
#include "engine/engine.h"
#include "engine/slots.h"
#include "kernels/cpu/backends.h"

namespace verity {
namespace {

constexpr int kPrompt = 16, kSteps = 4;

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

struct Run {
  double step_s = 0, alone_s = 0;
  bool identical = true;
};

// kSteps positions of n sequences each way; logits compared row by row.
Run OneRound(SlotDecoder& d, std::vector<std::unique_ptr<Transformer>>& alone, int n, int pos0) {
  const int vocab = d.model().config.vocab_size;
  std::vector<int> slot(n), token(n), pos(n);
  std::vector<float> logits(static_cast<size_t>(n) * vocab), want(logits.size());
  Run r;
  for (int k = 0; k < kSteps; k++) {
    for (int i = 0; i < n; i++) slot[i] = i, token[i] = 1 + (7 * i + k) % (vocab - 1), pos[i] = pos0 + k;
    auto t0 = std::chrono::steady_clock::now();
    d.Step(slot.data(), token.data(), pos.data(), n, logits.data());
    r.step_s += Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++)
      std::memcpy(want.data() + static_cast<size_t>(i) * vocab, alone[i]->Forward(token[i], pos[i]),
                  vocab * sizeof(float));
    r.alone_s += Seconds(t0);
    r.identical = r.identical && std::memcmp(logits.data(), want.data(), logits.size() * sizeof(float)) == 0;
  }
  return r;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: slots_bench MODEL [f32|bf16|q8_0] [rounds]\n");
    return 2;
  }
  auto dtype = kernels::DTypeFromName(argc > 2 ? argv[2] : "f32");
  if (!dtype.ok()) return std::fprintf(stderr, "%s\n", dtype.status().message().c_str()), 2;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  auto m = LoadModel(argv[1], *dtype);
  if (!m.ok()) return std::fprintf(stderr, "%s\n", m.status().message().c_str()), 1;
  std::printf("model %s dtype %s, %d rounds of %d steps, simd %s\n", argv[1], kernels::DTypeName(*dtype), rounds,
              kSteps, kernels::SimdTargetName());
  std::printf("threads  n  step_tok/s  alone_tok/s  step/alone  step_vs_1stream  identical\n");
  for (int threads : {1, 2}) {
    double one_stream = 0;
    for (int n : {1, 8, 16}) {
      auto d = SlotDecoder::Create(**m, kernels::MakeFast(threads), n);
      if (!d.ok()) return std::fprintf(stderr, "%s\n", d.status().message().c_str()), 1;
      std::vector<std::unique_ptr<Transformer>> alone;
      std::vector<int> prompt(kPrompt);
      for (int i = 0; i < kPrompt; i++) prompt[i] = 1 + i;
      for (int s = 0; s < n; s++) {
        auto t = Transformer::Create(**m, kernels::MakeFast(threads));
        if (!t.ok()) return std::fprintf(stderr, "%s\n", t.status().message().c_str()), 1;
        (*t)->Prefill(prompt.data(), kPrompt, 0);
        (*d)->Prefill(s, prompt.data(), kPrompt, 0);
        alone.push_back(std::move(t).value());
      }
      std::vector<double> ratio, step_rate, alone_rate;
      bool identical = true;
      for (int r = 0; r < rounds; r++) {
        const Run run = OneRound(**d, alone, n, kPrompt + r * kSteps);
        identical = identical && run.identical;
        ratio.push_back(run.alone_s / run.step_s);
        step_rate.push_back(n * kSteps / run.step_s);
        alone_rate.push_back(n * kSteps / run.alone_s);
      }
      const double step = Median(step_rate);
      if (n == 1) one_stream = Median(alone_rate);
      std::printf("%7d %2d %11.1f %12.1f %11.2fx %15.2fx  %s\n", threads, n, step, Median(alone_rate), Median(ratio),
                  step / one_stream, identical ? "yes" : "NO");
      std::fflush(stdout);
      if (!(*d)->status().ok()) return std::fprintf(stderr, "%s\n", (*d)->status().message().c_str()), 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace verity

int main(int argc, char** argv) { return verity::Main(argc, argv); }
