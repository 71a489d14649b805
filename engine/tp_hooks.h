// Where a corruption build (CORRUPTIONS.md families 2 and 3) changes the
// tensor-parallel code: the shard plan and where the sharded forward reduces.
// A normal build compiles tp_hooks.cc, whose hooks return their input
// unchanged; a corruption build compiles tp_hooks_corrupt.cc instead. Nothing
// here is on a per-token path (the forward reads the reduce placement once).
#pragma once

#include "engine/engine.h"
#include "engine/shard_plan.h"

namespace verity::hooks {

// The shard a rank gets, given the correct one.
RankShard TpRankShard(const RankShard& planned, const ModelConfig& c);

// True iff the attention output's all-reduce is to be moved past the FFN's
// RMSNorm (the corruption `tp-reduce-past-norm`); false in a normal build.
bool TpReduceAfterNorm();

}  // namespace verity::hooks
