// verity.parity/1: the evidence that an engine's output is right, as a
// parity command prints it (one JSON object on stdout) and as the ledger
// reads it, now and whenever it re-reads a recorded one. Three kinds: "verity"
// and "logits" score depths of logits against a reference (top-1 agreement,
// KL); "tokens" compares greedy output byte for byte. The writers (`verity
// parity`, `parity-tokens`, `parity-logits`) fill a ParityRecord and print
// ToJson; the ledger reads ParityRecordFromJson. See protocol/README.md.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::protocol {

inline constexpr char kParitySchema[] = "verity.parity/1";

struct ParityRecord {
  struct Depth {
    int depth = 0;
    double top1 = 0.0, mean_kl = 0.0, max_kl = 0.0;  // NaN is printed as null, and read back as NaN
    int positions = 0;                               // positions scored at this depth (0 = not reported)
    std::optional<int> worst_position;               // where max_kl was met (written by verity; not read)
    std::string logits_sha256;                       // over this depth's window ("" = not reported; not read)
  };
  // What the evidence is ("kind"; absent: "verity").
  std::string kind = "verity";
  std::vector<Depth> depths;
  // The worst over depths. The reader recomputes them rather than trust the
  // record; NaN when any depth's value is non-finite.
  double worst_top1 = 0.0, worst_mean_kl = 0.0;
  std::string logits_sha256;              // over the scored windows, in depth order
  std::string all_rows_sha256;            // over every logit row the run computed; "" = not reported
  std::string mode;                       // "standard" | "deep"; "" = not stated
  int window = 0;                         // positions requested per depth; 0 = not stated
  int tokens = 0;                         // compared token positions (the context); 0 = not stated
  std::string build_id, artifact_sha256;  // the binary that produced it; "" = not reported
  std::string dtype;                      // the candidate's weight dtype; "" = not stated
  // Where the output held NaN, infinity or null in place of a number (the
  // reader adds e.g. "depths[3].mean_kl"), then the producer's own list (e.g.
  // "candidate logits: position 445"). Any entry makes the evidence a FAIL.
  std::vector<std::string> nonfinite;
  // The producer's own verdict. The ledger judges again (exit code, these
  // numbers, its thresholds); this alone passes nothing.
  bool ok = false;
  struct Identity {       // kind "tokens" only
    std::string against;  // "base" | "golden"
    long long head_bytes = 0, base_bytes = 0, first_diff = -1;
    bool identical = false;
    std::string head_snippet, base_snippet;  // around first_diff; "" when identical
    std::string head_sha256, base_sha256;    // of each whole output ("" = not reported)
    std::string golden;                      // the golden file's path, against "golden"
  };
  Identity identity;
  // Every other field, as the producer wrote it (thresholds, per_position,
  // the reference file): written at the top level, a field above winning.
  nlohmann::json extra = nlohmann::json::object();
};

// The record as a parity command prints it. NaN and infinity are written as
// null, never as a number that could pass.
nlohmann::json ToJson(const ParityRecord& r);

// Reads a record. Structurally missing fields are errors: depths (non-empty),
// a depth's depth/top1/mean_kl, the 64-hex logits_sha256; for kind "tokens"
// an identity whose facts agree (identical iff first_diff < 0, equal byte
// counts when identical). So are malformed optional ones: a build without
// string id/artifact_sha256, a mode other than standard/deep, a
// non-integer window/tokens/positions, an all_rows_sha256 that is not 64 hex.
// A null, NaN or infinite number is not an error: it is named in nonfinite,
// and worst_* become NaN. `what` starts every error message.
[[nodiscard]] Result<ParityRecord> ParityRecordFromJson(const nlohmann::json& j, const std::string& what);

}  // namespace verity::protocol
