// The engine's subcommands (verity_cli_engine): generate, logits, synth,
// bench, roofline, convert, audit, probe, preflight, parity, parity-tokens,
// parity-logits, sweep, tokenize, serve, loadgen; and what they share (the
// tokenizer for a model, the tensor-parallel flags, a decoder's set-up).
// Nothing here may use the ledger (cli/CMakeLists.txt refuses the link).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "cli/registry.h"
#include "engine/engine.h"
#include "engine/tp_forward.h"
#include "formats/tokenizer.h"
#include "measure/roofline.h"

namespace verity::cli {

// --ctx's help, the same on every command that runs a model.
inline constexpr const char* kCtxHelp =
    "context: positions the KV cache holds, at most the model's max_position_embeddings (default: "
    "min(max_position_embeddings, 4096) for Hugging Face and GGUF models, seq_len for llama2.c files)";

// The tokenizer for `model` (generate's and serve's): a llama2.c one must
// match its vocabulary exactly; any other may be smaller (checkpoints pad
// their embedding tables). Errors name the file.
Result<std::unique_ptr<TextTokenizer>> LoadModelTokenizer(const std::string& path, const Model& model);

// --tp N and --tp-backend inproc|mpi|nccl (cli/tp_flags.cc).
struct TpFlags {
  int tp = 1;
  std::string backend;  // empty until ResolveTp: --tp-backend was not given
  // Returns true iff the command runs on tensor-parallel ranks.
  bool on() const { return tp > 1 || (!backend.empty() && backend != "inproc"); }
};
void AddTpFlags(CLI::App* sub, TpFlags* f);
// The flags with the backend settled for where this process runs: without
// --tp-backend, inproc, or mpi under an MPI launcher of more than one process
// (said on stderr); under such a launcher inproc and nccl are refused, as
// each process would run every rank itself (env::MpiLauncherWorld).
Result<TpFlags> ResolveTp(const TpFlags& f);
// The open collectives of a tensor-parallel run (made before weights load).
struct TpRun {
  std::unique_ptr<TpGroup> group;
};
Result<TpRun> OpenTp(const TpFlags& f, const std::string& kernels_name);
// Loads `model_path` and runs body on its decoder: a Transformer on
// `kernels_name`, or with --tp the leader of the ranks (MPI followers serve
// and print nothing: rank 0 alone prints). Returns body's exit code, or 1 when
// set-up or the collective guard fails.
// `ctx` sets the context (LoadModel; kModelContext: the format's default).
int WithDecoder(const TpFlags& flags, const std::string& model_path, const std::string& kernels_name,
                kernels::DType dtype, int ctx, const std::function<int(Decoder&, const Model&)>& body);

void RegisterEngineCommands(CLI::App& app, Registry& reg);
// bench (cli/bench_command.cc) and roofline (cli/roofline_command.cc).
void RegisterBenchCommand(CLI::App& app, Registry& reg);
// Device 0's roofline (HBM read bandwidth, bf16 tensor-core throughput) as
// a roofline record: what `roofline --backend cuda` measures (the command
// itself is the ledger's, cli/ledger/commands.h).
Result<measure::Roofline> MeasureCudaRooflineRecord(int buffer_mb, int repetitions, const std::string& fingerprint);
// parity-tokens and parity-logits (cli/external_parity_command.cc).
void RegisterExternalParityCommands(CLI::App& app, Registry& reg);
void RegisterParityCommand(CLI::App& app, Registry& reg);
void RegisterCheckpointCommands(CLI::App& app, Registry& reg);
// tokenize (cli/tokenize_command.cc): any tokenizer file, encode or --decode.
void RegisterTokenizeCommand(CLI::App& app, Registry& reg);
// verity serve (serve/: the OpenAI-compatible server) and verity loadgen (its load generator).
void RegisterServeCommand(CLI::App& app, Registry& reg);
void RegisterLoadgenCommand(CLI::App& app, Registry& reg);

// All of the above, in the order `--help` lists them.
inline void RegisterAllEngineCommands(CLI::App& app, Registry& reg) {
  RegisterEngineCommands(app, reg);
  RegisterBenchCommand(app, reg);
  RegisterCheckpointCommands(app, reg);
  RegisterTokenizeCommand(app, reg);
  RegisterParityCommand(app, reg);
  RegisterExternalParityCommands(app, reg);
  RegisterServeCommand(app, reg);
  RegisterLoadgenCommand(app, reg);
}

}  // namespace verity::cli
