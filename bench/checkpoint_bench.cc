// Google Benchmark: the tensor audit of a synthetic sharded MoE checkpoint
// with ~100k tensor entries (target <= 2 s). Run: build/bench/checkpoint_bench
#include <benchmark/benchmark.h>

#include <filesystem>

#include "verify/audit.h"

namespace verity {
namespace {

const std::string& BigCheckpoint() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / "verity-bench" / "audit-100k").string();
    if (std::filesystem::exists(d + "/config.json")) return d;
    ModelConfig c;
    c.dim = 8;
    c.hidden_dim = 8;
    c.n_layers = 50;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.vocab_size = 16;
    c.seq_len = 16;
    c.max_positions = c.seq_len, c.head_dim = c.dim / c.n_heads;
    c.shared_classifier = false;
    c.rope_theta = 10000.0f;
    c.norm_eps = 1e-5f;
    c.rope_style = RopeStyle::kHalves;
    c.n_experts = 666;
    c.n_experts_per_tok = 2;
    auto m = SyntheticModel(c, 1);
    Status s = m.ok() ? WriteHfCheckpoint(**m, d, 20, "f32") : m.status();
    if (!s.ok()) {
      std::fprintf(stderr, "cannot write the benchmark checkpoint: %s\n", s.message().c_str());
      std::abort();
    }
    return d;
  }();
  return dir;
}

void BM_Audit100kTensors(benchmark::State& state) {
  const std::string& dir = BigCheckpoint();
  AuditReport r;
  for (auto _ : state) {
    r = AuditCheckpoint(dir, false);
    if (!r.pass) state.SkipWithError(r.Summary().c_str());
  }
  state.counters["tensors"] = r.tensors;
  state.counters["shards"] = r.shards_total;
}
BENCHMARK(BM_Audit100kTensors)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace verity

BENCHMARK_MAIN();
