// Structural sweeps: the same parity measurement across one structural
// parameter. A metric that is zero up to a value and large after it names a
// structural bug, and the value is its threshold.
#include <algorithm>
#include <filesystem>

#include "verify/parity.h"

namespace verity {

Result<SweepResult> RunSweep(const std::string& param, const std::vector<int>& values, const std::string& dir) {
  if (param == "tp") return Status::Error("--param tp: not available in this build (tensor parallelism is not built)");
  if (param != "layers" && param != "heads" && param != "kv_heads" && param != "context" && param != "experts")
    return Status::Error("--param " + param + ": expected layers, heads, kv_heads, context or experts");
  if (values.empty()) return Status::Error("--values: empty list");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SweepResult out;
  out.param = param;
  for (int v : values) {
    ModelConfig c;  // small, deterministic; only `param` varies
    c.dim = 64;
    c.hidden_dim = 160;
    c.n_layers = 2;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.vocab_size = 256;
    c.seq_len = 64;
    c.shared_classifier = true;
    c.rope_theta = Llama2cFormat::kRopeTheta;
    c.norm_eps = Llama2cFormat::kNormEps;
    if (param == "layers") c.n_layers = v;
    if (param == "heads") c.n_heads = v, c.n_kv_heads = v, c.dim = 16 * v;
    if (param == "kv_heads") c.n_kv_heads = v;
    if (param == "context") c.seq_len = v;
    c.max_positions = c.seq_len;
    c.head_dim = c.dim / c.n_heads;
    c.bos_id = Llama2cFormat::kBos;
    std::unique_ptr<Model> model;
    if (param == "experts") {
      // Mixtral-style: v experts, two routed per token (one when v == 1), in memory.
      c.n_experts = v;
      c.n_experts_per_tok = std::min(2, v);
      c.rope_style = RopeStyle::kHalves;
      auto m = SyntheticModel(c, 1234);
      if (!m.ok()) return Status::Error("--values " + std::to_string(v) + ": " + m.status().message());
      model = std::move(m).value();
    } else {
      const std::string path = dir + "/sweep-" + param + "-" + std::to_string(v) + ".bin";
      Status w = WriteSyntheticLlama2c(c, 1234, path);
      if (!w.ok()) return Status::Error("--values " + std::to_string(v) + ": " + w.message());
      VERITY_ASSIGN_OR_RETURN(model, LoadModel(path));
    }
    ParityOptions opt;
    VERITY_ASSIGN_OR_RETURN(ParityReport rep, RunParity(*model, opt));
    SweepPoint p;
    p.value = v;
    p.config = c;
    p.report = rep;
    // Written so a NaN leaves zero too: comparisons with NaN are false.
    p.leaves_zero = !(rep.worst_mean_kl <= kSweepZeroKl) || !(rep.worst_top1 >= 1.0) || !rep.nonfinite.empty();
    if (p.leaves_zero && out.threshold == 0) out.threshold = v;
    out.points.push_back(p);
  }
  return out;
}

}  // namespace verity
