// A bench-protocol command of known distribution, for testing the ledger's
// statistics: each run prints one verity.bench/1 object whose metric is drawn
// from N(mean, (noise x mean)^2) by a generator seeded from --seed and a run
// counter kept in --state (so successive runs differ, reproducibly).
//   fake_bench --mean 1000 | --mean-file F --noise 0.01 --seed 7 --state FILE [--metric M]
//              [--build ID] [--sha HEX | --sha-file F] [--touch FILE] [--fail-after N] [--garbage] [--sleep S]
//              [--guard NAME=MEAN]...  (more metrics, same relative noise: guards for the ledger)
//              [--bytes-per-token B]   (prints "roofline": {"bytes_per_token": B})
//              [--model PATH]          (prints the workload fields: model, dtype f32, threads 1, 8+8 tokens)
//              [--workload W]          (prints "workload": W, the name a bench may state for itself)
//              [--dtype D]             (the dtype those fields name instead of f32)
//              [--backend B]           (prints "backend": B, as verity bench does)
//              [--batch N]             (prints "batch": N, as verity bench --batch does)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  double mean = 1000, noise = 0.01, sleep_s = 0, bytes_per_token = 0;
  unsigned long long seed = 1;
  std::string state, metric = "decode_tok_s", build = "fake-build", sha(64, 'a'), touch, mode, model, stated_workload,
                     dtype = "f32", backend, batch;
  long fail_after = -1;
  std::vector<std::pair<std::string, double>> guards;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--mean") mean = std::atof(next().c_str());
    else if (a == "--mean-file") {
      std::ifstream mf(next());
      if (!(mf >> mean)) {
        std::fprintf(stderr, "fake_bench: unreadable --mean-file\n");
        return 2;
      }
    } else if (a == "--noise") noise = std::atof(next().c_str());
    else if (a == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--state") state = next();
    else if (a == "--metric") metric = next();
    else if (a == "--build") build = next();
    else if (a == "--sha") sha = next();
    else if (a == "--sha-file") {  // the binary a path names changes when it is rebuilt
      std::ifstream sf(next());
      if (!(sf >> sha)) {
        std::fprintf(stderr, "fake_bench: unreadable --sha-file\n");
        return 2;
      }
    } else if (a == "--touch") touch = next();
    else if (a == "--fail-after") fail_after = std::atol(next().c_str());
    else if (a == "--sleep") sleep_s = std::atof(next().c_str());
    else if (a == "--bytes-per-token") bytes_per_token = std::atof(next().c_str());
    else if (a == "--model") model = next();
    else if (a == "--workload") stated_workload = next();
    else if (a == "--dtype") dtype = next();
    else if (a == "--backend") backend = next();
    else if (a == "--batch") batch = next();
    else if (a == "--guard") {
      const std::string g = next();
      const size_t eq = g.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "fake_bench: --guard wants NAME=MEAN\n");
        return 2;
      }
      guards.emplace_back(g.substr(0, eq), std::atof(g.c_str() + eq + 1));
    } else if (a == "--garbage" || a == "--wrong-schema" || a == "--no-metric" || a == "--silent") mode = a;
    else {
      std::fprintf(stderr, "fake_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!touch.empty()) std::ofstream(touch, std::ios::app) << "ran\n";
  long counter = 0;
  if (!state.empty()) {
    std::ifstream in(state);
    in >> counter;
    std::ofstream(state, std::ios::trunc) << counter + 1;
  }
  if (fail_after >= 0 && counter >= fail_after) {
    std::fprintf(stderr, "fake_bench: simulated crash at run %ld\n", counter);
    return 3;
  }
  if (sleep_s > 0) usleep(static_cast<useconds_t>(sleep_s * 1e6));
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<unsigned long long>(counter));
  std::normal_distribution<double> dist(mean, noise * mean);
  double v = dist(rng);
  if (mode == "--silent") return 0;
  if (mode == "--garbage") {
    std::printf("tok/s: %f\n", v);
    return 0;
  }
  if (mode == "--wrong-schema") {
    std::printf("{\"schema\":\"other/1\",\"metrics\":{\"%s\":%f},\"ok\":true}\n", metric.c_str(), v);
    return 0;
  }
  std::string more;
  for (const auto& [name, gmean] : guards) {
    std::normal_distribution<double> gd(gmean, noise * gmean);
    char cell[128];
    std::snprintf(cell, sizeof cell, ",\"%s\":%.6f", name.c_str(), gd(rng));
    more += cell;
  }
  std::string workload;
  if (!model.empty())
    workload =
        ",\"model\":\"" + model + "\",\"dtype\":\"" + dtype + "\",\"threads\":1,\"prompt_tokens\":8,\"gen_tokens\":8";
  if (!stated_workload.empty()) workload += ",\"workload\":" + nlohmann::json(stated_workload).dump();
  if (!backend.empty()) workload += ",\"backend\":" + nlohmann::json(backend).dump();
  if (!batch.empty()) workload += ",\"batch\":" + std::to_string(std::atoi(batch.c_str()));
  char roof[96] = "";
  if (bytes_per_token > 0)
    std::snprintf(roof, sizeof roof, ",\"roofline\":{\"bytes_per_token\":%.1f}", bytes_per_token);
  std::printf(
      "{\"schema\":\"verity.bench/1\",\"build\":{\"id\":\"%s\",\"artifact_sha256\":\"%s\"},"
      "\"metrics\":{\"%s\":%.6f%s}%s%s,\"ok\":true}\n",
      build.c_str(), sha.c_str(), mode == "--no-metric" ? "other_metric" : metric.c_str(), v, more.c_str(), roof,
      workload.c_str());
  return 0;
}
