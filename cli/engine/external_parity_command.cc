// verity parity-tokens / parity-logits: parity evidence for an engine that is
// not verity (docs/config.md, parity kinds "tokens" and "logits"). Each runs
// the engine's own command for the head (and the base, unless a pinned file
// stands for it), compares what it printed or wrote (verify/external_parity.h)
// and prints one verity.parity/1 record naming the artifact it covers, so
// the ledger binds the evidence to the build that was benchmarked. The ledger
// judges the record against its policy's floor for the kind.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/env.h"
#include "base/sha256.h"
#include "cli/engine/commands.h"
#include "measure/measure.h"
#include "protocol/parity_record.h"
#include "verify/external_parity.h"

namespace verity::cli {
namespace {

struct ExternalOptions {
  std::string artifact, build_id, command, base_command;
  std::string golden;     // tokens: the pinned output
  std::string reference;  // logits: the reference file
  std::string tokens;     // logits: the teacher-forced ids
  int vocab = 0;
};

// Runs an engine command; its exit status must be 0. `env` names the logits file for the logits kind.
Result<std::string> RunEngine(const std::string& cmd, const std::string& what,
                              const std::map<std::string, std::string>& env = {}) {
  measure::CommandOutput out = measure::RunCommand(cmd, env::CommandTimeoutSeconds(), env);
  if (out.timed_out) return Status::Error(what + " timed out: " + cmd);
  if (out.exit_code != 0)
    return Status::Error(what + " exited " + std::to_string(out.exit_code) + ": " + measure::OutputTail(out.err, 400));
  return out.out;
}

Result<std::string> ReadWhole(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(what + " " + path + ": cannot read it");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The build the evidence covers: the id given and the artifact's sha256 (as `verity adapt` states it).
Result<protocol::BuildIdentity> BuildOf(const ExternalOptions& o) {
  auto sha = Sha256File(o.artifact);
  if (!sha.ok()) return Status::Error("--artifact " + o.artifact + ": " + sha.status().message());
  return protocol::BuildIdentity{o.build_id, *sha};
}

Status OneAgainst(const ExternalOptions& o, const std::string& file_flag, const std::string& file) {
  if (o.base_command.empty() == file.empty())
    return Status::Error("give exactly one of --base-command and " + file_flag + " (what the head is compared with)");
  return OkStatus();
}

int Print(const nlohmann::json& j, bool ok, const std::string& summary) {
  std::printf("%s\n", JsonLine(j).c_str());
  std::fprintf(stderr, "%s verdict=%s\n", summary.c_str(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int RunTokens(const ExternalOptions& o) {
  if (Status s = OneAgainst(o, "--golden", o.golden); !s.ok()) return Fail(s);
  auto build = BuildOf(o);
  if (!build.ok()) return Fail(build.status());
  auto head = RunEngine(o.command, "parity-tokens: the head's command");
  if (!head.ok()) return Fail(head.status());
  auto base = o.golden.empty() ? RunEngine(o.base_command, "parity-tokens: the base's command")
                               : ReadWhole(o.golden, "parity-tokens: --golden");
  if (!base.ok()) return Fail(base.status());
  const OutputIdentity id = CompareOutputs(*head, *base);
  protocol::ParityRecord rec;
  rec.kind = "tokens";
  rec.mode = env::ParityDeep() ? "deep" : "standard";
  rec.build_id = build->id, rec.artifact_sha256 = build->artifact_sha256;
  rec.ok = id.identical;
  auto& x = rec.identity;
  x.against = o.golden.empty() ? "base" : "golden";
  x.head_bytes = id.head_bytes, x.base_bytes = id.base_bytes, x.first_diff = id.first_diff;
  x.identical = id.identical;
  x.head_sha256 = Sha256Hex(*head), x.base_sha256 = Sha256Hex(*base);
  x.golden = o.golden;
  if (!id.identical) x.head_snippet = id.head_snippet, x.base_snippet = id.base_snippet;
  const nlohmann::json j = protocol::ToJson(rec);
  const std::string against = o.golden.empty() ? "the base's output" : o.golden;
  std::string summary = "parity-tokens: " + std::to_string(id.head_bytes) + " bytes against " + against + ": ";
  summary += id.identical ? "identical"
                          : "first differing byte at offset " + std::to_string(id.first_diff) + " (head '" +
                                id.head_snippet + "', base '" + id.base_snippet + "')";
  return Print(j, id.identical, summary);
}

// The engine writes its logits to a fresh file named by VERITY_LOGITS_OUT ({logits_out}).
Result<std::string> EngineLogits(const std::string& cmd, const std::string& what, const std::string& dir) {
  const std::string out = dir + "/" + what + ".f32";
  VERITY_RETURN_IF_ERROR(
      RunEngine(cmd, "parity-logits: the " + what + "'s command", {{"VERITY_LOGITS_OUT", out}}).status());
  return out;
}

// Runs the head's command (and the base's, unless --reference) into `dir` and scores the files.
Result<ParityReport> CompareEngineLogits(const ExternalOptions& o, const std::vector<int>& tokens,
                                         const std::string& dir) {
  VERITY_ASSIGN_OR_RETURN(const std::string head, EngineLogits(o.command, "head", dir));
  std::string ref = o.reference;
  if (ref.empty()) {
    VERITY_ASSIGN_OR_RETURN(ref, EngineLogits(o.base_command, "base", dir));
  }
  ParityOptions opt;
  opt.deep = env::ParityDeep();
  opt.backend = "logits file of " + o.build_id;
  VERITY_ASSIGN_OR_RETURN(ParityReport rep, CompareLogitsFiles(ref, head, tokens, o.vocab, opt));
  rep.reference = o.reference.empty() ? "the base's logits file" : o.reference;
  return rep;
}

int RunLogits(const ExternalOptions& o) {
  if (Status s = OneAgainst(o, "--reference", o.reference); !s.ok()) return Fail(s);
  if (o.vocab <= 0) return Fail(Status::Error("parity-logits: --vocab must be a positive number of logits per row"));
  auto build = BuildOf(o);
  if (!build.ok()) return Fail(build.status());
  auto tokens = ReadTokensFile(o.tokens);
  if (!tokens.ok()) return Fail(tokens.status());
  std::error_code ec;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("verity-logits-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir, ec);
  auto rep = CompareEngineLogits(o, *tokens, dir);
  std::filesystem::remove_all(dir, ec);
  if (!rep.ok()) return Fail(rep.status());
  protocol::ParityRecord rec = rep->Record();
  rec.kind = "logits";
  rec.build_id = build->id, rec.artifact_sha256 = build->artifact_sha256;
  if (!o.reference.empty()) {
    auto sha = Sha256File(o.reference);
    rec.extra["reference_path"] = o.reference;
    rec.extra["reference_sha256"] = sha.ok() ? *sha : "";
  }
  const nlohmann::json j = protocol::ToJson(rec);
  char b[160];
  std::snprintf(b, sizeof b, "parity-logits: %d tokens, %zu depths, worst_top1=%.4f worst_mean_kl=%.3g", rep->tokens,
                rep->depths.size(), rep->worst_top1, rep->worst_mean_kl);
  return Print(j, rep->ok, b);
}

void AddCommon(CLI::App* sub, ExternalOptions* o) {
  sub->add_option("--artifact", o->artifact, "the built engine the evidence covers (its sha256 binds it to the bench)")
      ->required();
  sub->add_option("--build-id", o->build_id, "the build's id, e.g. the commit it was built from")->required();
  sub->add_option("--command", o->command, "the head's engine command (run with sh -c)")->required();
  sub->add_option("--base-command", o->base_command, "the base's engine command, run the same way");
}

}  // namespace

void RegisterExternalParityCommands(CLI::App& app, Registry& reg) {
  auto* t = app.add_subcommand(
      "parity-tokens",
      "Token-identity parity for another engine: its greedy output (the command's stdout) must equal "
      "the base's, or --golden, byte for byte; prints a verity.parity/1 record (kind tokens) naming "
      "the first differing byte and both snippets. The ledger's policy sets the bytes it must cover.");
  auto to = std::make_shared<ExternalOptions>();
  AddCommon(t, to.get());
  t->add_option("--golden", to->golden, "a pinned output file the head's output must equal (instead of the base's)");
  reg.On(t, [=] { return RunTokens(*to); });

  auto* l = app.add_subcommand(
      "parity-logits",
      "Logits parity for another engine: the command writes raw little-endian f32 logits, one row of "
      "--vocab per id of --tokens (teacher-forced), to $VERITY_LOGITS_OUT; they are scored against "
      "the base's file or --reference as `verity parity` scores (top-1 and KL at >= 7 depths).");
  auto lo = std::make_shared<ExternalOptions>();
  AddCommon(l, lo.get());
  l->add_option("--tokens", lo->tokens, "the teacher-forced ids (whitespace-separated)")->required();
  l->add_option("--vocab", lo->vocab, "logits per row")->required();
  l->add_option("--reference", lo->reference,
                "reference logits: raw f32 of the same shape, or a verity.ref-logits/1 file of the same tokens");
  reg.On(l, [=] { return RunLogits(*lo); });
}

}  // namespace verity::cli
