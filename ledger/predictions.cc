// The prediction track record; see predictions.h.
#include "ledger/predictions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/stats.h"

namespace verity::ledger {
namespace {

// The latest score of the change's latest run that is not retracted and measured a gain.
const ScoreView* MeasuredScore(const ChangeView& c, const RunView** run) {
  for (auto r = c.runs.rbegin(); r != c.runs.rend(); ++r) {
    if (r->retracted()) continue;
    for (auto s = r->scores.rbegin(); s != r->scores.rend(); ++s)
      if (s->gain && std::isfinite(*s->gain)) {
        *run = &*r;
        return &*s;
      }
  }
  return nullptr;
}

}  // namespace

PredictionsView PredictionRecord(const std::vector<ChangeView>& changes) {
  PredictionsView v;
  std::map<std::string, std::vector<const PredictionEntry*>> by_author;
  for (const auto& c : changes) {
    if (c.change.kind == Kind::kRevert || !c.change.predict_pct) continue;
    const RunView* run = nullptr;
    const ScoreView* s = MeasuredScore(c, &run);
    if (!s) continue;
    PredictionEntry e;
    e.change = c.change.id;
    e.run = run->id;
    e.author = c.change.author;
    e.title = c.change.title;
    e.verdict = VerdictName(s->verdict);
    e.predicted = *c.change.predict_pct / 100.0;
    e.measured = *s->gain;
    for (const auto& x : run->scores) e.surprise = e.surprise || x.surprise || x.verdict == Verdict::kHeldSurprise;
    v.entries.push_back(e);
  }
  for (const auto& e : v.entries) by_author[e.author].push_back(&e);
  for (const auto& [author, es] : by_author) {
    AuthorRecord a;
    a.author = author;
    std::vector<double> abs_err;
    double sum = 0;
    for (const PredictionEntry* e : es) {
      a.changes++;
      sum += e->measured - e->predicted;
      abs_err.push_back(std::fabs(e->measured - e->predicted));
      const double ratio = e->predicted != 0 ? e->measured / e->predicted : INFINITY;
      a.within_2x += ratio >= 0.5 && ratio <= 2.0;
      a.surprises += e->surprise;
    }
    a.bias = sum / a.changes;
    a.median_abs_error = Median(abs_err);
    v.authors.push_back(a);
  }
  return v;
}

nlohmann::json ToJson(const PredictionsView& v) {
  nlohmann::json entries = nlohmann::json::array(), authors = nlohmann::json::array();
  for (const auto& e : v.entries)
    entries.push_back({{"change", e.change},
                       {"run", e.run},
                       {"author", e.author},
                       {"title", e.title},
                       {"verdict", e.verdict},
                       {"predicted", e.predicted},
                       {"measured", e.measured},
                       {"surprise", e.surprise}});
  for (const auto& a : v.authors)
    authors.push_back({{"author", a.author},
                       {"changes", a.changes},
                       {"bias", a.bias},
                       {"median_abs_error", a.median_abs_error},
                       {"within_2x", a.within_2x},
                       {"surprises", a.surprises}});
  return {{"predictions", entries}, {"authors", authors}, {"examined", v.entries.size()}};
}

std::string ToText(const PredictionsView& v) {
  auto unsigned_pct = [](double f) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f%%", 100.0 * f);
    return std::string(b);
  };
  std::string o;
  for (const auto& a : v.authors)
    o += "predictions: " + terminal::Visible(a.author) + ": " + std::to_string(a.changes) + " scored, bias " +
         PctText(a.bias) + " (measured - predicted), median |error| " + unsigned_pct(a.median_abs_error) +
         ", within 2x " + std::to_string(a.within_2x) + " of " + std::to_string(a.changes) + ", surprises " +
         std::to_string(a.surprises) + "\n";
  return o + "predictions: " + std::to_string(v.entries.size()) + " predicted change" +
         (v.entries.size() == 1 ? "" : "s") + " with a measured gain, " + std::to_string(v.authors.size()) + " author" +
         (v.authors.size() == 1 ? "" : "s") + "\n";
}

}  // namespace verity::ledger
