// llama-bench records -> metrics; see llama_bench.h.
#include "measure/llama_bench.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace verity::measure {
namespace {

using nlohmann::json;

std::string FirstLine(const std::string& s) {
  const size_t start = s.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  const size_t end = s.find('\n', start);
  return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool PositiveFinite(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0; }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The records: the array of -o json, or each non-blank line of -o jsonl.
Result<std::vector<json>> Records(const std::string& out, const std::string& what) {
  std::vector<json> records;
  const size_t start = out.find_first_not_of(" \t\r\n");
  try {
    if (start != std::string::npos && out[start] == '[') {
      const json all = json::parse(out);
      for (const auto& r : all) records.push_back(r);
    } else {
      std::istringstream lines(out);
      std::string line;
      while (std::getline(lines, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) records.push_back(json::parse(line));
    }
  } catch (const std::exception&) {
    return Status::Error(what + ": not llama-bench JSON (-o json) or JSON lines (-o jsonl)");
  }
  if (records.empty()) return Status::Error(what + ": llama-bench printed no test records");
  return records;
}

Result<int> Count(const json& r, const char* key, const std::string& where, bool required) {
  if (!r.contains(key)) {
    if (required) return Status::Error(where + "." + key + " is missing");
    return 0;
  }
  const json& v = r[key];
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 1000000000)
    return Status::Error(where + "." + key + " is " + v.dump() + ", not a count");
  return static_cast<int>(v.get<long long>());
}

// The metric a test's shape names: decode_tok_s, prefill_tok_s, pp<P>_tg<G>_tok_s, with _d<D> at a depth.
std::string MetricOf(int prompt, int gen, int depth) {
  std::string m = gen > 0 && prompt == 0   ? "decode"
                  : prompt > 0 && gen == 0 ? "prefill"
                                           : "pp" + std::to_string(prompt) + "_tg" + std::to_string(gen);
  if (depth > 0) m += "_d" + std::to_string(depth);
  return m + "_tok_s";
}

Result<double> Rate(const json& r, const std::string& where) {
  if (r.contains("samples_ts") && r["samples_ts"].is_array() && !r["samples_ts"].empty()) {
    std::vector<double> v;
    for (size_t k = 0; k < r["samples_ts"].size(); k++) {
      if (!PositiveFinite(r["samples_ts"][k]))
        return Status::Error(where + ".samples_ts[" + std::to_string(k) + "] is " + r["samples_ts"][k].dump() +
                             ", not a positive finite tokens/s");
      v.push_back(r["samples_ts"][k].get<double>());
    }
    return Median(v);
  }
  if (r.contains("avg_ts") && PositiveFinite(r["avg_ts"])) return r["avg_ts"].get<double>();
  return Status::Error(where + " has neither samples_ts nor a positive finite avg_ts");
}

std::string ModelName(const json& r) {
  if (!r.contains("model_filename") || !r["model_filename"].is_string()) return "";
  const std::string f = r["model_filename"];
  const size_t slash = f.find_last_of('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

}  // namespace

bool LooksLikeLlamaBench(const std::string& out) {
  const std::string first = FirstLine(out);
  if (first.empty() || (first[0] != '[' && first[0] != '{')) return false;
  const std::string head = out.substr(0, 4096);
  return head.find("\"build_commit\"") != std::string::npos && head.find("\"n_gen\"") != std::string::npos;
}

Result<LlamaBenchReport> ParseLlamaBench(const std::string& out, const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(std::vector<json> records, Records(out, what));
  LlamaBenchReport rep;
  for (size_t i = 0; i < records.size(); i++) {
    const json& r = records[i];
    const std::string where = what + ": record " + std::to_string(i);
    if (!r.is_object()) return Status::Error(where + " is not an object");
    if (!r.contains("build_commit") || !r["build_commit"].is_string() || r["build_commit"].get<std::string>().empty())
      return Status::Error(where + ".build_commit is missing or not a non-empty string");
    const std::string commit = r["build_commit"], model = ModelName(r);
    if (i == 0) {
      rep.build_commit = commit;
      rep.model = model;
      VERITY_ASSIGN_OR_RETURN(rep.threads, Count(r, "n_threads", where, false));
    } else if (commit != rep.build_commit) {
      return Status::Error(where + ".build_commit is '" + commit + "', record 0's is '" + rep.build_commit +
                           "': one bench command must measure one build");
    } else if (model != rep.model) {
      return Status::Error(where + ".model_filename is '" + model + "', record 0's is '" + rep.model +
                           "': one bench command must measure one model");
    }
    VERITY_ASSIGN_OR_RETURN(int prompt, Count(r, "n_prompt", where, true));
    VERITY_ASSIGN_OR_RETURN(int gen, Count(r, "n_gen", where, true));
    VERITY_ASSIGN_OR_RETURN(int depth, Count(r, "n_depth", where, false));
    if (prompt == 0 && gen == 0) return Status::Error(where + " has n_prompt 0 and n_gen 0: a test of nothing");
    const std::string metric = MetricOf(prompt, gen, depth);
    if (rep.metrics.count(metric))
      return Status::Error(where + " is a second " + metric +
                           " test (two thread counts or batch sizes?): run one "
                           "configuration per bench command");
    VERITY_ASSIGN_OR_RETURN(rep.metrics[metric], Rate(r, where));
  }
  return rep;
}

}  // namespace verity::measure
