// verity calibrate: an A/A on this box, recorded as its noise profile.
#pragma once

#include <string>

#include "ledger/ledger.h"
#include "ledger/noise.h"

namespace verity::ledger {

struct CalibrateRequest {
  std::string cmd;  // a bench command (verity.bench/1), run as base and as head
  std::string metric = "decode_tok_s";
  int rounds = 20;  // ABBA rounds after one warm-up round
};

// Runs the warm-up and `rounds` ABBA rounds of cmd against itself under the
// box lock and records the profile (box_noise) under this box's fingerprint
// and the workload the command's records name. Errors name the command.
[[nodiscard]] Result<NoiseProfile> Calibrate(Ledger& l, const CalibrateRequest& req, const MeasureOptions& opt);

}  // namespace verity::ledger
