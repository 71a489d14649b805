// Measurement: run a command with a timeout, parse the bench and parity
// protocols strictly, and fingerprint the box the numbers come from.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::measure {

struct CommandOutput {
  int exit_code = -1;      // 128+signal when killed
  bool timed_out = false;
  std::string out, err;
  double seconds = 0.0;
};

// `s` as one single-quoted shell word (safe inside sh -c command lines).
std::string ShellQuote(const std::string& s);

// Runs `command` through `sh -c` in its own process group; kills the group
// after `timeout_s`. `env` entries are added to the child's environment.
CommandOutput RunCommand(const std::string& command, int timeout_s,
                         const std::map<std::string, std::string>& env = {});

// One run of a bench command, per the verity.bench/1 protocol.
struct BenchSample {
  std::string build_id, artifact_sha256;
  double value = 0.0;  // the requested metric
};

// Parses the whole stdout as one verity.bench/1 object holding `metric`.
// `what` (e.g. "head bench command") starts every error message.
Result<BenchSample> ParseBench(const CommandOutput& run, const std::string& metric, const std::string& what);

// One run of a parity command, per the verity.parity/1 protocol.
struct ParityEvidence {
  struct Depth {
    int depth;
    double top1, mean_kl, max_kl;
  };
  std::vector<Depth> depths;
  double worst_top1 = 0.0, worst_mean_kl = 0.0;  // recomputed from depths, not trusted
  std::string logits_sha256;
  bool reported_ok = false;
  int exit_code = 0;
  std::string raw;  // the JSON as printed
};

// Parses the whole stdout as one verity.parity/1 object. A parity command may
// exit 1 to say FAIL (its JSON is the evidence); it fails to parse when it
// timed out, crashed, printed nothing, or printed anything else. Whether the
// evidence passes is the caller's policy (exit code AND JSON AND thresholds).
Result<ParityEvidence> ParseParity(const CommandOutput& run, const std::string& what);

// The box: CPU model, cores, kernel, governor, GPU and driver where present.
struct Box {
  std::string fingerprint;  // sha256 of `detail`
  std::string detail;       // canonical JSON
};
Box ThisBox();

}  // namespace verity::measure

namespace verity::measure {

// A git ref built into a cached worktree: verify the artifact, not the transport.
struct BuiltRef {
  std::string ref, sha;    // as given, and the commit it resolved to
  std::string worktree;    // <cache>/<sha>
  std::string binary;      // <worktree>/build/cli/verity
  bool has_parity = false; // the build knows `verity parity`
};

// Resolves `ref` in `repo`, checks it out (detached) into `cache_dir`/<sha>
// once, and builds its `verity` target there (incrementally on later calls).
// `progress` receives one line per step. Errors name the ref and the log.
Result<BuiltRef> BuildRef(const std::string& repo, const std::string& ref, const std::string& cache_dir,
                          int timeout_s, const std::function<void(const std::string&)>& progress);

}  // namespace verity::measure
