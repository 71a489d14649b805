// verity bench: the bench protocol (one verity.bench/1 JSON object).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "cli/commands.h"
#include "engine/engine.h"

namespace verity::cli {
namespace {

int RunBench(const std::string& model_path, int steps, const std::string& backend) {
  auto kern = kernels::MakeBackend(backend);
  if (!kern.ok()) return Fail(kern.status());
  auto model = LoadModel(model_path);
  if (!model.ok()) return Fail(model.status());
  const ModelConfig& c = (*model)->config;
  Transformer t(**model, std::move(kern.value()));
  if (steps < 2 || steps > c.seq_len)
    return Fail(Status::Error("--steps " + std::to_string(steps) + " is outside [2, seq_len=" +
                              std::to_string(c.seq_len) + "]"));
  // First half: teacher-forced prompt positions (prefill); second half: greedy decode.
  const int prefill = steps / 2;
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  int token = Llama2cFormat::kBos;
  const float* logits = nullptr;
  for (int pos = 0; pos < prefill; pos++) {
    logits = t.Forward(token, pos);
    token = static_cast<int>((1 + 7919L * (pos + 1)) % c.vocab_size);  // fixed, model-independent ids
  }
  auto t1 = Clock::now();
  Sampler greedy(c.vocab_size, 0.0f, 0.0f, 0);
  std::vector<float> buf(c.vocab_size);
  for (int pos = prefill; pos < steps; pos++) {
    logits = t.Forward(token, pos);
    std::copy(logits, logits + c.vocab_size, buf.begin());
    token = greedy.Sample(buf.data());
  }
  auto t2 = Clock::now();
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t2 - t1).count();
  nlohmann::json j = {
      {"schema", "verity.bench/1"},
      {"build", {{"id", BuildId()}, {"artifact_sha256", ArtifactSha256()}}},
      {"metrics", {{"decode_tok_s", (steps - prefill) / std::max(dec_s, 1e-9)},
                   {"prefill_tok_s", prefill / std::max(pre_s, 1e-9)}}},
      {"backend", t.backend_name()},
      {"model", model_path},
      {"steps", steps},
      {"ok", true}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("bench", "Bench protocol: prints one verity.bench/1 JSON object.");
  auto model = std::make_shared<std::string>(), backend = std::make_shared<std::string>("fast");
  auto steps = std::make_shared<int>(128);
  sub->add_option("--model", *model, "llama2.c checkpoint")->required();
  sub->add_option("--steps", *steps, "positions: first half prefill, second half greedy decode")->capture_default_str();
  sub->add_option("--backend", *backend, "reference or fast")->capture_default_str();
  reg.On(sub, [=] { return RunBench(*model, *steps, *backend); });
}

}  // namespace verity::cli
