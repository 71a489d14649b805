// convert, audit, probe, preflight: thin wiring over engine/ (audit.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "measure/measure.h"
#include "cli/engine/commands.h"
#include "verify/audit.h"
#include "formats/gguf.h"
#include "formats/quantize.h"

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

// A metadata value as JSON; arrays as their elements' values.
nlohmann::json GgufValueJson(const gguf::Value& v) {
  using T = gguf::ValueType;
  switch (v.type) {
    case T::kInt8:
    case T::kInt16:
    case T::kInt32:
    case T::kInt64: return v.i;
    case T::kUint8:
    case T::kUint16:
    case T::kUint32:
    case T::kUint64: return v.u;
    case T::kBool: return v.u != 0;
    case T::kFloat32:
    case T::kFloat64: return v.f;
    case T::kString: return v.s;
    case T::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v.items) a.push_back(GgufValueJson(e));
      return a;
    }
  }
  return nullptr;
}

int RunGgufInfo(const std::string& path, bool json) {
  Status st = CheckRegularFile(path, "GGUF file");
  if (!st.ok()) return Fail(st);
  auto file = MappedFile::Open(path);
  if (!file.ok()) return Fail(file.status());
  auto f = gguf::Parse((*file)->data(), (*file)->size(), path);
  if (!f.ok()) return Fail(f.status());
  if (json) {
    nlohmann::json meta = nlohmann::json::object(), tensors = nlohmann::json::array();
    for (const auto& [key, v] : f->metadata) {
      nlohmann::json e = {{"type", static_cast<uint32_t>(v.type)}, {"value", GgufValueJson(v)}};
      if (v.type == gguf::ValueType::kArray) e["subType"] = static_cast<uint32_t>(v.array_type);
      meta[key] = e;
    }
    for (const auto& t : f->tensors)
      tensors.push_back({{"name", t.name},
                         {"shape", t.dims},
                         {"type", t.type},
                         {"type_name", gguf::TensorTypeName(t.type)},
                         {"offset", t.offset}});
    nlohmann::json j = {{"version", f->version},
                        {"alignment", f->alignment},
                        {"data_start", f->data_start},
                        {"metadata", meta},
                        {"tensors", tensors}};
    std::printf("%s\n", JsonLine(j).c_str());
    return 0;
  }
  std::printf("%s: GGUF v%u, %zu keys, %zu tensors, alignment %u, data at %llu\n", path.c_str(), f->version,
              f->metadata.size(), f->tensors.size(), f->alignment, static_cast<unsigned long long>(f->data_start));
  for (const auto& [key, v] : f->metadata) {
    std::string shown = v.type == gguf::ValueType::kArray
                            ? "[" + std::to_string(v.items.size()) + " x " +
                                  gguf::ValueTypeName(static_cast<uint32_t>(v.array_type)) + "]"
                            : GgufValueJson(v).dump();
    std::printf("  %s: %s = %s\n", key.c_str(), gguf::ValueTypeName(static_cast<uint32_t>(v.type)).c_str(),
                shown.c_str());
  }
  for (const auto& t : f->tensors) {
    std::string dims;
    for (size_t i = 0; i < t.dims.size(); i++) dims += (i ? ", " : "") + std::to_string(t.dims[i]);
    std::printf("  tensor %s [%s] %s at +%llu (%llu bytes)\n", t.name.c_str(), dims.c_str(),
                gguf::TensorTypeName(t.type).c_str(), static_cast<unsigned long long>(t.offset),
                static_cast<unsigned long long>(t.bytes));
  }
  return 0;
}

// convert: a checkpoint written as a Hugging Face directory or a GGUF file.
void RegisterConvert(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("convert",
                                 "Write a checkpoint as a Hugging Face directory (--to hf: q/k rows "
                                 "permuted into the rotate-half layout) or a llama GGUF file (--to gguf).");
  auto model = std::make_shared<std::string>(), out = std::make_shared<std::string>(),
       dtype = std::make_shared<std::string>("f32"), to = std::make_shared<std::string>("hf"),
       tok = std::make_shared<std::string>();
  auto shards = std::make_shared<int>(1);
  sub->add_option("--model", *model, "checkpoint: llama2.c .bin (--to hf), or any model verity loads (--to gguf)")
      ->required();
  sub->add_option("--out", *out, "output directory (hf) or FILE.gguf")->required();
  sub->add_option("--to", *to, "hf or gguf")->capture_default_str()->check(CLI::IsMember({"hf", "gguf"}));
  sub->add_option("--shards", *shards, "hf: number of safetensors shards")->capture_default_str();
  sub->add_option("--dtype", *dtype,
                  "matrices: f32 or bf16 (hf); f32, f16, bf16, q8_0, or a llama.cpp block file type (gguf: " +
                      quants::FileTypeNames() + ")")
      ->capture_default_str();
  sub->add_option("--tokenizer", *tok, "gguf: llama2.c tokenizer.bin to store as tokenizer.ggml.* keys");
  reg.On(sub, [=] {
    if (*to == "gguf") {
      auto m = LoadModel(*model);
      if (!m.ok()) return Fail(m.status());
      Status s = WriteGgufCheckpoint(**m, *out, *dtype, *tok);
      if (!s.ok()) return Fail(s);
      std::printf("convert: wrote %s (GGUF v3, %s%s)\n", out->c_str(), dtype->c_str(),
                  tok->empty() ? "" : ", with tokenizer");
      return 0;
    }
    if (*dtype != "f32" && *dtype != "bf16")
      return Fail(Status::Error("--dtype " + *dtype + ": --to hf takes f32 or bf16"));
    if (!tok->empty()) return Fail(Status::Error("--tokenizer is for --to gguf"));
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

// gguf-info: a GGUF file's metadata and tensor infos.
void RegisterGgufInfo(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("gguf-info",
                                 "Print a GGUF file's metadata and tensor infos (after every check "
                                 "the reader makes); --json for one JSON object.");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  sub->add_option("FILE", *file, "GGUF file")->required();
  sub->add_flag("--json", *json,
                "one JSON object: version, alignment, data_start, metadata (type, subType, value), tensors");
  reg.On(sub, [=] { return RunGgufInfo(*file, *json); });
}

// audit: every tensor and index entry mapped to its shard and checked.
void RegisterAudit(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("audit",
                                 "Map every tensor the config requires and every index entry to its shard "
                                 "and check it. Always ends with one summary line; exit 0 only on PASS.");
  auto dir = std::make_shared<std::string>();
  auto elsewhere = std::make_shared<bool>(false), json = std::make_shared<bool>(false);
  sub->add_option("DIR", *dir, "Hugging Face checkpoint directory")->required();
  sub->add_flag("--experts-elsewhere", *elsewhere, "routed-expert tensors may be supplied elsewhere (not fatal)");
  sub->add_flag("--json", *json, "print the findings as one JSON object before the summary line");
  reg.On(sub, [=] {
    AuditReport r = AuditCheckpoint(*dir, *elsewhere);
    if (*json) {
      nlohmann::json j = {{"findings", r.findings},
                          {"tensors", r.tensors},
                          {"shards_ok", r.shards_ok},
                          {"shards", r.shards_total},
                          {"missing", r.missing},
                          {"fatal", r.fatal},
                          {"verdict", r.pass ? "PASS" : "FAIL"}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      for (const auto& f : r.findings) std::printf("%s\n", f.c_str());
    }
    std::printf("%s\n", r.Summary().c_str());
    return r.pass ? 0 : 1;
  });
}

// probe: known-answer prompts, once or on a schedule.
void RegisterProbe(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("probe",
                                 "Ask known-answer prompts (greedy); ends with `probe: passed=K/N "
                                 "verdict=...`. With --every/--count, alerts on failure and never restarts.");
  auto model = std::make_shared<std::string>(), tok = std::make_shared<std::string>(),
       probes = std::make_shared<std::string>();
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

// preflight: audit then probe as child processes, each judged by its exit and summary line.
void RegisterPreflight(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("preflight",
                                 "Run audit then probe as child processes; pass only when each exited 0 "
                                 "AND printed its summary line with PASS.");
  auto model = std::make_shared<std::string>(), tok = std::make_shared<std::string>(),
       probes = std::make_shared<std::string>(), audit_cmd = std::make_shared<std::string>(),
       probe_cmd = std::make_shared<std::string>();
  auto elsewhere = std::make_shared<bool>(false);
  sub->add_option("--model", *model, "Hugging Face checkpoint directory")->required();
  sub->add_option("--tokenizer", *tok, "llama2.c tokenizer.bin")->required();
  sub->add_option("--probes", *probes, "probes JSON (default: beside the model)");
  sub->add_flag("--experts-elsewhere", *elsewhere, "passed to the audit");
  sub->add_option("--audit-cmd", *audit_cmd, "override the audit command (to test this guard)")->group("");
  sub->add_option("--probe-cmd", *probe_cmd, "override the probe command (to test this guard)")->group("");
  reg.On(sub, [=] {
    const std::string self = measure::ShellQuote(Self());
    std::string a = audit_cmd->empty()
                        ? self + " audit " + measure::ShellQuote(*model) + (*elsewhere ? " --experts-elsewhere" : "")
                        : *audit_cmd;
    std::string p = probe_cmd->empty() ? self + " probe --model " + measure::ShellQuote(*model) + " --tokenizer " +
                                             measure::ShellQuote(*tok) +
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
      const bool pass =
          out.exit_code == 0 && summary && last.size() >= 13 && last.substr(last.size() - 13) == " verdict=PASS";
      std::printf("preflight: %s exited %d, summary: %s -> %s\n", s.name, out.exit_code,
                  summary ? last.c_str() : "(none printed)", pass ? "PASS" : "FAIL");
      if (!pass && !summary)
        std::printf("preflight: %s printed no summary line: no %s is not a clean %s\n", s.name, s.name, s.name);
      verdicts += std::string(" ") + s.name + "=" + (pass ? "PASS" : "FAIL");
      all = all && pass;
    }
    std::printf("preflight:%s verdict=%s\n", verdicts.c_str(), all ? "PASS" : "FAIL");
    return all ? 0 : 1;
  });
}

}  // namespace

void RegisterCheckpointCommands(CLI::App& app, Registry& reg) {
  RegisterConvert(app, reg);
  RegisterGgufInfo(app, reg);
  RegisterAudit(app, reg);
  RegisterProbe(app, reg);
  RegisterPreflight(app, reg);
}

}  // namespace verity::cli
