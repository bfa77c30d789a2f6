#include "job/baseline_plans.h"

#include <string>

#include "common/search/baselines.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"
#include "job/plan_measurement.h"

namespace windquant::job {
namespace {

// The uniform plans of BaselinesAt bracket the target: the most bits within it, the
// fewest above it, each named after its action and uniform over every unit.
TEST(BaselinesAtTest, UniformPlansBracketTheTarget) {
  const plan::UnitTable t = testing::SyntheticTable(30, 3);
  double bits[plan::kNumActions];
  for (plan::Action a : plan::kAllActions) {
    bits[plan::ActionIndex(a)] = t.EffectiveBits(search::UniformPlan(t, a).actions);
  }
  // A target between the 2-bit and the 3-bit uniform plans' bits.
  const int i2 = plan::ActionIndex(plan::Action::k2), i3 = plan::ActionIndex(plan::Action::k3);
  ASSERT_LT(bits[i2], bits[i3]);
  const double target = 0.5 * (bits[i2] + bits[i3]);
  auto baselines = BaselinesAt(t, target, /*seed=*/0);
  ASSERT_TRUE(baselines.ok()) << baselines.status();
  ASSERT_GE(baselines->size(), 2u);
  EXPECT_EQ((*baselines)[0].first, "uniform-2");
  EXPECT_EQ((*baselines)[1].first, "uniform-3");
  for (int k : {0, 1}) {
    const std::vector<int>& actions = (*baselines)[k].second.actions;
    for (int a : actions) EXPECT_EQ(a, k == 0 ? i2 : i3);
  }
  EXPECT_LE(t.EffectiveBits((*baselines)[0].second.actions), target + kSameBitsTolerance);
  EXPECT_GT(t.EffectiveBits((*baselines)[1].second.actions), target + kSameBitsTolerance);
  // The rest follow at the target, each within it.
  std::vector<std::string> names;
  for (size_t k = 2; k < baselines->size(); ++k) {
    names.push_back((*baselines)[k].first);
    EXPECT_LE(t.EffectiveBits((*baselines)[k].second.actions), target + kSameBitsTolerance);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"greedy", "lagrange", "random"}));
}

}  // namespace
}  // namespace windquant::job
