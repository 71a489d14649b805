// A change's verdict as a pull-request comment (GitHub-flavoured markdown):
// the verdict in one line, the gain with its bounds against the gate, the
// prediction and whether it surprised, the parity evidence, each guard, the
// frontier before and after, and what to do next. Written by
// `verity submit --markdown FILE` for a CI job to post; docs/ci.md shows one
// per verdict.
#pragma once

#include <string>

#include "ledger/read_model.h"

namespace verity::reports {

// The comment for the change's latest run and its latest score (a change
// never scored says so). Every string a submitter or a command wrote is
// escaped as data.
std::string PrComment(const ledger::ChangeView& v);

}  // namespace verity::reports
