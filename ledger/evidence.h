// The two evidence-gathering steps of a submission, below the sequence in
// submit.cc: the correctness gate (parity commands, checked against the
// policy's evidence floor and bound to the artifact) and the timed ABBA rounds
// (bench commands, every metric, artifacts checked against the gate's).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ledger/db.h"
#include "ledger/identity.h"
#include "ledger/ledger.h"
#include "ledger/policy.h"
#include "ledger/score.h"
#include "measure/measure.h"

namespace verity::ledger {

using Say = std::function<void(const std::string&)>;

// Judges one piece of parity evidence. Passing needs exit 0, ok:true, no
// non-finite value, the policy's thresholds on the worst depth, the evidence
// floor (depths, the deepest at the last context position, positions per
// depth), and a stated mode equal to `mode`. With `standard` (deep mode), the
// evidence must also carry deep_factor x its depths and window. Returns ""
// when it passes, else what is wrong.
std::string JudgeParity(const Policy& pol, const measure::ParityEvidence& e, const std::string& mode,
                        const measure::ParityEvidence* standard = nullptr);

struct ParityOutcome {
  bool passed = false;
  std::string message;
  std::optional<measure::ParityEvidence> evidence;
};

// Runs one parity command (deep mode sets VERITY_PARITY_MODE=deep), judges
// and records it in parity_results.
Result<ParityOutcome> RunParityCommand(Db& d, const Policy& pol, int64_t run_id, const std::string& side,
                                       const std::string& cmd, bool deep, int timeout_s,
                                       const measure::ParityEvidence* standard = nullptr);

// The latest recorded evidence of `side` in `mode` for a run, if any.
Result<std::optional<measure::ParityEvidence>> RecordedParity(Db& d, int64_t run_id, const std::string& side,
                                                              const std::string& mode);

struct GateInput {
  Db* d;
  const Policy* pol;
  int64_t run_id;
  int timeout_s;
  Say say;
};
struct GateResult {
  bool stop = false;  // decided without speed (verdict, note)
  Verdict verdict = Verdict::kNone;
  std::string note;
  bool verified = true;                      // the evidence names the artifacts it came from
  std::string head_artifact, base_artifact;  // what the parity evidence ran ("" = not stated)
  // The dtype each side's evidence states, when that side has evidence ("" = not stated).
  std::optional<std::string> head_dtype, base_dtype;
};

// The correctness gate for a change, reapply or revert.
Result<GateResult> RunGate(const GateInput& in, const ChangeRequest& c, Kind kind);

struct RoundsInput {
  Db* d;
  int64_t run_id, box_id;
  int timeout_s;
  Say say;
  measure::Box box;                        // the box the run started on (box_id)
  std::function<measure::Box()> read_box;  // re-read after every sample; a change fails the run
  // Once the warm-up names both artifacts: the attempt this run is of that
  // pair (policy v4: a resubmission continues its error budget). Empty: keep `attempt`.
  std::function<Result<int>(const ChangeIdentity& id)> attempt_of;
};
struct Measured {
  MetricSeries primary;
  std::vector<MetricSeries> guards;            // every other metric both sides reported in every sample
  std::optional<double> head_bytes_per_token;  // the largest the head stated (roofline.bytes_per_token)
  bool head_on_device = false;                 // a head sample was a `--backend cuda` bench
  std::string workload;                        // what both sides measured (measure::BenchSample::workload)
  std::string base_artifact, head_artifact;    // what each side ran (the first sample's artifact_sha256)
  std::string base_build, head_build;          // and the build ids those samples reported
  ChangeIdentity identity;                     // what the run is (ledger/identity.h), once the warm-up named both
  int attempt = 0;                             // the attempt the looks were taken at
  SequentialPlan plan;                         // the plan the rounds followed (the box's noise may raise min_rounds)
  std::string noise_note;                      // what the box's noise profile decided, if it has one
  bool too_noisy = false;                      // the profile says no plan within max_rounds resolves the gate
  bool mismatch = false;                       // a bench ran another artifact than the parity evidence
  std::string mismatch_note;
  // A side printed a raw Google Benchmark or hyperfine report, which names no
  // build: no parity evidence binds to it, so the run cannot be verified.
  bool unbound = false;
  std::string unbound_note;
  // Parity evidence of another dtype stood for the bench's, as the submitter declared.
  std::string dtype_note;
};

// Takes the warm-up and then ABBA rounds until the sequential rule decides,
// recording every sample and every metric.
Result<Measured> TakeRounds(const RoundsInput& in, const ChangeRequest& c, const GateResult& gate,
                            const SequentialPlan& plan, double gate_frac, int attempt);

}  // namespace verity::ledger
