// Measurement: run a command with a timeout, parse the bench and parity
// protocols strictly, and fingerprint the box the numbers come from.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "protocol/bench_record.h"
#include "protocol/json_object.h"
#include "protocol/parity_record.h"

namespace verity::measure {

struct CommandOutput {
  int exit_code = -1;  // 128+signal when killed
  bool timed_out = false;
  std::string out, err;
  double seconds = 0.0;
  // Why the runner stopped the command other than by the timeout ("" = it did
  // not): its stdout or stderr passed kMaxCommandOutput (issue 41, finding 12).
  std::string stopped;
};

// `s` as one single-quoted shell word (safe inside sh -c command lines).
std::string ShellQuote(const std::string& s);

// The last `max_chars` of a command's output for an error message ("..." in
// front when cut), trailing newlines and spaces dropped.
inline std::string OutputTail(const std::string& s, size_t max_chars) { return protocol::Tail(s, max_chars); }

// The file `name` runs: itself when it has a '/', else the first regular file
// of that name on PATH (env::ExecutableSearchPath), else `name` unchanged.
std::string ResolveOnPath(const std::string& name);

// What RunCommand keeps of each of stdout and stderr: a command that prints
// more is stopped and says so (`yes` grew to 280 MB in 2 s).
inline constexpr size_t kMaxCommandOutput = size_t{16} << 20;

// Runs `command` through `sh -c` in its own process group; kills the group
// after `timeout_s` whether or not its pipes are still open (a command that
// closes them and keeps running is waited for only until the deadline), when
// either stream passes kMaxCommandOutput, and once the command has ended (so
// nothing it started outlives it). `env` entries are added to the child's environment.
CommandOutput RunCommand(const std::string& command, int timeout_s, const std::map<std::string, std::string>& env = {});

// One run of a bench command, per the verity.bench/1 protocol.
struct BenchSample {
  std::string build_id, artifact_sha256;
  double value = 0.0;                     // the requested metric
  std::map<std::string, double> metrics;  // every metric printed (each a positive finite number)
  // Weight and cache bytes one decoded token reads (`roofline.bytes_per_token`),
  // if the bench states it: with the box's measured bandwidth it bounds decode tok/s.
  std::optional<double> bytes_per_token;
  // What was measured, from the record's model (file name only: the same file
  // sits at other paths in other clones), dtype, threads, prompt_tokens and
  // gen_tokens: "stories260K.bin f32 1t pp256+tg256", with " cuda" after it for
  // a `--backend cuda` bench (a GPU's frontier is its own). "" when the record names
  // no model (a bench other than verity's). A record with a string
  // "workload" field (verity gbench) is taken at its word. Speeds of
  // different workloads are never compared.
  std::string workload;
  // "gbench" or "hyperfine" when the command printed that tool's raw JSON
  // report (measure/raw_report.h): its build is only a sha256 of the
  // executable or the command line, which no parity evidence can bind to.
  // "" for a verity.bench/1 record.
  std::string raw_format;
  // The record's "dtype" when it names a model (f32 when it names a model but
  // no dtype, as in WorkloadOf); "" for records that name no model. Parity
  // evidence must be of this dtype, or declared (submit --reference-dtype).
  std::string dtype;
  // The record's "backend" (`verity bench`: reference, fast or cuda); "" when
  // it names none. A cuda bench's physical ceiling is the device's roofline.
  std::string backend;
};

// The range every number a bench prints must lie in (protocol/bench_record.h).
using protocol::kMaxBenchValue;
using protocol::kMinBenchValue;

// Parses the whole stdout as one verity.bench/1 object holding `metric`, or
// as a raw Google Benchmark or hyperfine report printed by `command` (see
// measure/raw_report.h; `command` is its identity when nothing better is).
// `what` (e.g. "head bench command") starts every error message. A number
// outside [kMinBenchValue, kMaxBenchValue] is refused, naming it, and so is
// an object that states one key twice (which "ok" would count?).
Result<BenchSample> ParseBench(const CommandOutput& run, const std::string& metric, const std::string& what,
                               const std::string& command = "");

// One run of a parity command: its verity.parity/1 record (protocol/
// parity_record.h; `ok` is what the producer reported), and how it ran.
struct ParityEvidence : protocol::ParityRecord {
  int exit_code = 0;
  std::string raw;  // the JSON as printed: stdout, byte for byte
};

// Parses the whole stdout as one verity.parity/1 object. A parity command may
// exit 1 to say FAIL (its JSON is the evidence); it fails to parse when it
// timed out, crashed, printed nothing, or printed anything else. Whether the
// evidence passes is the caller's policy (exit code AND JSON AND thresholds
// AND an empty `nonfinite`). Structurally missing fields (depths, a depth's
// depth/top1/mean_kl, logits_sha256) are parse errors; so are malformed
// optional ones (build without string id/artifact_sha256, a mode other than
// standard/deep, a non-integer window/tokens/positions, an all_rows_sha256 that
// is not 64 hex). Absent optional fields stay empty/0 (unverified evidence).
// A null, NaN or infinite number (depth top1/mean_kl/max_kl, worst.*) is not
// an error: it is named in `nonfinite`, and worst_top1/worst_mean_kl become NaN.
// The producer's own "nonfinite" list of strings, when printed, is appended too.
Result<ParityEvidence> ParseParity(const CommandOutput& run, const std::string& what);

// The box: CPU model, its identity numbers, cache and instruction-set
// extensions, cores, kernel, governor, GPU and driver where present.
struct Box {
  std::string fingerprint;  // sha256 of `detail`
  std::string detail;       // canonical JSON
  // The physical machine: the fingerprint of `detail` without its "label"
  // (VERITY_BOX_LABEL names a box; it may not split one machine's
  // measurement lock, nor count one step again on the machine: issue 41,
  // finding 6). "" = the fingerprint (a Box made without it).
  std::string machine;
  const std::string& Machine() const { return machine.empty() ? fingerprint : machine; }
};
Box ThisBox();
// The machine fingerprint of a box's detail (see Box::machine); "" when the
// detail is not a JSON object.
std::string MachineFingerprint(const std::string& detail);
// The CPU part of a box's detail, from /proc/cpuinfo's text: "cpu" (the model
// name), "cpu_id" (vendor, family, model, stepping; Arm's implementer, part,
// variant), "cpu_cache" and "isa" (the SIMD extensions present, in a fixed
// order). Absent fields are left out.
nlohmann::json CpuIdentity(const std::string& cpuinfo);

}  // namespace verity::measure

namespace verity::measure {

// How a checked-out ref is built: the project config's [build] table
// (measure/project_config.h).
struct BuildRecipe {
  std::vector<std::string> commands;  // run in order in the worktree (sh -c), output to <worktree>/build.log
  int timeout_s = 0;                  // all of them together
  std::string artifact;               // path inside the worktree the build must produce
  // The artifact is a verity binary: its `parity --help` says which parity
  // flags the build knows (a config's parity kind "verity").
  bool verity_binary = false;
};

// A git ref built into a cached worktree: verify the artifact, not the transport.
struct BuiltRef {
  std::string ref, sha;             // as given, and the commit it resolved to
  std::string worktree;             // <cache>/<sha>
  std::string binary;               // <worktree>/<recipe.artifact>: the build's artifact
  bool has_parity = false;          // a verity binary that knows `verity parity`
  bool has_parity_against = false;  // ... and its --against reads reference logits files (an independent reference's)
};

// Resolves `ref` in `repo`, checks it out (detached) into `cache_dir`/<sha>
// once, and runs the recipe's build commands there (incrementally on later
// calls). `progress` receives one line per step. Errors name the ref, the
// command that failed and the log.
Result<BuiltRef> BuildRef(const std::string& repo, const std::string& ref, const std::string& cache_dir,
                          const BuildRecipe& recipe, const std::function<void(const std::string&)>& progress);

}  // namespace verity::measure
