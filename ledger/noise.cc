// Box noise profiles; see noise.h.
#include "ledger/noise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ledger/format.h"
#include "ledger/ledger.h"
#include "ledger/stats.h"

namespace verity::ledger {
namespace {

// The upper `p` quantile of the standard normal (p in (0, 0.5)), by bisection on erfc.
double NormalUpperQuantile(double p) {
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; i++) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::string Pct(double f) { return PctUnsignedText(f); }

}  // namespace

NoiseProfile SummarizeAA(const std::vector<Round>& rounds, bool higher_is_better) {
  NoiseProfile p;
  p.rounds = static_cast<int>(rounds.size());
  if (rounds.empty()) return p;
  std::vector<double> level;
  for (const Round& r : rounds) {
    p.ratios.push_back(RoundRatio(r, higher_is_better));
    level.push_back((r.b1 + r.b2 + r.h1 + r.h2) / 4.0);
  }
  const double med = Median(p.ratios);
  std::vector<double> dev;
  for (double x : p.ratios) dev.push_back(std::fabs(x - med));
  p.round_mad = Median(dev);
  p.sigma = 1.4826 * p.round_mad;
  for (double d : dev) p.outlier_rounds += p.round_mad > 0 && d > 5.0 * p.round_mad;
  // Drift: the slope of each round's mean level over the round index.
  const double n = static_cast<double>(level.size()), mean_x = (n - 1) / 2.0;
  double sxy = 0, sxx = 0, mean_y = 0;
  for (double y : level) mean_y += y / n;
  for (size_t i = 0; i < level.size(); i++) {
    sxy += (i - mean_x) * (level[i] - mean_y);
    sxx += (i - mean_x) * (i - mean_x);
  }
  const double median_level = Median(level);
  p.drift_per_round = sxx > 0 && median_level > 0 ? sxy / sxx / median_level : 0.0;
  return p;
}

int RoundsToResolve(double sigma, double gate_frac, double alpha) {
  if (!(sigma > 0) || !(gate_frac > 0) || !(alpha > 0 && alpha < 0.5)) return 1;
  const double n = std::pow(NormalUpperQuantile(alpha) * 1.2533 * sigma / gate_frac, 2.0);
  return n > 1e6 ? 1000000 : std::max(1, static_cast<int>(std::ceil(n)));
}

Result<int64_t> RecordNoise(Db& d, int64_t box_id, const NoiseProfile& p) {
  return d.InsertSealed("box_noise", {{"box_id", box_id},
                                      {"metric", p.metric},
                                      {"workload", p.workload},
                                      {"cmd", p.cmd},
                                      {"rounds", int64_t{p.rounds}},
                                      {"ratios", nlohmann::json(p.ratios).dump()},
                                      {"round_mad", p.round_mad},
                                      {"sigma", p.sigma},
                                      {"outlier_rounds", int64_t{p.outlier_rounds}},
                                      {"drift_per_round", p.drift_per_round},
                                      {"recorded_at", NowUtc()}});
}

namespace {

constexpr const char* kSelect =
    "SELECT n.id, b.fingerprint, n.metric, n.workload, n.cmd, n.rounds, n.ratios, n.round_mad, n.sigma, "
    "n.outlier_rounds, n.drift_per_round, n.recorded_at FROM box_noise n JOIN boxes b ON b.id = n.box_id ";

NoiseProfile FromRow(const Row& r) {
  NoiseProfile p;
  p.id = AsInt(r[0]);
  p.box = AsText(r[1]);
  p.metric = AsText(r[2]);
  p.workload = AsText(r[3]);
  p.cmd = AsText(r[4]);
  p.rounds = static_cast<int>(AsInt(r[5]));
  nlohmann::json ratios = nlohmann::json::parse(AsText(r[6]), nullptr, false);
  if (ratios.is_array())
    for (const auto& x : ratios)
      if (x.is_number()) p.ratios.push_back(x.get<double>());
  p.round_mad = AsDouble(r[7]);
  p.sigma = AsDouble(r[8]);
  p.outlier_rounds = static_cast<int>(AsInt(r[9]));
  p.drift_per_round = AsDouble(r[10]);
  p.recorded_at = AsText(r[11]);
  return p;
}

}  // namespace

Result<std::optional<NoiseProfile>> LatestNoise(Db& d, int64_t box_id, const std::string& metric,
                                                const std::string& workload) {
  VERITY_ASSIGN_OR_RETURN(auto rows,
                          d.Query(std::string(kSelect) + "WHERE n.box_id = ? AND n.metric = ? AND n.workload = ? "
                                                         "ORDER BY n.id DESC LIMIT 1",
                                  {box_id, metric, workload}));
  if (rows.empty()) return std::optional<NoiseProfile>();
  return std::optional<NoiseProfile>(FromRow(rows[0]));
}

Result<std::vector<NoiseProfile>> LoadNoiseProfiles(Db& d) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query(std::string(kSelect) + "ORDER BY n.id"));
  std::vector<NoiseProfile> out;
  for (const auto& r : rows) out.push_back(FromRow(r));
  return out;
}

nlohmann::json ToJson(const NoiseProfile& p) {
  return {{"id", p.id},
          {"box", p.box},
          {"metric", p.metric},
          {"workload", p.workload},
          {"cmd", p.cmd},
          {"rounds", p.rounds},
          {"ratios", p.ratios},
          {"round_mad", p.round_mad},
          {"sigma", p.sigma},
          {"outlier_rounds", p.outlier_rounds},
          {"drift_per_round", p.drift_per_round},
          {"recorded_at", p.recorded_at}};
}

std::string NoiseText(const NoiseProfile& p) {
  char drift[48];
  std::snprintf(drift, sizeof drift, "%+.3f%%/round", 100.0 * p.drift_per_round);
  return "per-round sigma " + Pct(p.sigma) + " (MAD " + Pct(p.round_mad) + "), " + std::to_string(p.outlier_rounds) +
         " outlier round" + (p.outlier_rounds == 1 ? "" : "s") + " of " + std::to_string(p.rounds) + ", drift " + drift;
}

}  // namespace verity::ledger
