// llama-bench's own output as the bench protocol: `llama-bench -o json` (one
// JSON array of test records) or `-o jsonl` (one record per line) is read as
// a verity.bench/1 record without a wrapper, so the ledger can score
// llama.cpp, or any engine that prints llama-bench's records, as it is.
//
// Each record is one test: `tg` (n_prompt 0, n_gen > 0) becomes
// `decode_tok_s`, `pp` (n_gen 0) `prefill_tok_s`, a combined pp+tg test
// `pp<P>_tg<G>_tok_s`; a test at a depth (n_depth > 0) gets `_d<D>` before
// `_tok_s`. The value is the median of the record's repetitions
// (`samples_ts`), else its `avg_ts`. Every record must name the same
// `build_commit` (the build's identity) and model; two records that map to one
// metric (two thread counts, say) are refused: run one configuration per
// bench command. docs/bench.md, "llama-bench records".
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace verity::measure {

struct LlamaBenchReport {
  std::string build_commit;
  std::string model;  // model_filename's last component ("" when absent)
  int threads = 0;    // n_threads (0 when absent)
  std::map<std::string, double> metrics;
};

// Whether stdout looks like llama-bench's JSON or JSONL: a JSON array, or a
// first line that is an object, with a "build_commit" and an "n_gen" key
// near the start. Only a shape test; ParseLlamaBench says what is wrong.
bool LooksLikeLlamaBench(const std::string& out);

// Parses llama-bench's -o json or -o jsonl output. Errors start with `what`
// and name the record and field: not JSON, no records, a record that is not
// an object, a missing or mistyped build_commit / n_prompt / n_gen, no
// positive finite avg_ts or samples_ts, records of different builds or
// models, two records of one metric.
[[nodiscard]] Result<LlamaBenchReport> ParseLlamaBench(const std::string& out, const std::string& what);

}  // namespace verity::measure
