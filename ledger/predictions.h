// The prediction track record: every scored change was predicted before it
// was measured, so the ledger can say, per author, how good the predictions
// are -- something no tool that records only results can offer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ledger/read_model.h"

namespace verity::ledger {

// One change: its prediction and what its latest sound score measured.
struct PredictionEntry {
  int64_t change = 0, run = 0;
  std::string author, title, verdict;
  double predicted = 0;   // fraction of the frontier, as predicted
  double measured = 0;    // the score's gain (fraction of the frontier it was measured against)
  bool surprise = false;  // the ledger held it (or flagged it) as far from its prediction
};

// Per author: bias = mean(measured - predicted); the median absolute error;
// the share within 2x (same sign, measured / predicted in [0.5, 2]).
struct AuthorRecord {
  std::string author;
  int changes = 0, within_2x = 0, surprises = 0;
  double bias = 0, median_abs_error = 0;
};

struct PredictionsView {
  std::vector<PredictionEntry> entries;  // by change id
  std::vector<AuthorRecord> authors;     // by author name
};

// Changes (kind change or reapply) with a prediction and a latest
// non-retracted score that measured a gain; failed, parity-rejected and
// unmeasured ones are not predictions put to the test and are left out.
PredictionsView PredictionRecord(const std::vector<ChangeView>& changes);

nlohmann::json ToJson(const PredictionsView& v);
// One line per author, then a summary line that says how many changes it
// examined (also when there were none).
std::string ToText(const PredictionsView& v);

}  // namespace verity::ledger
