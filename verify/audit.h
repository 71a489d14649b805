// The tensor audit of a Hugging Face checkpoint directory, and the coherence
// probe. Both always end with one summary line, whatever happened.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace verity {

struct AuditReport {
  std::vector<std::string> findings;  // one line each
  int tensors = 0, shards_ok = 0, shards_total = 0, missing = 0, fatal = 0;
  bool pass = false;
  // "audit: tensors=N shards=P/Q missing=M fatal=F verdict=PASS|FAIL"
  std::string Summary() const;
};

// Maps every tensor the config requires and every index entry to its shard
// and checks it: shard readable, tensor in its header, shape as the config
// implies, byte ranges inside the file, total_size. Missing routed-expert
// tensors are allowed iff `experts_elsewhere`; anything else missing is fatal.
// Never fails: problems (even an unreadable config or index) are findings.
AuditReport AuditCheckpoint(const std::string& dir, bool experts_elsewhere);

struct Probe {
  std::string prompt, expect;  // the greedy continuation must begin with `expect`
};

// Reads a probes file: a JSON array of {"prompt": ..., "expect": ...}.
Result<std::vector<Probe>> ReadProbes(const std::string& path);
// The probes file kept beside a model: <model without .bin>.probes.json, or
// <dir>/probes.json for a directory.
std::string DefaultProbesPath(const std::string& model_path);

struct ProbeResult {
  Probe probe;
  std::string got;  // the greedy continuation
  bool pass = false;
};

// Runs each probe greedily on the reference path.
Result<std::vector<ProbeResult>> RunProbes(const Model& model, const Tokenizer& tok, const std::vector<Probe>& probes);

}  // namespace verity
