// Parity evidence for engines that are not verity (the project config's
// parity kinds "tokens" and "logits", docs/config.md): the engine is run by
// its own command, and verity compares what it printed or wrote.
//  - tokens: the engine's greedy output, byte for byte, against the base's
//    output or a pinned golden file. Identity proves the change moved no bit
//    of the text; the ledger's policy sets how many bytes that must cover.
//  - logits: raw little-endian f32 logits the engine wrote for a
//    teacher-forced id sequence, scored against the base's or a reference's
//    file with verity parity's own math (CompareLogits: top-1 and KL per depth).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "verify/parity.h"

namespace verity {

struct OutputIdentity {
  size_t head_bytes = 0, base_bytes = 0;
  bool identical = false;
  // The first offset where the outputs differ (one ending early counts); -1 when identical.
  long long first_diff = -1;
  // Up to kSnippetBytes from a little before first_diff, bytes outside
  // printable ASCII written \xNN (so a snippet is always valid JSON text).
  std::string head_snippet, base_snippet;
};

inline constexpr size_t kSnippetBytes = 48;

// Compares two outputs byte for byte.
OutputIdentity CompareOutputs(const std::string& head, const std::string& base);

// `bytes` with every byte outside printable ASCII (and '\') as \xNN.
std::string EscapedBytes(const std::string& bytes);

// Reads a file of raw f32 logits that must hold exactly `tokens` rows of
// `vocab` floats. A wrong size is an error naming the file, what it holds and
// what was expected: a vocab mismatch when it divides into `tokens` rows of
// another width, truncated (or overlong) otherwise.
Result<std::vector<float>> ReadLogitsRows(const std::string& path, int tokens, int vocab, const std::string& what);

// Scores the candidate's logits file against the reference's (raw f32 of the
// same shape, or a verity.ref-logits/1 file whose tokens must be `tokens` and
// whose vocab must be `vocab`). `deep`: 14 depths, window 16. The thresholds
// are the policy's (min_top1, max_mean_kl in `opt`).
Result<ParityReport> CompareLogitsFiles(const std::string& reference, const std::string& candidate,
                                        const std::vector<int>& tokens, int vocab, const ParityOptions& opt);

}  // namespace verity
