// verity.bench/1: one run of a benchmark, as any engine's bench command
// prints it (one JSON object on stdout) and as the ledger reads it. The
// writers (`verity bench`, `adapt`, `gbench`, `loadgen`, the raw-report and
// llama-bench converters) build a BenchRecord and print ToJson; the ledger
// reads BenchRecordFromJson. The fields and their rules: protocol/README.md.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace verity::protocol {

inline constexpr char kBenchSchema[] = "verity.bench/1";

// The range every number a bench prints must lie in (metrics and
// roofline.bytes_per_token). Inside it a round's sums (at most 2 x 1e15) and
// any ratio of two of them (at most 1e27) are finite doubles, and so is a
// frontier moved by hundreds of factors within the 5x ceiling; 1e308 + 1e308
// is inf, and the seed and the frontier would read inf. Wide enough for the
// units in use: nanoseconds of an hour-long benchmark (3.6e12), bytes of a
// petabyte, tok/s of a model that makes one token a day.
inline constexpr double kMinBenchValue = 1e-12;
inline constexpr double kMaxBenchValue = 1e15;

// The binary a record (bench or parity) came from: the ledger binds evidence
// to a change by these.
struct BuildIdentity {
  std::string id;               // the producer's build name (verity: its commit and tree hash)
  std::string artifact_sha256;  // sha256 of what ran
};

struct BenchRecord {
  BuildIdentity build;
  bool ok = true;                         // false: the run failed and no number of it counts
  std::map<std::string, double> metrics;  // each positive, finite, in [kMinBenchValue, kMaxBenchValue]
  // What was measured, when the producer names it in one string ("" = not
  // stated): taken at its word. Otherwise the fields below name it (verity
  // bench writes them) and WorkloadKey derives the ledger's key from them.
  std::string workload;
  std::optional<std::string> model, dtype, backend;
  std::optional<int> threads, prompt_tokens, gen_tokens, batch;
  // roofline.bytes_per_token: the weight and cache bytes one decoded token
  // reads; with the box's bandwidth it bounds decode tok/s.
  std::optional<double> bytes_per_token;
  // Every other field, as the producer wrote it (an adapter's source, a
  // tool's detail, verity bench's spread and placement): written at the top
  // level by ToJson (a key above wins), kept whole by BenchRecordFromJson.
  nlohmann::json extra = nlohmann::json::object();
};

// The record as its producer prints it (JsonLine it for stdout).
nlohmann::json ToJson(const BenchRecord& r);

// Reads a record: the schema, a build with string id and artifact_sha256, a
// metrics object whose every value is a number in range, a boolean ok
// (absent: false), a roofline.bytes_per_token in range if present. The
// workload fields are kept where they have their type; WorkloadKey reads
// them from the JSON itself. `what` starts every error message.
[[nodiscard]] Result<BenchRecord> BenchRecordFromJson(const nlohmann::json& j, const std::string& what);

// The key under which the ledger compares speeds: the record's "workload"
// when it states one; else "<model file name> <dtype> <threads>t
// pp<prompt>+tg<gen>[ x<batch>][ cuda]" (dtype f32 when absent, so records
// from before it keep their key); "" when it names neither. A malformed field
// is named in the key ("threads?") so that it never matches a well-formed one.
std::string WorkloadKey(const nlohmann::json& j);

// The weight dtype a record measured: its "dtype" (f32 when it names a model
// but no dtype); else the one dtype word of its stated workload. A workload
// naming two dtypes, or another than the field, reads "dtype?", which no
// parity evidence matches. "" when nothing names one.
std::string DtypeKey(const nlohmann::json& j, const std::string& workload_key);

}  // namespace verity::protocol
