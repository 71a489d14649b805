// Parity: run a candidate path and a reference on the same weights and token
// ids; at each depth score a window of positions by top-1 agreement and KL
// divergence; the worst depth decides. Speaks the verity.parity/1 protocol.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "protocol/parity_record.h"

namespace verity {

struct ParityOptions {
  std::string backend = "fast";  // the candidate
  // "reference", a reference logits file (verify/ref_logits.h: its tokens, rows
  // and model are used and checked), or a raw f32 logits file.
  std::string against = "reference";
  std::vector<int> depths;  // context lengths; empty = spread over the context
  int window = 0;           // positions scored per depth; 0 = default (8, deep 16)
  // Deep never thins the evidence: explicit depths are joined with the deep
  // defaults (14 depths) and the window is max(2 x window, 16).
  std::vector<int> tokens;                     // empty = the reference's own greedy text from BOS
  std::string bit_identical_to;                // raw f32 logits file the candidate must equal byte for byte
  std::string dump;                            // write the candidate's logits (raw f32) here
  bool deep = false;                           // more depths, wider windows
  double min_top1 = 0.95, max_mean_kl = 0.05;  // policy v1 thresholds
  bool per_position = false;                   // keep every scored position's KL and top-1 (ParityReport::per_position)
  // The candidate's forward when it is not a Transformer on `backend` (e.g.
  // tensor-parallel ranks, engine/tp_forward.h); the caller owns it. The
  // report's candidate is then `candidate_name`.
  std::function<Result<Decoder*>(const Model&)> candidate;
  std::string candidate_name;
  // The backend of the computed reference ("reference" = reference-cpu; any
  // other names a single-rank Transformer on that backend, "single-rank-<name>").
  std::string reference_backend = "reference";
  // When >= 0: the largest |candidate - reference| over the scored logits
  // must not exceed it (ParityReport::max_abs_diff is always computed).
  double max_abs_diff = -1.0;
};

// Against a reference logits file (verify/ref_logits.h) with f32 weights, the
// candidate must agree with the float64 reference to float rounding: these
// replace the policy thresholds. Other dtypes keep the policy's.
inline constexpr double kRefFileF32MinTop1 = 1.0;
inline constexpr double kRefFileF32MaxMeanKl = 1e-6;

// Tensor-parallel ranks against one rank on the same kernels differ only in
// the order the row-parallel partial sums are added (measured: a single rank
// computing wo and w2 as the ranks' column slices added in rank order gives
// the tp logits byte for byte): these replace the policy thresholds. The
// absolute bound is about twice the float floor of one rank on stories260K,
// over all 512 positions: fast vs reference kernels 2.19e-5, fast vs exactly
// rounded wo/w2 products 1.38e-5, tp=2 and 4 vs one rank 1.43e-5 and 1.48e-5
// (logits up to 23.1). A moved, missing or extra reduce moves logits by more
// than 1 (docs/tensor-parallel.md).
inline constexpr double kTpMaxMeanKl = 1e-9;
inline constexpr double kTpMaxAbsDiff = 5e-5;
// q8_0 rounds each matrix's input to int16 per block of 32 (simd::QuantizedX):
// the ranks' reordered sums move an input by an ulp, that can move its int16 by
// one step, and the step reaches the logits. Against one q8_0 rank on the ~110M
// synth: tp=2 mean KL 3.76e-9, max |diff| 4.66e-4; tp=4 3.42e-9, 4.25e-4; on
// tp_test's 2-layer synth 1.16e-3 (the reference kernels, which keep x in f32,
// stay at 1.07e-5). Still far below what a moved or missing reduce does (> 1).
inline constexpr double kTpQ8MaxMeanKl = 2e-8;
inline constexpr double kTpQ8MaxAbsDiff = 5e-3;

struct ParityDepth {
  int depth = 0;
  double top1 = 0, mean_kl = 0, max_kl = 0;
  std::string sha256;  // candidate logits over this window
  int positions = 0;
  int worst_position = -1;  // the position with the largest KL (NaN counts as largest)
};

// One scored position (kept when ParityOptions::per_position).
struct ParityPosition {
  int position = 0, depth = 0;
  double kl = 0;  // KL(reference || candidate) of this row
  int ref_top1 = 0, cand_top1 = 0;
};

// The reference logits file a report was judged against.
struct ReferenceFileInfo {
  std::string path, sha256, generator, model_path, model_sha256;
};

struct ParityReport {
  std::string reference, candidate;
  std::string dtype = "f32";            // the candidate model's weight dtype
  std::string reference_dtype = "f32";  // the reference's (f32 unless asked to share the candidate's)
  std::string mode = "standard";        // "standard" | "deep"
  int tokens = 0;                       // compared token positions (candidate rows computed)
  int distinct_tokens = 0;              // distinct ids among them (a text of one repeated id hides q/k bugs)
  int window = 0;                       // positions requested per depth
  std::vector<ParityDepth> depths;
  double worst_top1 = 1.0, worst_mean_kl = 0.0;  // NaN when any depth's value is NaN
  double max_abs_diff = 0.0;                     // largest |candidate - reference| logit over the scored positions
  double max_abs_limit = -1.0;                   // the bound it was judged by (< 0: none)
  std::string logits_sha256;                     // candidate logits over the scored windows, in depth order
  std::string all_rows_sha256;  // candidate logits over every row, in position order (= sha256 of --dump)
  // Where a NaN or infinity was met, e.g. "depth 448: mean_kl",
  // "candidate logits: position 445". Any entry fails the report.
  std::vector<std::string> nonfinite;
  bool has_bit_identity = false, bit_identical = false;
  std::string bit_identity_detail;
  double min_top1 = 0.95, max_mean_kl = 0.05;  // the thresholds the report was judged by
  std::vector<ParityPosition> per_position;    // in depth order, when asked for
  bool has_reference_file = false;
  ReferenceFileInfo reference_file;
  bool ok = false;
  // The verity.parity/1 record (protocol/parity_record.h) of this report,
  // without the build (the command that ran adds it), and its JSON.
  protocol::ParityRecord Record() const;
  nlohmann::json ToJson() const;
};

// Runs the comparison. Errors name the file or flag that is wrong.
Result<ParityReport> RunParity(const Model& model, const ParityOptions& opt);
// The same with the candidate on its own copy of the weights (e.g. bf16 or
// q8_0) and the reference on `reference_model` (f32, or the candidate's own
// weights to judge the kernels alone): both must be the same model (same
// config). The report names both dtypes.
Result<ParityReport> RunParity(const Model& reference_model, const Model& candidate_model, const ParityOptions& opt);

// The depths and window a run scores over `tokens` positions (defaults, deep
// floor, bounds checked). Errors name --depths.
Result<std::vector<int>> ParityDepths(int tokens, const ParityOptions& opt, int* window);

// Scores candidate rows `got` against reference rows `ref` (both tokens x vocab,
// position order) and decides ok, bit identity included. RunParity's second half.
Result<ParityReport> CompareLogits(const std::vector<float>& ref, const std::vector<float>& got, int vocab,
                                   const ParityOptions& opt);

// The same with reference rows by position: ref[pos] is position pos's row, or
// nullptr where there is none (an error if a scored position lacks one).
Result<ParityReport> CompareRows(const std::vector<const float*>& ref, const std::vector<float>& got, int vocab,
                                 const ParityOptions& opt);

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
