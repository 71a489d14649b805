// The prediction track record (issue 14) over hand-made change views.
#include <gtest/gtest.h>

#include "ledger/predictions.h"

namespace verity::ledger {
namespace {

ChangeView Scored(int64_t id, const std::string& author, double predict_pct, std::optional<double> gain,
                  bool retracted = false, Verdict verdict = Verdict::kNone) {
  ChangeView c;
  c.change.id = id;
  c.change.author = author;
  c.change.title = "change " + std::to_string(id);
  c.change.predict_pct = predict_pct;
  RunView r;
  r.id = 100 + id;
  ScoreView s;
  s.verdict = verdict;
  s.gain = gain;
  r.scores.push_back(s);
  if (retracted) r.retraction = RetractionView{};
  c.runs.push_back(r);
  return c;
}

TEST(Predictions, BiasErrorAndShareWithin2xPerAuthor) {
  std::vector<ChangeView> cs = {
      Scored(1, "ana", 10, 0.12, false, Verdict::kAccepted),      // within 2x, error 2 points
      Scored(2, "ana", 10, 0.30, false, Verdict::kHeldSurprise),  // 3x: outside, a surprise
      Scored(3, "ana", 5, -0.01),                                 // wrong sign: outside
      Scored(4, "bo", 2, 0.02),                                   // exact
      Scored(5, "bo", 2, 0.50, true),                             // retracted: not counted
      Scored(6, "bo", 2, std::nullopt),                           // never measured: not counted
  };
  PredictionsView v = PredictionRecord(cs);
  ASSERT_EQ(v.entries.size(), 4u);
  ASSERT_EQ(v.authors.size(), 2u);
  const AuthorRecord& ana = v.authors[0];
  EXPECT_EQ(ana.author, "ana");
  EXPECT_EQ(ana.changes, 3);
  EXPECT_NEAR(ana.bias, ((0.12 - 0.10) + (0.30 - 0.10) + (-0.01 - 0.05)) / 3, 1e-12);
  EXPECT_NEAR(ana.median_abs_error, 0.06, 1e-12);
  EXPECT_EQ(ana.within_2x, 1);
  EXPECT_EQ(ana.surprises, 1);
  EXPECT_EQ(v.authors[1].changes, 1);
  EXPECT_NEAR(v.authors[1].bias, 0.0, 1e-12);
  EXPECT_EQ(ToText(v).substr(ToText(v).rfind("predictions: ")),
            "predictions: 4 predicted changes with a measured gain, 2 authors\n");
  EXPECT_EQ(ToText(PredictionsView{}), "predictions: 0 predicted changes with a measured gain, 0 authors\n");
}

}  // namespace
}  // namespace verity::ledger
