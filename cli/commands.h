// Subcommand registration. A subcommand's callback stores its exit code in the
// registry; main returns it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/tp_forward.h"
#include "formats/tokenizer.h"

namespace verity::cli {

class Registry {
 public:
  // Runs `fn` when `sub` was chosen on the command line.
  void On(CLI::App* sub, std::function<int()> fn) {
    sub->callback([this, fn] { code_ = fn(); });
  }
  int Run() const { return code_; }

 private:
  int code_ = 0;
};

// --ctx's help, the same on every command that runs a model.
inline constexpr const char* kCtxHelp =
    "context: positions the KV cache holds, at most the model's max_position_embeddings (default: "
    "min(max_position_embeddings, 4096) for Hugging Face and GGUF models, seq_len for llama2.c files)";

// Prints "verity: error: <message>" on stderr and returns exit code 1.
int Fail(const Status& s);
// One JSON object as one line. Recorded command output may hold any bytes:
// invalid UTF-8 is printed as U+FFFD rather than aborting the program.
std::string JsonLine(const nlohmann::json& j);

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
int WithDecoder(const TpFlags& flags, const std::string& model_path, const std::string& kernels_name, kernels::DType dtype,
                int ctx, const std::function<int(Decoder&, const Model&)>& body);

void RegisterEngineCommands(CLI::App& app, Registry& reg);
// bench (cli/bench_command.cc) and roofline (cli/roofline_command.cc).
void RegisterBenchCommand(CLI::App& app, Registry& reg);
void RegisterRooflineCommand(CLI::App& app, Registry& reg);
void RegisterGbenchCommand(CLI::App& app, Registry& reg);
void RegisterAdaptCommand(CLI::App& app, Registry& reg);
// parity-tokens and parity-logits (cli/external_parity_command.cc).
void RegisterExternalParityCommands(CLI::App& app, Registry& reg);
void RegisterLedgerCommands(CLI::App& app, Registry& reg);
// show, frontier, history: printers over the ledger's read model.
void RegisterQueryCommands(CLI::App& app, Registry& reg);
// `ledger verify` (read-only, --expect-tip) and `ledger migrate`.
void RegisterLedgerAdminCommands(CLI::App& app, Registry& reg);
void RegisterParityCommand(CLI::App& app, Registry& reg);
void RegisterReportCommand(CLI::App& app, Registry& reg);
void RegisterCheckpointCommands(CLI::App& app, Registry& reg);
// tokenize (cli/tokenize_command.cc): any tokenizer file, encode or --decode.
void RegisterTokenizeCommand(CLI::App& app, Registry& reg);
// verity serve (serve/: the OpenAI-compatible server) and verity loadgen (its load generator).
void RegisterServeCommand(CLI::App& app, Registry& reg);
void RegisterLoadgenCommand(CLI::App& app, Registry& reg);

}  // namespace verity::cli
