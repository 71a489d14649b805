// verity adapt --metric NAME=REGEX ... -- CMD [ARGS]: runs an engine's own
// benchmark command and prints what its text says as one verity.bench/1
// record (measure/text_adapter.h), so `verity submit` scores engines that
// print their speed as text, e.g. llama2.c's run (`achieved tok/s: ...`).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/sha256.h"
#include "cli/ledger/commands.h"
#include "measure/measure.h"
#include "measure/text_adapter.h"
#include "protocol/bench_record.h"

namespace verity::cli {
namespace {

struct AdaptOptions {
  std::vector<std::string> metrics;  // NAME=REGEX
  std::string from = "both";         // stdout | stderr | both
  std::string artifact, build_id, workload;
  std::vector<std::string> command;
};

// The command as a workload name that is the same in every clone: paths reduced to their file names.
std::string WorkloadOf(const std::vector<std::string>& command) {
  std::string w = "adapt";
  for (const auto& a : command) w += " " + std::filesystem::path(a).filename().string();
  return w;
}

int RunAdapt(const AdaptOptions& o) {
  std::vector<measure::TextMetric> metrics;
  for (const auto& spec : o.metrics) {
    auto m = measure::ParseTextMetric(spec);
    if (!m.ok()) return Fail(m.status());
    metrics.push_back(*m);
  }
  const std::string artifact = o.artifact.empty() ? measure::ResolveOnPath(o.command[0]) : o.artifact;
  auto sha = Sha256File(artifact);
  if (!sha.ok())
    return Fail(Status::Error("adapt: the artifact " + artifact +
                              " (--artifact, default the command's program): " + sha.status().message()));
  std::string cmd;
  for (size_t i = 0; i < o.command.size(); i++) cmd += (i ? " " : "") + measure::ShellQuote(o.command[i]);
  const std::string what = "adapt: " + o.command[0];
  measure::CommandOutput out = measure::RunCommand(cmd, env::CommandTimeoutSeconds());
  if (out.timed_out) return Fail(Status::Error(what + " timed out"));
  if (out.exit_code != 0)
    return Fail(Status::Error(what + " exited " + std::to_string(out.exit_code) + ": " +
                              out.err.substr(out.err.size() > 400 ? out.err.size() - 400 : 0)));
  const std::string text = o.from == "stdout" ? out.out : o.from == "stderr" ? out.err : out.out + "\n" + out.err;
  protocol::BenchRecord rec;
  for (const auto& m : metrics) {
    if (rec.metrics.count(m.name)) return Fail(Status::Error("adapt: --metric " + m.name + " is given twice"));
    auto v = measure::ExtractMetric(text, m, what + "'s " + (o.from == "both" ? "stdout and stderr" : o.from));
    if (!v.ok()) return Fail(v.status());
    rec.metrics[m.name] = *v;
  }
  rec.build = {o.build_id.empty() ? "adapt:" + std::filesystem::path(artifact).filename().string() : o.build_id, *sha};
  rec.workload = o.workload.empty() ? WorkloadOf(o.command) : o.workload;
  rec.extra["adapter"] = {{"kind", "regex"}, {"from", o.from}, {"artifact", artifact}};
  std::printf("%s\n", JsonLine(protocol::ToJson(rec)).c_str());
  return 0;
}

}  // namespace

void RegisterAdaptCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "adapt",
      "Run another engine's benchmark command (`verity adapt --metric NAME=REGEX ... -- CMD [ARGS]`) and "
      "print what its text says as one verity.bench/1 record: each REGEX's first group is NAME's value; the "
      "record's artifact is the sha256 of the program run (or --artifact).");
  auto o = std::make_shared<AdaptOptions>();
  sub->add_option("--metric", o->metrics,
                  "NAME=REGEX (ECMAScript): the metric and the expression whose first group is its number; it must "
                  "match exactly once; repeatable, e.g. decode_tok_s='achieved tok/s: ([0-9.]+)'")
      ->required()
      ->allow_extra_args(false);  // one value per --metric, so `--` ends the options
  sub->add_option("--from", o->from, "which output the expressions read")
      ->check(CLI::IsMember({"stdout", "stderr", "both"}))
      ->capture_default_str();
  sub->add_option("--artifact", o->artifact, "the file whose sha256 identifies the build (default: the program run)");
  sub->add_option("--build-id", o->build_id,
                  "the record's build.id (default: adapt:<artifact file name>), e.g. a commit");
  sub->add_option("--workload", o->workload,
                  "the record's workload (default: the command, paths reduced to file names)");
  sub->add_option("command", o->command, "the command and its arguments (after --)")->required();
  reg.On(sub, [=] { return RunAdapt(*o); });
}

}  // namespace verity::cli
