// E-Divisive means over main's measured medians; see drift.h.
#include "ledger/drift.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "base/median.h"
#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/ledger.h"
#include "ledger/score.h"
#include "ledger/stats.h"

namespace verity::ledger {
namespace {

// Counts and sums of the values inserted so far, by rank (a Fenwick tree):
// how many lie below a rank, and their sum, in O(log n).
class RankSums {
 public:
  explicit RankSums(int n) : count_(n + 1, 0), sum_(n + 1, 0.0) {}
  void Add(int rank, int count, double value) {
    for (int i = rank + 1; i < static_cast<int>(count_.size()); i += i & -i) {
      count_[i] += count;
      sum_[i] += count * value;
    }
  }
  // The count and sum of the values at ranks < rank.
  std::pair<int, double> Below(int rank) const {
    int c = 0;
    double s = 0;
    for (int i = rank; i > 0; i -= i & -i) {
      c += count_[i];
      s += sum_[i];
    }
    return {c, s};
  }

 private:
  std::vector<int> count_;
  std::vector<double> sum_;
};

}  // namespace

// Q = m n / (m + n) * (2/(mn) sum|x-y| - 1/C(m,2) sum|x-x'| - 1/C(n,2) sum|y-y'|)
// at every tau. Moving point p from the right side to the left changes each
// sum by p's distances to one side: sum over a side of |v - x| is
// (count below) v - (sum below) + (sum above) - (count above) v, read from a
// Fenwick tree of that side by rank. (The O(n^2) form, one row of distances
// per move, cost 171 s for a 10k-point report: 499 permutations per split.)
namespace {

// y_in centred on its mean: distances do not move with the values, and
// centred, the sums cancel less.
std::vector<double> Centred(const std::vector<double>& y_in) {
  const int n = static_cast<int>(y_in.size());
  double mean = 0;
  for (double v : y_in) mean += v / n;
  std::vector<double> y(n);
  for (int i = 0; i < n; i++) y[i] = y_in[i] - mean;
  return y;
}

// The indices of y by (value, index): the order the split walks the ranks in.
// Its arithmetic depends on it (the Fenwick sums), so every caller must give
// exactly this order.
std::vector<int> ValueOrder(const std::vector<double>& y) {
  std::vector<int> order(y.size());
  for (size_t i = 0; i < y.size(); i++) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return y[a] < y[b] || (y[a] == y[b] && a < b); });
  return order;
}

// BestEnergySplit of the centred y, whose ValueOrder is `order`.
EnergySplit SplitOrdered(const std::vector<double>& y, const std::vector<int>& order, int min_segment) {
  const int n = static_cast<int>(y.size());
  EnergySplit best;
  std::vector<int> rank(n);
  for (int k = 0; k < n; k++) rank[order[k]] = k;
  RankSums left(n), right(n);
  double total = 0, within_right = 0;
  for (int k = 0; k < n; k++) {
    within_right += y[order[k]] * (2.0 * k - n + 1);  // each value's signed share of the pairwise distances
    right.Add(k, 1, y[order[k]]);
    total += y[order[k]];
  }
  double within_left = 0, between = 0, left_total = 0, right_total = total;
  auto distances = [](const RankSums& side, int side_count, double side_total, int r, double v) {
    const auto [below, below_sum] = side.Below(r);
    return below * v - below_sum + (side_total - below_sum) - (side_count - below) * v;
  };
  for (int tau = 1; tau < n; tau++) {
    const int p = tau - 1, r = rank[p];
    const double v = y[p];
    right.Add(r, -1, v);
    right_total -= v;
    const double to_right = distances(right, n - tau, right_total, r, v);
    const double to_left = distances(left, tau - 1, left_total, r, v);
    left.Add(r, 1, v);
    left_total += v;
    within_right -= to_right;
    between += to_right - to_left;
    within_left += to_left;
    const int m = tau, rest = n - tau;
    if (m < min_segment || rest < min_segment) continue;
    const double e = 2.0 * between / (static_cast<double>(m) * rest) - within_left / (m * (m - 1) / 2.0) -
                     within_right / (rest * (rest - 1) / 2.0);
    const double q = static_cast<double>(m) * rest / n * e;
    if (q > best.q) best = {tau, q};
  }
  return best;
}

}  // namespace

EnergySplit BestEnergySplit(const std::vector<double>& y_in, int min_segment) {
  const int n = static_cast<int>(y_in.size());
  if (n < 2 * min_segment || n < 2) return {};
  const std::vector<double> y = Centred(y_in);
  return SplitOrdered(y, ValueOrder(y), min_segment);
}

// Each
// permutation is BestEnergySplit of the shuffled values, bit for bit, without
// its sort: the shuffle moves indices (std::shuffle's swaps do not depend on
// what is swapped, so z[i] = y[perm[i]] is the value shuffle), and z's value
// order is y's, read through the inverse permutation. Centring is monotonic,
// so that order is non-decreasing in z's centred values; runs of equal
// centred values get their positions put in order, as ValueOrder's
// tie-break does (in the test's series their order never changed a bit, but
// the Fenwick sums' rounding does not promise that).
double SplitPValue(const std::vector<double>& y, double q, const DriftOptions& o, std::mt19937_64& rng,
                   double stop_at) {
  const int n = static_cast<int>(y.size());
  int at_least = 0;
  auto decided = [&] { return (at_least + 1.0) / (o.permutations + 1.0) >= stop_at; };
  if (n < 2 * o.min_segment || n < 2) {  // no split to score (the shuffles still draw, as they always did)
    std::vector<double> z = y;
    for (int k = 0; k < o.permutations; k++) {
      std::shuffle(z.begin(), z.end(), rng);
      if (BestEnergySplit(z, o.min_segment).q < q) continue;
      at_least++;
      if (decided()) break;
    }
    return (at_least + 1.0) / (o.permutations + 1.0);
  }
  const std::vector<int> y_order = ValueOrder(y);
  std::vector<int> perm(n), inv(n), order(n);
  for (int i = 0; i < n; i++) perm[i] = i;
  std::vector<double> z(n);
  for (int k = 0; k < o.permutations; k++) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < n; i++) z[i] = y[perm[i]], inv[perm[i]] = i;
    const std::vector<double> zc = Centred(z);
    for (int r = 0; r < n; r++) order[r] = inv[y_order[r]];
    for (int r = 0; r < n;) {
      int e = r + 1;
      while (e < n && zc[order[e]] == zc[order[r]]) e++;
      if (e - r > 1) std::sort(order.begin() + r, order.begin() + e);
      r = e;
    }
    if (SplitOrdered(zc, order, o.min_segment).q < q) continue;
    at_least++;
    if (decided()) break;
  }
  return (at_least + 1.0) / (o.permutations + 1.0);
}

std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& x, const DriftOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<int> cuts = {0, static_cast<int>(x.size())};  // segment boundaries
  std::vector<ChangePoint> found;
  // Hierarchically: test the strongest split among the current segments;
  // stop at the first that is not significant.
  while (true) {
    ChangePoint best;
    double best_q = -INFINITY;
    int best_segment = -1;
    for (size_t s = 0; s + 1 < cuts.size(); s++) {
      std::vector<double> y(x.begin() + cuts[s], x.begin() + cuts[s + 1]);
      const EnergySplit sp = BestEnergySplit(y, o.min_segment);
      if (sp.tau < 0 || sp.q <= best_q) continue;
      best_q = sp.q;
      best_segment = static_cast<int>(s);
      best.index = cuts[s] + sp.tau;
      best.statistic = sp.q;
    }
    if (best_segment < 0) break;
    std::vector<double> y(x.begin() + cuts[best_segment], x.begin() + cuts[best_segment + 1]);
    best.p_value = SplitPValue(y, best_q, o, rng, o.alpha);
    if (!(best.p_value < o.alpha)) break;
    found.push_back(best);
    cuts.insert(std::upper_bound(cuts.begin(), cuts.end(), best.index), best.index);
  }
  std::sort(found.begin(), found.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  // Each step is stated between the final segments either side of it.
  for (auto& c : found) {
    auto at = std::find(cuts.begin(), cuts.end(), c.index);
    c.before_median = Median(std::vector<double>(x.begin() + *(at - 1), x.begin() + c.index));
    c.after_median = Median(std::vector<double>(x.begin() + c.index, x.begin() + *(at + 1)));
  }
  return found;
}

size_t DriftView::points() const {
  size_t n = 0;
  for (const auto& s : series) n += s.points.size();
  return n;
}

size_t DriftView::open_regressions() const {
  size_t n = 0;
  for (const auto& s : series)
    for (const auto& c : s.changes) n += c.open();
  return n;
}

size_t DriftView::change_points() const {
  size_t n = 0;
  for (const auto& s : series) n += s.changes.size();
  return n;
}

namespace {

using SeriesKey = std::tuple<std::string, std::string, std::string>;  // metric, box, workload

// A run drift reads, and its timed samples' values by side.
struct SeriesRun {
  int64_t change = 0;
  SeriesKey key;
  bool head_is_main = false;  // its latest score accepted it: the head is main afterwards
  std::vector<double> base, head;
  std::string base_at, head_at;  // each side's first timed sample
};

// Main's measured points by series: every run that is not retracted (of the
// metric and box asked for, "" = all), its base side's median and, when its
// latest score accepted it, its head side's; a run's base comes before its
// head. Two reads: the runs (thousands of rows), then every sample once in
// recording order without keeping them (a million rows; joining them to their
// runs per sample cost most of a report).
Result<std::map<SeriesKey, std::vector<DriftPoint>>> LoadMainPoints(Db& d, const std::string& metric,
                                                                    const std::string& box) {
  std::map<int64_t, SeriesRun> runs;
  VERITY_ASSIGN_OR_RETURN(
      auto rows, d.Query("SELECT r.id, r.change_id, c.metric, b.fingerprint, COALESCE(w.workload, ''), "
                         " (SELECT sc.verdict FROM scores sc WHERE sc.run_id = r.id ORDER BY sc.id DESC LIMIT 1) "
                         "FROM runs r JOIN changes c ON c.id = r.change_id JOIN boxes b ON b.id = r.box_id "
                         "LEFT JOIN run_workloads w ON w.run_id = r.id "
                         "WHERE NOT EXISTS (SELECT 1 FROM retractions t WHERE t.run_id = r.id) "
                         "AND (? = '' OR c.metric = ?) AND (? = '' OR b.fingerprint = ?)",
                         {metric, metric, box, box}));
  for (const auto& r : rows) {
    SeriesRun& run = runs[AsInt(r[0])];
    run.change = AsInt(r[1]);
    run.key = {AsText(r[2]), AsText(r[3]), AsText(r[4])};
    run.head_is_main = !IsNull(r[5]) && AsText(r[5]) == "accepted";
  }
  auto last = runs.end();
  VERITY_RETURN_IF_ERROR(d.ForEachRow("SELECT run_id, side, value, taken_at FROM samples WHERE round > 0 ORDER BY id",
                                      {}, [&](const Row& s) {
                                        const int64_t id = AsInt(s[0]);
                                        if (last == runs.end() || last->first != id) last = runs.find(id);
                                        if (last == runs.end()) return OkStatus();
                                        SeriesRun& run = last->second;
                                        const std::string* side = std::get_if<std::string>(&s[1]);
                                        const bool head = side && *side == "head";
                                        if (head && !run.head_is_main) return OkStatus();
                                        std::vector<double>& vals = head ? run.head : run.base;
                                        if (vals.empty()) (head ? run.head_at : run.base_at) = AsText(s[3]);
                                        vals.push_back(AsDouble(s[2]));
                                        return OkStatus();
                                      }));
  std::map<SeriesKey, std::vector<DriftPoint>> points;
  for (const auto& [id, run] : runs) {
    auto add = [&, id = id](const std::vector<double>& vals, const char* side, const std::string& at) {
      if (vals.empty()) return;
      DriftPoint p;
      p.run = id;
      p.change = run.change;
      p.side = side;
      p.at = at;
      p.value = Median(vals);
      points[run.key].push_back(std::move(p));
    };
    add(run.base, "base", run.base_at);
    add(run.head, "head", run.head_at);
  }
  return points;
}

}  // namespace

Result<DriftView> LoadDrift(Db& d, const std::string& metric, const std::string& box, const DriftOptions& o) {
  DriftView v;
  v.options = o;
  VERITY_ASSIGN_OR_RETURN(auto points, LoadMainPoints(d, metric, box));
  // Each regression's latest triage row.
  VERITY_ASSIGN_OR_RETURN(auto tri, d.Query("SELECT t.id, t.key, t.state, t.by, t.reason, t.fixed_by_change, t.at "
                                            "FROM triage t ORDER BY t.id"));
  std::map<std::string, TriageState> latest;
  for (const auto& t : tri) {
    TriageState s;
    s.id = AsInt(t[0]);
    s.state = AsText(t[2]);
    s.by = AsText(t[3]);
    s.reason = AsText(t[4]);
    if (!IsNull(t[5])) s.fixed_by_change = AsInt(t[5]);
    s.at = AsText(t[6]);
    latest[AsText(t[1])] = s;
  }
  VERITY_ASSIGN_OR_RETURN(
      auto changes,
      d.Query("SELECT c.id, c.title, (SELECT s.verdict FROM scores s JOIN runs r ON r.id = s.run_id "
              "WHERE r.change_id = c.id ORDER BY s.id DESC LIMIT 1), "
              "(SELECT group_concat(r.id) FROM runs r WHERE r.change_id = c.id) FROM changes c ORDER BY c.id"));
  for (auto& [key, pts] : points) {
    DriftSeries s;
    std::tie(s.metric, s.box, s.workload) = key;
    std::vector<double> x;
    for (const auto& p : pts) x.push_back(p.value);
    s.points = pts;
    for (const ChangePoint& cp : DetectChangePoints(x, o)) {
      DriftChange c;
      c.point = cp;
      c.before = pts[cp.index - 1];
      c.after = pts[cp.index];
      c.key = "drift/" + s.metric + "/" + s.box + "/" + s.workload + "/" + std::to_string(c.before.run) + "-" +
              std::to_string(c.after.run);
      c.regression = HigherIsBetter(s.metric) ? cp.step() < 0 : cp.step() > 0;
      if (auto it = latest.find(c.key); it != latest.end()) c.triage = it->second;
      // Runs whose change can explain the step: after the point before (its
      // own change already included when that point is a head) up to the
      // point after (its change included only when that point is a head).
      const int64_t lo = c.before.run + (c.before.side == "head" ? 1 : 0);
      const int64_t hi = c.after.run - (c.after.side == "base" ? 1 : 0);
      for (const auto& ch : changes) {
        bool in = false;
        std::string ids = IsNull(ch[3]) ? "" : AsText(ch[3]);
        for (size_t at = 0; at < ids.size();) {
          size_t comma = ids.find(',', at);
          const int64_t run = std::stoll(ids.substr(at, comma - at));
          in = in || (run >= lo && run <= hi);
          at = comma == std::string::npos ? ids.size() : comma + 1;
        }
        if (in) c.changes.push_back({AsInt(ch[0]), AsText(ch[1]), IsNull(ch[2]) ? "unscored" : AsText(ch[2])});
      }
      s.changes.push_back(c);
    }
    v.series.push_back(std::move(s));
  }
  return v;
}

Result<int64_t> RecordTriage(Db& d, const std::string& key, const std::string& state, const std::string& by,
                             const std::string& reason, std::optional<int64_t> fixed_by_change) {
  if (state != "acknowledged" && state != "investigating" && state != "wontfix" && state != "fixed")
    return Status::Error("triage: --state " + state + " is not acknowledged, investigating, wontfix or fixed");
  if (by.empty()) return Status::Error("triage: --by is required (who changes the state)");
  if (reason.empty()) return Status::Error("triage: --reason is required");
  if ((state == "fixed") != fixed_by_change.has_value())
    return Status::Error(state == "fixed" ? "triage: --state fixed needs --fixed-by CHANGE (the change that fixed it)"
                                          : "triage: --fixed-by goes with --state fixed only");
  VERITY_ASSIGN_OR_RETURN(DriftView v, LoadDrift(d));
  const DriftChange* found = nullptr;
  for (const auto& s : v.series)
    for (const auto& c : s.changes)
      if (c.key == key) found = &c;
  if (!found) return Status::Error("triage: " + key + " names no change point `verity drift` finds in " + d.path());
  if (!found->regression) return Status::Error("triage: " + key + " is an improvement, not a regression");
  if (fixed_by_change) {
    VERITY_ASSIGN_OR_RETURN(auto runs, d.Query("SELECT max(r.id) FROM changes c LEFT JOIN runs r ON r.change_id = c.id "
                                               "WHERE c.id = ?",
                                               {*fixed_by_change}));
    if (runs.empty() || IsNull(runs[0][0]))
      return Status::Error("triage: --fixed-by " + std::to_string(*fixed_by_change) + " is not a measured change");
    if (AsInt(runs[0][0]) <= found->after.run)
      return Status::Error("triage: --fixed-by " + std::to_string(*fixed_by_change) +
                           " was measured before the regression's run " + std::to_string(found->after.run));
  }
  int64_t id = 0;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(
        id, d.InsertSealed("triage", {{"key", key},
                                      {"state", state},
                                      {"by", by},
                                      {"reason", reason},
                                      {"fixed_by_change", fixed_by_change ? Value(*fixed_by_change) : Value()},
                                      {"at", NowUtc()}}));
    return OkStatus();
  }));
  return id;
}

nlohmann::json ToJson(const DriftView& v) {
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : v.series) {
    nlohmann::json cps = nlohmann::json::array();
    for (const auto& c : s.changes) {
      nlohmann::json between = nlohmann::json::array();
      for (const auto& b : c.changes)
        between.push_back({{"change", b.change}, {"title", b.title}, {"verdict", b.verdict}});
      auto point = [](const DriftPoint& p) {
        return nlohmann::json{{"run", p.run}, {"change", p.change}, {"side", p.side}, {"at", p.at}, {"value", p.value}};
      };
      nlohmann::json tri = nullptr;
      if (c.triage)
        tri = {{"state", c.triage->state},
               {"by", c.triage->by},
               {"reason", c.triage->reason},
               {"at", c.triage->at},
               {"fixed_by_change",
                c.triage->fixed_by_change ? nlohmann::json(*c.triage->fixed_by_change) : nlohmann::json()}};
      cps.push_back({{"key", c.key},
                     {"regression", c.regression},
                     {"open", c.open()},
                     {"triage", tri},
                     {"index", c.point.index},
                     {"p_value", c.point.p_value},
                     {"step", c.point.step()},
                     {"before_median", c.point.before_median},
                     {"after_median", c.point.after_median},
                     {"before", point(c.before)},
                     {"after", point(c.after)},
                     {"changes_between", between}});
    }
    series.push_back({{"metric", s.metric},
                      {"box", s.box},
                      {"workload", s.workload},
                      {"points", s.points.size()},
                      {"change_points", cps}});
  }
  return {{"method", "e-divisive means, permutation test"},
          {"alpha", v.options.alpha},
          {"permutations", v.options.permutations},
          {"min_segment", v.options.min_segment},
          {"series", series},
          {"points_examined", v.points()},
          {"open_regressions", v.open_regressions()},
          {"change_points", v.change_points()}};
}

std::string ToText(const DriftView& v) {
  std::string o;
  for (const auto& s : v.series) {
    for (const auto& c : s.changes) {
      std::string between;
      for (const auto& b : c.changes) {
        if (!between.empty()) between += ", ";
        between += "#";
        between += std::to_string(b.change);
        between += " '" + terminal::Visible(b.title) + "' (" + b.verdict + ")";
      }
      // Names and triage text are the submitters': shown with their controls visible.
      o += "drift: " + terminal::Visible(s.metric) + " on box " + terminal::Visible(s.box) +
           (s.workload.empty() ? "" : " workload '" + terminal::Visible(s.workload) + "'") + ": " +
           PctText(c.point.step()) + " (" + NumText(c.point.before_median) + " -> " + NumText(c.point.after_median) +
           ", p " + NumText(c.point.p_value) + ") between run " + std::to_string(c.before.run) + " " + c.before.side +
           " and run " + std::to_string(c.after.run) + " " + c.after.side +
           "; changes recorded between: " + (between.empty() ? "none" : between) + "; " +
           (c.regression ? "regression" : "improvement") +
           (c.triage ? ", " + c.triage->state + " by " + terminal::Visible(c.triage->by) + ": " +
                           terminal::Visible(c.triage->reason)
                     : std::string(c.regression ? ", not triaged" : "")) +
           " [" + c.key + "]\n";
    }
  }
  const std::string examined = std::to_string(v.series.size()) + " series, " + std::to_string(v.points()) +
                               " points (E-divisive means, alpha " + NumText(v.options.alpha) + ", " +
                               std::to_string(v.options.permutations) + " permutations)";
  if (v.change_points() == 0) return o + "drift: no change point in " + examined + "\n";
  return o + "drift: " + std::to_string(v.change_points()) + " change point" + (v.change_points() == 1 ? "" : "s") +
         " (" + std::to_string(v.open_regressions()) + " open regression" + (v.open_regressions() == 1 ? "" : "s") +
         ") in " + examined + "\n";
}

}  // namespace verity::ledger
