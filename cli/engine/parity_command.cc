// verity parity: thin wiring over verify/parity.h.
#include <cstdio>

#include "base/build_info.h"
#include "base/env.h"
#include "cli/engine/commands.h"
#include "protocol/parity_record.h"
#include "verify/parity.h"

namespace verity::cli {
namespace {

// The last line: a preflight reads its trailing " verdict=PASS|FAIL".
std::string Summary(const ParityReport& r) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "parity: worst_top1=%.4f worst_mean_kl=%.3g", r.worst_top1, r.worst_mean_kl);
  std::string s = buf;
  if (r.has_reference_file) {
    // The position that decides: the worst KL of the worst depth.
    const ParityDepth* worst = nullptr;
    for (const auto& d : r.depths)
      if (!worst || !(d.mean_kl <= worst->mean_kl)) worst = &d;
    if (worst) s += " worst_position=" + std::to_string(worst->worst_position);
  }
  if (r.max_abs_limit >= 0) {
    std::snprintf(buf, sizeof buf, " max_abs_diff=%.3g", r.max_abs_diff);
    s += buf;
  }
  if (!r.nonfinite.empty()) s += " nonfinite=" + std::to_string(r.nonfinite.size());
  return s + (r.ok ? " verdict=PASS" : " verdict=FAIL");
}

void PrintHuman(const std::string& model_path, const ParityReport& r) {
  std::printf("parity: %s, candidate %s (%s weights) vs %s (%s weights), %d tokens, mode %s, window %d\n",
              model_path.c_str(), r.candidate.c_str(), r.dtype.c_str(), r.reference.c_str(), r.reference_dtype.c_str(),
              r.tokens, r.mode.c_str(), r.window);
  // A text of one id repeated (a tied random model's greedy text) makes
  // every key alike: attention is then a plain average whatever q and k
  // are, so a bug there cannot show.
  if (r.distinct_tokens > 0 && r.distinct_tokens < 4)
    std::printf(
        "parity: note: the compared text holds only %d distinct token(s): attention over alike keys is "
        "blind to q and k, so bugs there cannot show here; give --tokens with varied ids\n",
        r.distinct_tokens);
  std::printf("%7s %9s %8s %11s %11s  %s\n", "depth", "positions", "top1", "mean_kl", "max_kl", "logits_sha256");
  for (const auto& d : r.depths)
    std::printf("%7d %9d %8.4f %11.3g %11.3g  %.16s\n", d.depth, d.positions, d.top1, d.mean_kl, d.max_kl,
                d.sha256.c_str());
  std::printf("logits_sha256 %s\nall_rows_sha256 %s\n", r.logits_sha256.c_str(), r.all_rows_sha256.c_str());
  for (const auto& where : r.nonfinite) std::printf("non-finite: %s\n", where.c_str());
  if (r.has_reference_file) {
    const auto& f = r.reference_file;
    std::printf("reference file: %s sha256 %s (%s; model %s sha256 %.16s)\n", f.path.c_str(), f.sha256.c_str(),
                f.generator.c_str(), f.model_path.c_str(), f.model_sha256.c_str());
    int bad = 0;
    for (const auto& p : r.per_position) {
      if (p.kl <= r.max_mean_kl && p.ref_top1 == p.cand_top1) continue;
      if (++bad <= 10)
        std::printf("position %d (depth %d): KL %.3g, top-1 candidate %d vs reference %d\n", p.position, p.depth, p.kl,
                    p.cand_top1, p.ref_top1);
    }
    if (bad > 10) std::printf("... %d more positions outside the thresholds\n", bad - 10);
    std::printf("positions: %zu scored, %d outside top-1 >= %g, KL <= %g\n", r.per_position.size(), bad, r.min_top1,
                r.max_mean_kl);
  }
  if (r.has_bit_identity)
    std::printf("bit identity: %s (%s)\n", r.bit_identical ? "PROVED" : "FAILED", r.bit_identity_detail.c_str());
  std::printf("%s\n", Summary(r).c_str());
}

// A tensor-parallel failure before a report exists still ends with the
// summary line a preflight or the corruption suite reads.
int FailTp(const Status& s, int tp) {
  Fail(s);
  std::printf("parity: tp=%d verdict=FAIL\n", tp);
  return 1;
}

// The weights each side runs on, from --dtype and --reference-dtype.
struct ParityWeights {
  kernels::DType dtype;  // the candidate's
  bool same_weights;     // the reference runs on the candidate's weights too
};

// The flags checked in the order their errors are reported (--backend,
// --depths, --tokens-file, --dtype, --reference-dtype), into `opt`.
Result<ParityWeights> ReadParityFlags(ParityOptions* opt, const std::string& depths, const std::string& tokens_file,
                                      const std::string& dtype_name, const std::string& reference_dtype) {
  if (opt->backend != "fast" && opt->backend != "reference" && opt->backend != "cuda")
    return Status::Error("--backend " + opt->backend + ": not available in this build (have: fast, reference, cuda)");
  opt->deep = env::ParityDeep();
  if (!depths.empty()) {
    auto d = ParseIntList(depths, "--depths", 1);
    if (!d.ok()) return d.status();
    opt->depths = d.value();
  }
  if (!tokens_file.empty()) {
    auto t = ReadTokensFile(tokens_file);
    if (!t.ok()) return t.status();
    opt->tokens = t.value();
  }
  auto dtype = kernels::DTypeFromName(dtype_name);
  if (!dtype.ok()) return Status::Error("--dtype: " + dtype.status().message());
  const bool same_weights = reference_dtype == "same";
  if (!same_weights && reference_dtype != "f32")
    return Status::Error("--reference-dtype " + reference_dtype + ": expected f32 or same");
  if (same_weights && opt->against != "reference")
    return Status::Error(
        "--reference-dtype same runs the reference backend on the candidate's weights; it "
        "cannot be combined with --against " +
        opt->against);
  return ParityWeights{*dtype, same_weights};
}

// The reference runs on the f32 weights (or with --reference-dtype same on
// the candidate's); the candidate on the --dtype ones.
struct ParityModels {
  Result<std::unique_ptr<Model>> model;  // the f32 weights
  std::unique_ptr<Model> converted;      // the --dtype ones, unless those are f32
  Status loaded;
  const Model& candidate() { return converted ? *converted : **model; }
};

ParityModels LoadParityModels(const std::string& model_path, kernels::DType dtype, int ctx) {
  auto model = LoadModel(model_path, kernels::DType::kF32, ctx);
  std::unique_ptr<Model> converted;
  Status loaded = model.ok() ? OkStatus() : model.status();
  if (loaded.ok() && dtype != kernels::DType::kF32) {
    auto m = LoadModel(model_path, dtype, ctx);
    if (m.ok()) converted = std::move(m).value();
    else loaded = m.status();
  }
  return ParityModels{std::move(model), std::move(converted), std::move(loaded)};
}

// On the leader of a tensor-parallel group, the candidate is the group
// (started into `decoder` when parity asks for it), against one rank of the
// same kernels, with the thresholds for sharding alone.
void UseTpCandidate(ParityOptions* opt, TpGroup* group, std::unique_ptr<TpDecoder>* decoder, const TpFlags& tp,
                    kernels::DType dtype) {
  opt->candidate = [group, decoder](const Model& m) -> Result<Decoder*> {
    VERITY_ASSIGN_OR_RETURN(*decoder, group->Start(m));
    return static_cast<Decoder*>(decoder->get());
  };
  opt->candidate_name = opt->backend + " tp=" + std::to_string(tp.tp) + " " + tp.backend;
  opt->reference_backend = opt->backend;
  const bool q8 = dtype == kernels::DType::kQ8_0 && opt->backend != "reference";
  opt->max_mean_kl = std::min(opt->max_mean_kl, q8 ? kTpQ8MaxMeanKl : kTpMaxMeanKl);
  opt->max_abs_diff = q8 ? kTpQ8MaxAbsDiff : kTpMaxAbsDiff;
}

// The report: a JSON record (its summary line on stderr) or the human table.
void PrintReport(const std::string& model_path, const ParityReport& r, bool json) {
  if (json) {
    protocol::ParityRecord rec = r.Record();
    // The binary that produced the evidence, exactly as `verity bench` names it.
    rec.build_id = BuildId(), rec.artifact_sha256 = ArtifactSha256();
    std::printf("%s\n", protocol::ToJson(rec).dump().c_str());
    std::fprintf(stderr, "%s\n", Summary(r).c_str());
  } else {
    PrintHuman(model_path, r);
  }
}

int RunParityCommand(const std::string& model_path, ParityOptions opt, const std::string& depths,
                     const std::string& tokens_file, const std::string& dtype_name, const std::string& reference_dtype,
                     bool json, const TpFlags& tp_flags, int ctx) {
  auto resolved = ResolveTp(tp_flags);
  if (!resolved.ok()) return FailTp(resolved.status(), tp_flags.tp);
  const TpFlags& tp = *resolved;
  auto weights = ReadParityFlags(&opt, depths, tokens_file, dtype_name, reference_dtype);
  if (!weights.ok()) return Fail(weights.status());
  // With --tp the collectives come first (before any weight loads), and the
  // reference is one rank on the same kernels and the same weights: only the
  // sharding differs (its thresholds leave no room for a dtype's rounding).
  std::unique_ptr<TpGroup> group;
  std::unique_ptr<TpDecoder> decoder;
  if (tp.on()) {
    auto run = OpenTp(tp, opt.backend);
    if (!run.ok()) return FailTp(run.status(), tp.tp);
    group = std::move(run->group);
  }
  ParityModels models = LoadParityModels(model_path, weights->dtype, ctx);
  if (group) {
    Status agreed = group->Agree(models.loaded);
    if (!agreed.ok()) return group->leader() ? FailTp(agreed, tp.tp) : 1;
    if (!group->leader()) return group->Serve(models.candidate()).ok() ? 0 : 1;
    UseTpCandidate(&opt, group.get(), &decoder, tp, weights->dtype);
  } else if (!models.loaded.ok()) {
    return Fail(models.loaded);
  }
  const Model& candidate = models.candidate();
  auto rep = RunParity(weights->same_weights || group ? candidate : **models.model, candidate, opt);
  if (!rep.ok()) return group ? FailTp(rep.status(), tp.tp) : Fail(rep.status());
  ParityReport& r = rep.value();
  if (decoder) {
    Status guard = decoder->Finish();
    if (!guard.ok()) {
      Fail(guard);
      r.ok = false;
    }
  }
  PrintReport(model_path, r, json);
  return r.ok ? 0 : 1;
}

int RunSweepCommand(const std::string& param, const std::string& values_text, const std::string& corruption,
                    const std::string& dir) {
  if (!corruption.empty() && corruption != CorruptionName())
    return Fail(Status::Error("--corruption " + corruption + ": this verity is built " +
                              (std::string(CorruptionName()).empty() ? std::string("without corruptions")
                                                                     : "with '" + std::string(CorruptionName()) + "'") +
                              "; configure with -DVERITY_CORRUPTION=" + corruption));
  auto values = ParseIntList(values_text, "--values", 1);
  if (!values.ok()) return Fail(values.status());
  auto r = RunSweep(param, values.value(), dir);
  if (!r.ok()) return Fail(r.status());
  std::printf("sweep: %s over %s%s (fast vs reference on synthetic models)\n", param.c_str(), values_text.c_str(),
              corruption.empty() ? "" : (" with corruption " + corruption).c_str());
  std::printf("%8s %14s %11s  %s\n", param.c_str(), "worst_mean_kl", "worst_top1", "");
  for (const auto& p : r->points)
    std::printf("%8d %14.3g %11.4f  %s\n", p.value, p.report.worst_mean_kl, p.report.worst_top1,
                p.value == r->threshold ? "<- leaves zero here" : "");
  if (r->threshold)
    std::printf("sweep: param=%s threshold=%d (first value with worst_mean_kl > %g or top-1 < 1) verdict=FAIL\n",
                param.c_str(), r->threshold, kSweepZeroKl);
  else std::printf("sweep: param=%s threshold=none values=%zu verdict=PASS\n", param.c_str(), r->points.size());
  return r->threshold ? 1 : 0;
}

}  // namespace

void RegisterParityCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "parity",
      "Compare a candidate path with the reference on identical weights and token ids; the worst depth "
      "decides (top-1 >= 0.95, mean KL <= 0.05). VERITY_PARITY_MODE=deep adds depths and windows "
      "(at least 14 depths, window 16).");
  auto model = std::make_shared<std::string>(), depths = std::make_shared<std::string>(),
       tokens = std::make_shared<std::string>();
  auto opt = std::make_shared<ParityOptions>();
  auto json = std::make_shared<bool>(false);
  auto dtype = std::make_shared<std::string>("f32");
  auto reference_dtype = std::make_shared<std::string>("f32");
  sub->add_option("--model", *model, "llama2.c .bin, GGUF file or Hugging Face directory")->required();
  sub->add_option("--backend", opt->backend,
                  "candidate kernels: fast | reference | cuda (with --tp: the ranks' kernels, against one rank on the "
                  "same kernels)")
      ->capture_default_str();
  sub->add_option("--against", opt->against,
                  "reference | FILE: a reference logits file (docs/parity.md; its tokens and model are checked; "
                  "f32 must reach top-1 = 1 and mean KL <= 1e-6) or raw f32 logits (e.g. from another build)")
      ->capture_default_str();
  sub->add_option("--depths", *depths,
                  "context depths, e.g. 1,64,512 (default: 7 spread over the context, the last at its end; "
                  "deep adds its 14)");
  sub->add_option("--window", opt->window, "positions scored per depth (default 8; deep max(2 x N, 16))");
  sub->add_option("--tokens", *tokens, "file of token ids (default: the reference's greedy text from BOS)");
  sub->add_option("--bit-identical-to", opt->bit_identical_to,
                  "raw f32 logits file the candidate must equal byte for byte");
  sub->add_option("--dump", opt->dump, "write the candidate's logits (raw f32, one row per token) to FILE");
  sub->add_option("--dtype", *dtype,
                  "candidate's weights: f32, bf16 or q8_0, converted at load (the reference keeps f32)")
      ->capture_default_str();
  sub->add_flag("--json", *json, "print the verity.parity/1 JSON object (summary line on stderr)");
  auto tp = std::make_shared<TpFlags>();
  AddTpFlags(sub, tp.get());
  auto ctx = std::make_shared<int>(kModelContext);
  sub->add_option("--ctx", *ctx, kCtxHelp);
  sub->add_option("--reference-dtype", *reference_dtype,
                  "f32 | same: the reference's weights; same runs it on the candidate's converted weights, so the "
                  "comparison judges the kernels alone, without the dtype's own rounding (docs/dtypes.md); with "
                  "--tp always same")
      ->capture_default_str();
  reg.On(sub,
         [=] { return RunParityCommand(*model, *opt, *depths, *tokens, *dtype, *reference_dtype, *json, *tp, *ctx); });

  auto* sw = app.add_subcommand("sweep",
                                "Run parity on synthetic models across one structural parameter and name "
                                "the first value where the metric leaves zero (exit 1 if any does).");
  auto param = std::make_shared<std::string>(), values = std::make_shared<std::string>(),
       corruption = std::make_shared<std::string>(), dir = std::make_shared<std::string>("/tmp/verity-sweep");
  sw->add_option("--param", *param, "layers | heads | kv_heads | context | experts (tp: not in this build)")
      ->required();
  sw->add_option("--values", *values, "comma-separated values, e.g. 1,2,3,4,5,6")->required();
  sw->add_option("--corruption", *corruption, "assert this binary carries this deliberate corruption");
  sw->add_option("--dir", *dir, "where the synthetic models are written")->capture_default_str();
  reg.On(sw, [=] { return RunSweepCommand(*param, *values, *corruption, *dir); });
}

}  // namespace verity::cli
