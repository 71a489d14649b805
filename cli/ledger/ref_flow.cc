// The ref flow's commands, built from the judged repository's project config.
#include "cli/ledger/ref_flow.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "base/env.h"
#include "base/terminal.h"
#include "ledger/format.h"
#include "measure/measure.h"
#include "measure/project_config.h"

namespace verity::cli {
namespace {

namespace fs = std::filesystem;
using Progress = std::function<void(const std::string&)>;
using Vars = std::map<std::string, std::string>;

Progress StderrProgress(const char* indent) {
  return [indent](const std::string& line) { std::fprintf(stderr, "%s%s\n", indent, terminal::Visible(line).c_str()); };
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The repository's top level (the checkout submitted from).
Result<std::string> TopLevel(const std::string& repo) {
  auto top = measure::RunCommand("git -C " + measure::ShellQuote(repo) + " rev-parse --show-toplevel", 60);
  if (top.exit_code != 0) return Status::Error("--repo " + repo + ": not a git repository");
  return Trimmed(top.out);
}

// --config, else the checkout's own verity.toml: the config of the checkout
// you submit from, not of each ref, so both sides are built and measured alike.
Result<measure::ProjectConfig> LoadConfig(const RefOptions& o, const std::string& top) {
  std::string path = o.config;
  if (path.empty()) {
    path = top + "/verity.toml";
    if (!fs::is_regular_file(path))
      return Status::Error(top +
                           " has no verity.toml, which says how to build and measure its refs; write one or give "
                           "--config FILE (docs/config.md)");
  }
  return measure::LoadProjectConfig(path);
}

// The variables a template names: "{x}" outside "{{"/"}}".
std::set<std::string> Used(const std::string& tmpl) {
  std::set<std::string> used;
  for (size_t i = 0; i < tmpl.size(); i++) {
    if (tmpl[i] == '{' && i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      i++;
    } else if (tmpl[i] == '{') {
      const size_t end = tmpl.find('}', i);
      if (end == std::string::npos) break;
      used.insert(tmpl.substr(i + 1, end - i - 1));
      i = end;
    }
  }
  return used;
}

// Everything the flow knows about one submission, before any ref is built.
struct Plan {
  measure::ProjectConfig config;
  measure::WorkloadConfig workload;  // a copy: a Plan is copied into bisect's callback
  std::string top;                   // the repository checkout
  Vars common;                       // model, dtype, steps, threads, min_seconds (those given)
  std::string against;               // reference logits for parity, "" = none
  measure::BuildRecipe recipe;
  std::string verity;      // this verity, absolute: {verity}, and the external parity kinds' producer
  std::string config_dir;  // the config file's directory, absolute: {config_dir}
  // The external kinds' files (parity.golden, .tokens, .reference), absolute; "" = not given.
  std::string golden, tokens, reference;
};

// The pinned reference logits beside the model (X.ref-logits.bin for X.bin),
// or --against; "" when neither.
Result<std::string> ResolveAgainst(const RefOptions& o, const std::string& model) {
  if (!o.against.empty()) {
    if (!fs::is_regular_file(o.against)) return Status::Error("--against " + o.against + ": not a file");
    std::error_code ec;
    return fs::absolute(o.against, ec).string();
  }
  if (model.empty()) return std::string();
  const fs::path pinned = fs::path(model).replace_extension(".ref-logits.bin");
  return fs::is_regular_file(pinned) ? pinned.string() : std::string();
}

// A path the config gives (parity.golden, .tokens, .reference): relative to
// the config file, which may live outside the judged repository (--config);
// it must be a file.
Result<std::string> ConfigFile(const Plan& p, const std::string& key, const std::string& value) {
  if (value.empty()) return std::string();
  const fs::path path = fs::path(value).is_absolute() ? fs::path(value) : fs::path(p.config_dir) / value;
  if (!fs::is_regular_file(path))
    return Status::Error(p.config.source + ": " + key + " " + value + ": not a file (" + path.string() + ")");
  return path.lexically_normal().string();
}

Status ResolveParityFiles(Plan* p) {
  std::error_code ec;
  p->verity = fs::read_symlink("/proc/self/exe", ec).string();
  p->config_dir = fs::absolute(fs::path(p->config.source), ec).parent_path().lexically_normal().string();
  if (!p->config.parity) return OkStatus();
  const measure::ParityConfig& pc = *p->config.parity;
  VERITY_ASSIGN_OR_RETURN(p->golden, ConfigFile(*p, "parity.golden", pc.golden));
  VERITY_ASSIGN_OR_RETURN(p->tokens, ConfigFile(*p, "parity.tokens", pc.tokens));
  VERITY_ASSIGN_OR_RETURN(p->reference, ConfigFile(*p, "parity.reference", pc.reference));
  return OkStatus();
}

Result<Plan> MakePlan(const RefOptions& o) {
  Plan p;
  VERITY_ASSIGN_OR_RETURN(p.top, TopLevel(o.repo));
  VERITY_ASSIGN_OR_RETURN(p.config, LoadConfig(o, p.top));
  VERITY_ASSIGN_OR_RETURN(const measure::WorkloadConfig* chosen, p.config.Workload(o.workload));
  p.workload = *chosen;
  const measure::WorkloadConfig& w = p.workload;
  std::error_code ec;
  // A --model is where the submitter is; the config's is in the repository.
  std::string model = !o.model.empty()                  ? fs::absolute(o.model, ec).string()
                      : w.model.empty()                 ? std::string()
                      : fs::path(w.model).is_absolute() ? w.model
                                                        : (fs::path(p.top) / w.model).string();
  if (!model.empty()) {
    if (!fs::is_regular_file(model))
      return Status::Error(
          (o.model.empty() ? p.config.source + ": workload." + w.name + ".model " + w.model : "--model " + o.model) +
          ": not a file");
    p.common["model"] = measure::ShellQuote(model);
  }
  const std::string dtype = !o.dtype.empty() ? o.dtype : w.dtype;
  if (!dtype.empty()) p.common["dtype"] = measure::ShellQuote(dtype);
  const int steps = o.steps > 0 ? o.steps : w.steps;
  if (steps > 0) p.common["steps"] = std::to_string(steps);
  if (w.threads > 0) p.common["threads"] = std::to_string(w.threads);
  const double min_s = o.min_seconds > 0 ? o.min_seconds : w.min_seconds;
  if (min_s > 0) p.common["min_seconds"] = ledger::NumText(min_s, 6);  // %g
  VERITY_ASSIGN_OR_RETURN(p.against, ResolveAgainst(o, model));
  p.recipe.commands = p.config.build_commands;
  p.recipe.timeout_s = p.config.build_timeout_s > 0 ? p.config.build_timeout_s : env::CommandTimeoutSeconds();
  p.recipe.artifact = p.config.artifact;
  p.recipe.verity_binary = p.config.parity && p.config.parity->kind == "verity";
  VERITY_RETURN_IF_ERROR(ResolveParityFiles(&p));
  return p;
}

// `tmpl` for a built ref; a variable it uses that nothing gives is named,
// with the flag or key that would give it.
Result<std::string> Command(const Plan& p, const measure::BuiltRef& b, const std::string& tmpl, const std::string& what,
                            const Vars& extra = {}) {
  Vars v = p.common;
  v.insert(extra.begin(), extra.end());
  v["artifact"] = measure::ShellQuote(b.binary);
  v["worktree"] = measure::ShellQuote(b.worktree);
  v["verity"] = measure::ShellQuote(p.verity);
  v["config_dir"] = measure::ShellQuote(p.config_dir);
  static const std::map<std::string, std::string> source = {{"model", "--model or model"},
                                                            {"dtype", "--dtype or dtype"},
                                                            {"steps", "--steps or steps"},
                                                            {"threads", "threads"},
                                                            {"min_seconds", "--min-seconds or min_seconds"}};
  for (const std::string& name : Used(tmpl))
    if (!v.count(name) && source.count(name))
      return Status::Error(p.config.source + ": " + what + " uses {" + name + "}, but nothing gives it (" +
                           source.at(name) + " in [workload." + p.workload.name + "])");
  VERITY_ASSIGN_OR_RETURN(std::string cmd, measure::ExpandTemplate(tmpl, v, p.config.source + ": " + what));
  // In the checkout, wherever verity was started: a template may name the repository's own scripts.
  return "cd " + measure::ShellQuote(p.top) + " && " + cmd;
}

Result<std::string> BenchCmdFor(const Plan& p, const measure::BuiltRef& b) {
  return Command(p, b, p.workload.bench, "workload." + p.workload.name + ".bench");
}

// The engine's own command for one side of an external kind, as one shell word.
Result<std::string> EngineCommand(const Plan& p, const measure::BuiltRef& b) {
  Vars extra;
  if (p.config.parity->kind == "logits") {
    extra["tokens"] = measure::ShellQuote(p.tokens);
    extra["logits_out"] = "\"$VERITY_LOGITS_OUT\"";  // set by verity parity-logits for each run
  }
  VERITY_ASSIGN_OR_RETURN(std::string cmd, Command(p, b, p.config.parity->command, "parity.command", extra));
  return measure::ShellQuote(cmd);
}

// Kinds "tokens" and "logits": `verity parity-tokens|parity-logits` runs the
// head's engine command and the base's (or reads the pinned file) and prints
// a verity.parity/1 record naming the head's artifact, so the ledger binds it
// to the bench of that artifact. `base` is null where no base exists (bisect).
Result<std::string> ExternalParityCmd(const Plan& p, const RefOptions& o, const measure::BuiltRef& head,
                                      const measure::BuiltRef* base) {
  const measure::ParityConfig& pc = *p.config.parity;
  if (!o.against.empty())
    return Status::Error("--against " + o.against + " goes with parity kind verity; kind " + pc.kind + " takes " +
                         (pc.kind == "logits" ? "parity.reference" : "parity.golden") + " in " + p.config.source);
  const bool logits = pc.kind == "logits";
  const std::string pinned = logits ? p.reference : p.golden;
  if (pinned.empty() && base == nullptr)
    return Status::Error(p.config.source + ": parity kind " + pc.kind +
                         " compares with the base's output, and here "
                         "there is no base; pin one with parity." +
                         (logits ? "reference" : "golden"));
  VERITY_ASSIGN_OR_RETURN(std::string head_cmd, EngineCommand(p, head));
  std::string cmd = measure::ShellQuote(p.verity) + (logits ? " parity-logits" : " parity-tokens") + " --artifact " +
                    measure::ShellQuote(head.binary) + " --build-id " + measure::ShellQuote(head.sha) + " --command " +
                    head_cmd;
  if (logits) cmd += " --tokens " + measure::ShellQuote(p.tokens) + " --vocab " + std::to_string(pc.vocab_size);
  if (!pinned.empty()) return cmd + (logits ? " --reference " : " --golden ") + measure::ShellQuote(pinned);
  VERITY_ASSIGN_OR_RETURN(std::string base_cmd, EngineCommand(p, *base));
  return cmd + " --base-command " + base_cmd;
}

// The head's parity command ("" when the config asks for none, or a verity
// build has no `verity parity`): against the independent reference's logits
// when they apply and the build reads them, else the build's own check; for
// the external kinds, verity's comparison of the engine's own output.
Result<std::string> ParityCmdFor(const Plan& p, const RefOptions& o, const measure::BuiltRef& b,
                                 const measure::BuiltRef* base, const Progress& progress) {
  if (!p.config.parity) return std::string();
  const measure::ParityConfig& pc = *p.config.parity;
  if (pc.kind != "verity") return ExternalParityCmd(p, o, b, base);
  if (p.recipe.verity_binary && !b.has_parity) return std::string();
  if (!p.against.empty() && !pc.against_command.empty() && (!p.recipe.verity_binary || b.has_parity_against)) {
    progress("parity: " + b.ref + " against the independent reference's logits in " + p.against);
    return Command(p, b, pc.against_command, "parity.against_command", {{"against", measure::ShellQuote(p.against)}});
  }
  if (!p.against.empty() && !o.against.empty())
    return Status::Error(
        "--against " + o.against + ": the build of " + b.ref + " cannot read reference logits (" +
        (pc.against_command.empty() ? "verity.toml has no parity.against_command" : "no `parity --against`") + ")");
  if (!p.against.empty() && !pc.against_command.empty())
    progress("parity: the build of " + b.ref +
             " predates reference logits files in `parity --against`; it is compared "
             "with its own reference path (the pinned " +
             p.against + " is not used)");
  return Command(p, b, pc.command, "parity.command");
}

}  // namespace

void AddRefFlowOptions(CLI::App* sub, RefOptions& refs) {
  sub->add_option("--config", refs.config,
                  "with refs: the project config (default: the repository's verity.toml; docs/config.md)");
  sub->add_option("--workload", refs.workload,
                  "with refs: the config's workload to run (default: its default_workload)");
  sub->add_option("--model", refs.model, "with refs: the model file (default: the workload's)");
  sub->add_option("--repo", refs.repo, "with refs: the git repository")->capture_default_str();
  sub->add_option("--steps", refs.steps, "with refs: {steps} (default: the workload's)")->check(CLI::Range(1, 1000000));
  sub->add_option("--min-seconds", refs.min_seconds,
                  "with refs: {min_seconds}, e.g. `verity bench --min-seconds` (longer samples average out more of a "
                  "shared box's noise; default: the workload's)")
      ->check(CLI::Range(0.01, 600.0));
  sub->add_option("--dtype", refs.dtype,
                  "with refs: {dtype}, the weights' dtype both sides bench and parity run in "
                  "(default: the workload's)")
      ->check(CLI::IsMember({"f32", "bf16", "q8_0"}));
  sub->add_option("--against", refs.against,
                  "with refs: parity against these reference logits (default: MODEL's .ref-logits.bin beside it, when "
                  "the build can read it)");
}

std::vector<std::string> RefOnlyFlagsGiven(CLI::App* sub) {
  std::vector<std::string> given;
  for (const char* flag :
       {"--config", "--workload", "--model", "--steps", "--dtype", "--min-seconds", "--repo", "--against"})
    if (const CLI::Option* opt = sub->get_option_no_throw(flag); opt && opt->count() > 0) given.push_back(flag);
  return given;
}

namespace {
// The workload's metric unless --metric named it; another is refused.
Status TakeMetric(const Plan& p, bool metric_given, std::string* metric) {
  if (metric_given && *metric != p.workload.metric)
    return Status::Error("--metric " + *metric + ": workload '" + p.workload.name + "' measures " + p.workload.metric +
                         " (" + p.config.source + ")");
  *metric = p.workload.metric;
  return OkStatus();
}
}  // namespace

Status PrepareRefs(const RefOptions& o, bool metric_given, ledger::ChangeRequest* r) {
  const bool by_ref = !o.base.empty() || !o.head.empty();
  if (!by_ref) {
    if (r->base_cmd.empty() || r->head_cmd.empty() || r->parity_cmd.empty())
      return Status::Error(
          "submit needs --base-cmd, --head-cmd and --parity-cmd, or --base REF --head REF (built and "
          "measured as the repository's verity.toml says)");
    // What only the ref flow builds into the commands would be ignored here.
    if (!o.given.empty())
      return Status::Error(o.given.front() +
                           " goes with --base/--head refs; with --base-cmd/--head-cmd, put it in "
                           "those commands");
    return OkStatus();
  }
  if (o.base.empty() || o.head.empty()) return Status::Error("--base and --head go together");
  if (!r->base_cmd.empty() || !r->head_cmd.empty())
    return Status::Error("--base/--head refs and --base-cmd/--head-cmd are alternatives; give one pair");
  VERITY_ASSIGN_OR_RETURN(Plan p, MakePlan(o));
  VERITY_RETURN_IF_ERROR(TakeMetric(p, metric_given, &r->metric));
  if (r->claim_bit_identical && p.config.parity && p.config.parity->kind != "verity")
    return Status::Error("--claim-bit-identical compares verity's logit rows (parity kind verity); parity kind " +
                         p.config.parity->kind + " in " + p.config.source + " is judged on its own evidence");
  const Progress progress = StderrProgress("");
  progress("config: " + p.config.source + ", workload " + p.workload.name);
  const std::string cache = env::WorktreeCache(p.top);
  VERITY_ASSIGN_OR_RETURN(measure::BuiltRef base, measure::BuildRef(p.top, o.base, cache, p.recipe, progress));
  VERITY_ASSIGN_OR_RETURN(measure::BuiltRef head, measure::BuildRef(p.top, o.head, cache, p.recipe, progress));
  VERITY_ASSIGN_OR_RETURN(r->base_cmd, BenchCmdFor(p, base));
  VERITY_ASSIGN_OR_RETURN(r->head_cmd, BenchCmdFor(p, head));
  if (r->parity_cmd.empty()) {
    VERITY_ASSIGN_OR_RETURN(r->parity_cmd, ParityCmdFor(p, o, head, &base, progress));
  }
  // Bit identity is proved by the base's own check beside the head's.
  if (r->claim_bit_identical && r->base_parity_cmd.empty() && p.config.parity &&
      (!p.recipe.verity_binary || base.has_parity)) {
    VERITY_ASSIGN_OR_RETURN(r->base_parity_cmd, Command(p, base, p.config.parity->command, "parity.command"));
  }
  r->required_guards = p.workload.guards;
  r->base_ref = o.base;
  r->head_ref = o.head;
  r->base_sha = base.sha;
  r->head_sha = head.sha;
  return OkStatus();
}

Result<ledger::BisectRequest> PrepareBisect(const RefOptions& o, bool metric_given, ledger::BisectRequest req) {
  VERITY_ASSIGN_OR_RETURN(Plan p, MakePlan(o));
  VERITY_RETURN_IF_ERROR(TakeMetric(p, metric_given, &req.metric));
  req.repo = p.top;
  req.recipe = p.recipe;
  // What every commit's bench ran, recorded with the session.
  measure::BuiltRef placeholder;
  placeholder.binary = "ARTIFACT", placeholder.worktree = "WORKTREE";
  VERITY_ASSIGN_OR_RETURN(const std::string bench, BenchCmdFor(p, placeholder));
  req.bench_args = "workload " + p.workload.name + ": " + bench;
  req.commands = [p, o](const measure::BuiltRef& b) -> Result<ledger::CommitCommands> {
    ledger::CommitCommands c;
    VERITY_ASSIGN_OR_RETURN(c.bench_cmd, BenchCmdFor(p, b));
    VERITY_ASSIGN_OR_RETURN(c.parity_cmd, ParityCmdFor(p, o, b, nullptr, StderrProgress("  ")));
    if (c.parity_cmd.empty())
      c.note = p.config.parity ? "the build has no `verity parity`, so it cannot pass the correctness gate"
                               : "verity.toml asks for no parity evidence, so no commit can pass the correctness gate";
    return c;
  };
  return req;
}

}  // namespace verity::cli
