// Parity: run a candidate path and a reference on the same weights and token
// ids; at each depth score a window of positions by top-1 agreement and KL
// divergence; the worst depth decides. Speaks the verity.parity/1 protocol.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace verity {

struct ParityOptions {
  std::string backend = "fast";      // the candidate
  std::string against = "reference"; // "reference" or a raw f32 logits file
  std::vector<int> depths;           // context lengths; empty = spread over the context
  int window = 0;                    // positions scored per depth; 0 = default (8, deep 16)
  std::vector<int> tokens;           // empty = the reference's own greedy text from BOS
  std::string bit_identical_to;      // raw f32 logits file the candidate must equal byte for byte
  std::string dump;                  // write the candidate's logits (raw f32) here
  bool deep = false;                 // more depths, wider windows
  double min_top1 = 0.95, max_mean_kl = 0.05;  // policy v1 thresholds
};

struct ParityDepth {
  int depth = 0;
  double top1 = 0, mean_kl = 0, max_kl = 0;
  std::string sha256;  // candidate logits over this window
  int positions = 0;
};

struct ParityReport {
  std::string reference, candidate;
  int tokens = 0;
  std::vector<ParityDepth> depths;
  double worst_top1 = 1.0, worst_mean_kl = 0.0;
  std::string logits_sha256;
  bool has_bit_identity = false, bit_identical = false;
  std::string bit_identity_detail;
  bool ok = false;
  nlohmann::json ToJson() const;
};

// Runs the comparison. Errors name the file or flag that is wrong.
Result<ParityReport> RunParity(const Model& model, const ParityOptions& opt);

// Reads raw little-endian f32 logits rows of `vocab` values; errors name the file.
Result<std::vector<float>> ReadLogitsFile(const std::string& path, int vocab);
// Reads whitespace-separated token ids.
Result<std::vector<int>> ReadTokensFile(const std::string& path);

}  // namespace verity

namespace verity {

// One value of a structural sweep.
struct SweepPoint {
  int value = 0;
  ModelConfig config;
  ParityReport report;
  bool leaves_zero = false;  // worst mean KL above the noise floor, or top-1 below 1
};

struct SweepResult {
  std::string param;
  std::vector<SweepPoint> points;
  int threshold = 0;  // first value that leaves zero; 0 = none
};

// Noise floor of "zero": fast and reference differ only by float reordering,
// orders of magnitude below this.
constexpr double kSweepZeroKl = 1e-6;

// Runs parity (fast vs reference) on deterministic synthetic models that differ
// only in `param` (layers | heads | kv_heads | context | experts). Models are written under `dir`.
Result<SweepResult> RunSweep(const std::string& param, const std::vector<int>& values, const std::string& dir);

}  // namespace verity
