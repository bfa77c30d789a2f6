#include "job/search_baseline.h"

#include <cmath>
#include <set>

#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

using ::windquant::testing::StatusIs;

constexpr double kTarget = 2.5;
constexpr double kBitsSlack = 1e-9;

// A "perplexity" that the unit table's proxy does not know exactly: units
// of even id matter 5x more than the proxy says, so the Lagrangian plan (the
// proxy's optimum) is not the measured optimum and search can improve on it.
double HiddenPerplexity(const plan::UnitTable& t, const std::vector<int>& a) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double w = static_cast<double>(t.units[i].n()) / static_cast<double>(t.TotalWeights());
    e += w * t.units[i].error[a[i]] * (i % 2 == 0 ? 5.0 : 1.0);
  }
  return std::exp(1.0 + 10.0 * e);
}

TEST(SearchBaselineTest, SpendsExactlyTheEvaluationsWithinTheBudgetAndImproves) {
  const plan::UnitTable t = testing::SyntheticTable(60, 7);
  std::vector<std::vector<int>> measured;
  PlanMeasure measure = [&](const std::vector<int>& a) -> absl::StatusOr<double> {
    measured.push_back(a);
    return HiddenPerplexity(t, a);
  };
  SearchOptions o;
  o.target_bits = kTarget;
  o.evaluations = 80;
  o.seed = 3;
  auto r = SearchPlan(t, o, measure);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->evaluations, 80);
  ASSERT_EQ(measured.size(), 80u);
  // The first plan measured is the Lagrangian plan; no plan is measured twice.
  auto lagrange = search::LagrangePlan(t, kTarget);
  ASSERT_TRUE(lagrange.ok());
  EXPECT_EQ(measured.front(), lagrange->actions);
  EXPECT_EQ(std::set<std::vector<int>>(measured.begin(), measured.end()).size(), 80u);
  for (const auto& a : measured) EXPECT_LE(t.EffectiveBits(a), kTarget + kBitsSlack);
  // The result is the best measured plan, better than the start here.
  EXPECT_DOUBLE_EQ(r->start_ppl, HiddenPerplexity(t, lagrange->actions));
  EXPECT_DOUBLE_EQ(r->selection_ppl, HiddenPerplexity(t, r->actions));
  EXPECT_LT(r->selection_ppl, r->start_ppl);
  EXPECT_GT(r->accepted, 0);
  double best = 1e300;
  for (const auto& a : measured) best = std::min(best, HiddenPerplexity(t, a));
  EXPECT_DOUBLE_EQ(r->selection_ppl, best);
  ASSERT_EQ(r->best_after.size(), 80u);
  for (size_t i = 1; i < r->best_after.size(); ++i) {
    EXPECT_LE(r->best_after[i], r->best_after[i - 1]);
  }
}

TEST(SearchBaselineTest, SameSeedSamePlanOtherSeedOtherPath) {
  const plan::UnitTable t = testing::SyntheticTable(40, 2);
  PlanMeasure measure = [&](const std::vector<int>& a) -> absl::StatusOr<double> {
    return HiddenPerplexity(t, a);
  };
  SearchOptions o;
  o.target_bits = kTarget;
  o.evaluations = 30;
  auto a = SearchPlan(t, o, measure);
  auto b = SearchPlan(t, o, measure);
  o.seed = 1;
  auto c = SearchPlan(t, o, measure);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->actions, b->actions);
  EXPECT_EQ(a->best_after, b->best_after);
  EXPECT_NE(a->best_after, c->best_after);
}

TEST(SearchBaselineTest, ErrorsNameTheFlagAndMeasureErrorsPropagate) {
  const plan::UnitTable t = testing::SyntheticTable(10, 1);
  PlanMeasure ok = [](const std::vector<int>&) -> absl::StatusOr<double> { return 2.0; };
  SearchOptions o;
  o.target_bits = kTarget;
  o.evaluations = 0;
  EXPECT_THAT(SearchPlan(t, o, ok), StatusIs(absl::StatusCode::kInvalidArgument, "--evals"));
  o.evaluations = 5;
  o.target_bits = 0.5;
  EXPECT_THAT(SearchPlan(t, o, ok), StatusIs(absl::StatusCode::kInvalidArgument, "--bits"));
  o.target_bits = kTarget;
  PlanMeasure broken = [](const std::vector<int>&) -> absl::StatusOr<double> {
    return absl::InternalError("model broke");
  };
  EXPECT_THAT(SearchPlan(t, o, broken), StatusIs(absl::StatusCode::kInternal, "model broke"));
}

// Units away from their 16-bit action.
int Moved(const std::vector<int>& a) {
  int d = 0;
  for (int x : a) d += x != 0;
  return d;
}

// A trap for local search: at a budget every plan fits (all units start at
// 16 bits, moves only go down, nothing is repaired), the start is better than
// every plan 1-4 moves away and worse than every plan farther away.
double Trap(const std::vector<int>& a) {
  const int d = Moved(a);
  return d == 0 ? 10.0 : (d <= 4 ? 20.0 : 5.0);
}

TEST(SearchBaselineTest, RestartsLeaveALocalOptimumThePlainSearchStaysOn) {
  const plan::UnitTable t = testing::SyntheticTable(30, 5);
  auto start = search::LagrangePlan(t, 17.0);
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_EQ(Moved(start->actions), 0) << "the start must be the all-16-bit plan";
  PlanMeasure measure = [](const std::vector<int>& a) -> absl::StatusOr<double> { return Trap(a); };
  SearchOptions o;
  o.target_bits = 17.0;
  o.evaluations = 40;
  o.seed = 4;
  auto plain = SearchPlan(t, o, measure);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->evaluations, 40);
  EXPECT_EQ(plain->restarts, 0);
  EXPECT_EQ(plain->accepted, 0);
  EXPECT_DOUBLE_EQ(plain->selection_ppl, 10.0);
  o.restart_after = 8;  // kick_moves 0: 2 x max_moves = 8 units moved
  auto restarted = SearchPlan(t, o, measure);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->evaluations, 40);
  EXPECT_GE(restarted->restarts, 1);
  EXPECT_DOUBLE_EQ(restarted->selection_ppl, 5.0);
  EXPECT_EQ(Trap(restarted->actions), 5.0);
  EXPECT_GT(Moved(restarted->actions), 4);
}

TEST(SearchBaselineTest, RestartsEveryRStaleProposalsWithinTheBudget) {
  const plan::UnitTable t = testing::SyntheticTable(40, 3);
  std::vector<std::vector<int>> measured;
  // Nothing ever improves: the search restarts after every R measured proposals.
  PlanMeasure flat = [&](const std::vector<int>& a) -> absl::StatusOr<double> {
    measured.push_back(a);
    return 2.0;
  };
  SearchOptions o;
  o.target_bits = kTarget;
  o.evaluations = 25;
  o.restart_after = 5;
  o.seed = 7;
  auto r = SearchPlan(t, o, flat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->evaluations, 25);
  EXPECT_EQ(r->restarts, (25 - 1) / (5 + 1));
  EXPECT_EQ(r->accepted, 0);
  EXPECT_EQ(std::set<std::vector<int>>(measured.begin(), measured.end()).size(), 25u);
  for (const auto& a : measured) EXPECT_LE(t.EffectiveBits(a), kTarget + kBitsSlack);
  o.restart_after = -1;
  EXPECT_THAT(SearchPlan(t, o, flat),
              StatusIs(absl::StatusCode::kInvalidArgument, "--restart-after"));
  o.restart_after = 5;
  o.screen = -2;
  EXPECT_THAT(SearchPlan(t, o, flat), StatusIs(absl::StatusCode::kInvalidArgument, "--screen"));
}

// Screening by the reward model spends the same real evaluations and, on a
// perplexity the model can learn (additive per unit and action), finds
// better plans than the unscreened search of the same seeds.
TEST(SearchBaselineTest, ScreenedSearchSameBudgetBetterPlans) {
  const plan::UnitTable t = testing::SyntheticTable(60, 7);
  double plain_sum = 0, screened_sum = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    std::vector<std::vector<int>> measured;
    PlanMeasure measure = [&](const std::vector<int>& a) -> absl::StatusOr<double> {
      measured.push_back(a);
      return HiddenPerplexity(t, a);
    };
    SearchOptions o;
    o.target_bits = kTarget;
    o.evaluations = 60;
    o.seed = seed;
    o.restart_after = kSearchRestartAfter;
    auto plain = SearchPlan(t, o, measure);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(plain->screened, 0);
    EXPECT_EQ(plain->screen, 0);
    measured.clear();
    o.screen = kSearchScreen;
    auto screened = SearchPlan(t, o, measure);
    ASSERT_TRUE(screened.ok()) << screened.status();
    EXPECT_EQ(screened->evaluations, 60);
    ASSERT_EQ(measured.size(), 60u);
    EXPECT_EQ(std::set<std::vector<int>>(measured.begin(), measured.end()).size(), 60u);
    for (const auto& a : measured) EXPECT_LE(t.EffectiveBits(a), kTarget + kBitsSlack);
    EXPECT_GT(screened->screened, 0);
    EXPECT_EQ(screened->screen, kSearchScreen);
    EXPECT_DOUBLE_EQ(screened->selection_ppl, HiddenPerplexity(t, screened->actions));
    plain_sum += plain->selection_ppl;
    screened_sum += screened->selection_ppl;
  }
  EXPECT_LT(screened_sum, plain_sum);
}

// The screened rows spend RL's screening budget: as many reward-model-scored
// samples per real evaluation as RL's actors draw per measured episode.
TEST(SearchBaselineTest, TheScreenedSearchScreensAsManyAsRlsActors) {
  EXPECT_EQ(ScreenedSearchScreen(128), 128);
  EXPECT_EQ(ScreenedSearchScreen(2), 2);
  EXPECT_EQ(ScreenedSearchScreen(1), kSearchScreen);  // RL does not screen
  EXPECT_EQ(ScreenedSearchScreen(0), kSearchScreen);
  EXPECT_EQ(ProductSearchOptions(2.0, 10, 1, ScreenedSearchScreen(128)).screen, 128);
  EXPECT_STREQ(ProductSearchName(128), "screened-search");
  EXPECT_STREQ(ProductSearchName(0), "search");
}

}  // namespace
}  // namespace windquant::job
