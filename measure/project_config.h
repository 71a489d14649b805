// A judged repository's project config (verity.toml, or --config FILE for a
// repository you cannot commit to): how to build a checked-out ref, the
// artifact that identifies the build, named workloads (a bench command
// template, its metric and guards, and the defaults of its variables), and
// the parity evidence to require. TOML, read with toml++. Every key is
// checked and named in its error; a key this file does not define is an
// error, not ignored. docs/config.md is the reference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::measure {

struct WorkloadConfig {
  std::string name;
  std::string bench;                // command template (ExpandTemplate), run in the repository's checkout
  std::string metric;               // the record's metric the ledger scores
  std::vector<std::string> guards;  // metrics every record of this workload must carry (the ledger guards them)
  // The variables' defaults, as the file gives them ("" / 0: not given).
  std::string model;  // relative to the repository unless absolute
  std::string dtype;
  int steps = 0, threads = 0;
  double min_seconds = 0.0;
};

struct ParityConfig {
  // "verity": the artifact is a verity binary, and `command` prints a
  //   verity.parity/1 record (top-1 and KL at depths against a reference).
  // "tokens": `command` prints the engine's greedy output; it must equal the
  //   base's (or `golden`) byte for byte (`verity parity-tokens`).
  // "logits": `command` writes raw f32 logits for the ids in `tokens` to
  //   {logits_out}; scored against the base's (or `reference`) as verity
  //   parity scores (`verity parity-logits`).
  std::string kind;
  std::string command;          // template
  std::string against_command;  // verity: template used when reference logits apply ({against}); "" = none
  std::string golden;           // tokens: the pinned output, relative to the config file; "" = the base's output
  std::string tokens;           // logits: the teacher-forced ids file, relative to the config file
  int vocab_size = 0;           // logits: floats per row
  std::string reference;        // logits: the reference logits file, relative to the config file; "" = the base's
};

struct ProjectConfig {
  std::string source;                       // the file, for messages
  std::vector<std::string> build_commands;  // run in order in the worktree (sh -c), output to build.log
  int build_timeout_s = 0;                  // all of them together; 0 = VERITY_COMMAND_TIMEOUT's
  std::string artifact;                     // path inside the worktree the build must produce
  std::vector<WorkloadConfig> workloads;    // sorted by name
  std::string default_workload;             // the one used without --workload
  std::optional<ParityConfig> parity;

  // The workload `name` ("" = the default); an error lists the known ones.
  [[nodiscard]] Result<const WorkloadConfig*> Workload(const std::string& name) const;
};

// The template variables a command may use, each once known ({artifact},
// {worktree}, {model}, {dtype}, {steps}, {threads}, {min_seconds}, {verity},
// {config_dir}; {against} in parity.against_command; {tokens} and
// {logits_out} in a logits kind's parity.command). Values are inserted as
// given, so callers shell-quote paths.
const std::vector<std::string>& TemplateVariables();

// `tmpl` with each {name} replaced by vars[name]; "{{" and "}}" are literal
// braces. An unknown or missing name, or an unmatched brace, is an error
// naming `what` and the name.
[[nodiscard]] Result<std::string> ExpandTemplate(const std::string& tmpl,
                                                 const std::map<std::string, std::string>& vars,
                                                 const std::string& what);

// Parses and checks a config; `source` names it in errors.
[[nodiscard]] Result<ProjectConfig> ParseProjectConfig(const std::string& text, const std::string& source);
// Reads `path` and parses it.
[[nodiscard]] Result<ProjectConfig> LoadProjectConfig(const std::string& path);

}  // namespace verity::measure
