// convert, audit, probe, preflight: thin wiring over engine/ (audit.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "measure/measure.h"
#include "cli/commands.h"
#include "engine/audit.h"

namespace verity::cli {
namespace {

std::string LastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

// The path of this very binary, so children are the same build.
std::string Self() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("verity");
}

int RunProbeCommand(const std::string& model_path, const std::string& tok_path, std::string probes_path, int every,
                    int count) {
  if (probes_path.empty()) probes_path = DefaultProbesPath(model_path);
  auto finish = [](int passed, int total, bool ok) {
    std::printf("probe: passed=%d/%d verdict=%s\n", passed, total, ok ? "PASS" : "FAIL");
    std::fflush(stdout);
    return ok ? 0 : 1;
  };
  auto probes = ReadProbes(probes_path);
  if (!probes.ok()) {
    std::fprintf(stderr, "verity: error: %s\n", probes.status().message().c_str());
    return finish(0, 0, false);
  }
  auto model = LoadModel(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "verity: error: %s\n", model.status().message().c_str());
    return finish(0, static_cast<int>(probes->size()), false);
  }
  auto tok = Tokenizer::Load(tok_path, (*model)->config.vocab_size);
  if (!tok.ok()) {
    std::fprintf(stderr, "verity: error: %s\n", tok.status().message().c_str());
    return finish(0, static_cast<int>(probes->size()), false);
  }
  for (int round = 1; round <= count; round++) {
    auto results = RunProbes(**model, tok.value(), probes.value());
    if (!results.ok()) {
      std::fprintf(stderr, "verity: error: %s\n", results.status().message().c_str());
      return finish(0, static_cast<int>(probes->size()), false);
    }
    int passed = 0;
    for (const auto& r : results.value()) {
      passed += r.pass;
      std::printf("%s %s -> expected \"%s\", got \"%.60s\"\n", r.pass ? "PASS" : "FAIL", r.probe.prompt.c_str(),
                  r.probe.expect.c_str(), r.got.c_str());
    }
    const bool ok = passed == static_cast<int>(results->size());
    if (!ok) {
      // Alert, never restart: a restart reproduces a wrong conversion exactly.
      std::fprintf(stderr, "verity: ALERT: coherence probe failed (%d/%zu passed) on %s at round %d\n", passed,
                   results->size(), model_path.c_str(), round);
      return finish(passed, static_cast<int>(results->size()), false);
    }
    if (round == count) return finish(passed, static_cast<int>(results->size()), true);
    std::printf("probe: round %d/%d passed=%d/%zu\n", round, count, passed, results->size());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(every));
  }
  return finish(0, 0, false);
}

}  // namespace

void RegisterCheckpointCommands(CLI::App& app, Registry& reg) {
  {
    auto* sub = app.add_subcommand("convert", "Write a llama2.c checkpoint as a Hugging Face directory (q/k rows "
                                              "permuted into the rotate-half layout).");
    auto model = std::make_shared<std::string>(), out = std::make_shared<std::string>(),
         dtype = std::make_shared<std::string>("f32");
    auto shards = std::make_shared<int>(1);
    sub->add_option("--model", *model, "llama2.c checkpoint (.bin)")->required();
    sub->add_option("--out", *out, "output directory")->required();
    sub->add_option("--shards", *shards, "number of safetensors shards")->capture_default_str();
    sub->add_option("--dtype", *dtype, "f32 or bf16")->capture_default_str()->check(CLI::IsMember({"f32", "bf16"}));
    reg.On(sub, [=] {
      auto m = LoadModel(*model);
      if (!m.ok()) return Fail(m.status());
      if ((*m)->config.rope_style != RopeStyle::kInterleaved)
        return Fail(Status::Error("--model " + *model + ": already a Hugging Face directory"));
      Status s = WriteHfCheckpoint(**m, *out, *shards, *dtype);
      if (!s.ok()) return Fail(s);
      std::printf("convert: wrote %s (%d shard%s, %s)\n", out->c_str(), *shards, *shards == 1 ? "" : "s", dtype->c_str());
      return 0;
    });
  }
  {
    auto* sub = app.add_subcommand("audit", "Map every tensor the config requires and every index entry to its shard "
                                            "and check it. Always ends with one summary line; exit 0 only on PASS.");
    auto dir = std::make_shared<std::string>();
    auto elsewhere = std::make_shared<bool>(false), json = std::make_shared<bool>(false);
    sub->add_option("DIR", *dir, "Hugging Face checkpoint directory")->required();
    sub->add_flag("--experts-elsewhere", *elsewhere, "routed-expert tensors may be supplied elsewhere (not fatal)");
    sub->add_flag("--json", *json, "print the findings as one JSON object before the summary line");
    reg.On(sub, [=] {
      AuditReport r = AuditCheckpoint(*dir, *elsewhere);
      if (*json) {
        nlohmann::json j = {{"findings", r.findings}, {"tensors", r.tensors}, {"shards_ok", r.shards_ok},
                            {"shards", r.shards_total}, {"missing", r.missing}, {"fatal", r.fatal},
                            {"verdict", r.pass ? "PASS" : "FAIL"}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        for (const auto& f : r.findings) std::printf("%s\n", f.c_str());
      }
      std::printf("%s\n", r.Summary().c_str());
      return r.pass ? 0 : 1;
    });
  }
  {
    auto* sub = app.add_subcommand("probe", "Ask known-answer prompts (greedy); ends with `probe: passed=K/N "
                                            "verdict=...`. With --every/--count, alerts on failure and never restarts.");
    auto model = std::make_shared<std::string>(), tok = std::make_shared<std::string>(), probes = std::make_shared<std::string>();
    auto every = std::make_shared<int>(60), count = std::make_shared<int>(1);
    sub->add_option("--model", *model, "checkpoint file or directory")->required();
    sub->add_option("--tokenizer", *tok, "llama2.c tokenizer.bin")->required();
    sub->add_option("--probes", *probes, "probes JSON (default: <model>.probes.json beside the model)");
    sub->add_option("--every", *every, "scheduled mode: seconds between rounds")->capture_default_str();
    sub->add_option("--count", *count, "scheduled mode: number of rounds")->capture_default_str();
    reg.On(sub, [=] {
      if (*every < 0 || *count < 1) return Fail(Status::Error("--every must be >= 0 and --count >= 1"));
      return RunProbeCommand(*model, *tok, *probes, *every, *count);
    });
  }
  {
    auto* sub = app.add_subcommand("preflight", "Run audit then probe as child processes; pass only when each exited 0 "
                                                "AND printed its summary line with PASS.");
    auto model = std::make_shared<std::string>(), tok = std::make_shared<std::string>(), probes = std::make_shared<std::string>(),
         audit_cmd = std::make_shared<std::string>(), probe_cmd = std::make_shared<std::string>();
    auto elsewhere = std::make_shared<bool>(false);
    sub->add_option("--model", *model, "Hugging Face checkpoint directory")->required();
    sub->add_option("--tokenizer", *tok, "llama2.c tokenizer.bin")->required();
    sub->add_option("--probes", *probes, "probes JSON (default: beside the model)");
    sub->add_flag("--experts-elsewhere", *elsewhere, "passed to the audit");
    sub->add_option("--audit-cmd", *audit_cmd, "override the audit command (to test this guard)")->group("");
    sub->add_option("--probe-cmd", *probe_cmd, "override the probe command (to test this guard)")->group("");
    reg.On(sub, [=] {
      const std::string self = measure::ShellQuote(Self());
      std::string a = audit_cmd->empty() ? self + " audit " + measure::ShellQuote(*model) + (*elsewhere ? " --experts-elsewhere" : "") : *audit_cmd;
      std::string p = probe_cmd->empty() ? self + " probe --model " + measure::ShellQuote(*model) + " --tokenizer " + measure::ShellQuote(*tok) +
                                               (probes->empty() ? "" : " --probes " + measure::ShellQuote(*probes))
                                         : *probe_cmd;
      struct Step {
        const char* name;
        std::string cmd, prefix;
      } steps[] = {{"audit", a, "audit: "}, {"probe", p, "probe: "}};
      bool all = true;
      std::string verdicts;
      for (const auto& s : steps) {
        measure::CommandOutput out = measure::RunCommand(s.cmd, 600);
        const std::string last = LastLine(out.out);
        const bool summary = last.rfind(s.prefix, 0) == 0;
        const bool pass = out.exit_code == 0 && summary && last.size() >= 13 && last.substr(last.size() - 13) == " verdict=PASS";
        std::printf("preflight: %s exited %d, summary: %s -> %s\n", s.name, out.exit_code,
                    summary ? last.c_str() : "(none printed)", pass ? "PASS" : "FAIL");
        if (!pass && !summary) std::printf("preflight: %s printed no summary line: no %s is not a clean %s\n", s.name, s.name, s.name);
        verdicts += std::string(" ") + s.name + "=" + (pass ? "PASS" : "FAIL");
        all = all && pass;
      }
      std::printf("preflight:%s verdict=%s\n", verdicts.c_str(), all ? "PASS" : "FAIL");
      return all ? 0 : 1;
    });
  }
}

}  // namespace verity::cli
