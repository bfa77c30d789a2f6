#include "job/plan_measurement.h"

#include <cmath>

#include "gtest/gtest.h"

namespace windquant::job {
namespace {

MeasuredPlan Plan(const std::string& name, double bits, double whole, double heldout) {
  MeasuredPlan m;
  m.name = name;
  m.bits = bits;
  m.whole_ppl = whole;
  m.heldout_ppl = heldout;
  return m;
}

TEST(PickWinnerTest, LowestHeldOutPerplexityWithinTheTarget) {
  const std::vector<MeasuredPlan> plans = {
      Plan("rl", 2.0, 9.0, 12.0), Plan("greedy", 2.0, 8.0, 13.0), Plan("uniform-4", 4.1, 5.0, 6.0)};
  EXPECT_EQ(PickWinner(plans, 2.0, /*have_heldout=*/true), "rl");
  EXPECT_EQ(PickWinner(plans, 2.0, /*have_heldout=*/false), "greedy");  // whole text
}

TEST(PickWinnerTest, TieGoesToTheBaselineAndOverBudgetPlansNeverWin) {
  const std::vector<MeasuredPlan> plans = {Plan("rl", 2.0, 9.0, 12.0),
                                           Plan("lagrange", 2.0 + kSameBitsTolerance, 9.0, 12.0),
                                           Plan("greedy", 2.0 + 2 * kSameBitsTolerance, 1.0, 1.0)};
  EXPECT_EQ(PickWinner(plans, 2.0, true), "lagrange");
  EXPECT_EQ(PickWinner({Plan("greedy", 2.5, 1.0, 1.0)}, 2.0, true), "");
}

TEST(PickReturnedTest, LowestSelectionPerplexityAmongTheMethodsWithinTheTarget) {
  auto selected = [](const std::string& name, double bits, double selection) {
    MeasuredPlan m = Plan(name, bits, 1.0, 1.0);
    m.selection_ppl = selection;
    return m;
  };
  std::vector<MeasuredPlan> plans = {selected("rl", 2.0, 9.0), selected("greedy", 2.0, 1.0),
                                     selected("search", 1.99, 8.0),
                                     selected("screened-search", 2.001, 2.0)};
  // greedy is not a candidate; screened-search is over the target.
  EXPECT_EQ(PickReturned(plans, {"rl", "search", "screened-search"}, 2.0), 2);
  plans[2].selection_ppl = 9.0;  // a tie goes to the earlier candidate
  EXPECT_EQ(PickReturned(plans, {"rl", "search", "screened-search"}, 2.0), 0);
  plans[0].selection_ppl = std::nan("");
  EXPECT_EQ(PickReturned(plans, {"rl", "search"}, 2.0), 2);
  EXPECT_EQ(PickReturned(plans, {"lagrange"}, 2.0), -1);
}

TEST(HasHeldOutTest, NeedsOneWholeWindow) {
  EvaluationSlices s;
  s.heldout.assign(127, 1);
  EXPECT_FALSE(HasHeldOut(s, 128));
  s.heldout.push_back(1);
  EXPECT_TRUE(HasHeldOut(s, 128));
}

}  // namespace
}  // namespace windquant::job
