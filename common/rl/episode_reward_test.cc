#include "common/rl/episode_reward.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

LagrangeOptions Prices(const char* prices, double epsilon = 0.05) {
  LagrangeOptions o;
  o.prices = prices;
  o.epsilon = epsilon;
  return o;
}

TEST(EpisodeEndRewardTest, MatchesFormula) {
  EnvironmentOptions env;
  env.bit_reduction_weight = 2.0;
  env.loss_penalty_weight = 3.0;
  env.violation_penalty_weight = 5.0;
  env.ppl_penalty_weight = 0.5;
  PlanEvaluation e;
  e.effective_bits = 2.25;
  e.loss_increase = 0.1;
  e.relative_ppl_increase = 0.4;
  const EpisodeReward r = EpisodeEndReward(env, e, 1.5, 2.0);
  EXPECT_DOUBLE_EQ(r.bit_reduction, (16 - 2.25) / 16);
  EXPECT_DOUBLE_EQ(r.violation, 0.25);
  EXPECT_NEAR(r.total, 2.0 * (13.75 / 16) - 3.0 * 0.1 - 5.0 * 0.25 - 0.5 * 1.5 * 0.4, 1e-12);
  // lambda prices the bits over the target instead of scaling d.
  EXPECT_NEAR(EpisodeEndReward(env, e, 1.5, 2.0, Prices("budget")).total,
              2.0 * (13.75 / 16) - 3.0 * 0.1 - 5.0 * 0.25 - 0.5 * 0.4 - 1.5 * 0.25, 1e-12);
  e.effective_bits = 1.75;  // under the target: the price is a reward
  EXPECT_NEAR(EpisodeEndReward(env, e, 1.5, 2.0, Prices("budget")).total,
              2.0 * (14.25 / 16) - 3.0 * 0.1 - 0.5 * 0.4 + 1.5 * 0.25, 1e-12);
  e.relative_ppl_increase = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 1.5, 2.0).total));
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 1.5, 2.0, Prices("budget")).total));
}

}  // namespace
}  // namespace windquant::rl

namespace windquant::rl {
namespace {

// The quality-target mode: R = w_bits (16 - bits) / 16 - w_viol max(0, bits - target)
// - lambda (d - epsilon); the calibration loss and ppl_penalty_weight take no part.
TEST(EpisodeEndRewardTest, QualityTargetPricesTheDegradationOverEpsilon) {
  EnvironmentOptions env;
  env.bit_reduction_weight = 2.0;
  env.loss_penalty_weight = 3.0;
  env.violation_penalty_weight = 5.0;
  env.ppl_penalty_weight = 0.5;
  PlanEvaluation e;
  e.effective_bits = 3.5;
  e.loss_increase = 0.1;
  e.relative_ppl_increase = 0.05;
  const LagrangeOptions target = Prices("target", 0.02);
  EXPECT_NEAR(EpisodeEndReward(env, e, 4.0, 4.0, target).total,
              2.0 * (12.5 / 16) - 4.0 * (0.05 - 0.02), 1e-12);
  // Within epsilon the price is a reward; lambda 0 leaves the bits saved alone.
  e.relative_ppl_increase = 0.01;
  EXPECT_NEAR(EpisodeEndReward(env, e, 4.0, 4.0, target).total, 2.0 * (12.5 / 16) + 4.0 * 0.01,
              1e-12);
  EXPECT_NEAR(EpisodeEndReward(env, e, 0.0, 4.0, target).total, 2.0 * (12.5 / 16), 1e-12);
  // Fewer bits at the same d pay more: 1 bit is worth w_bits / 16.
  PlanEvaluation fewer = e;
  fewer.effective_bits = 2.5;
  EXPECT_NEAR(EpisodeEndReward(env, fewer, 4.0, 4.0, target).total -
                  EpisodeEndReward(env, e, 4.0, 4.0, target).total,
              2.0 / 16, 1e-12);
  e.relative_ppl_increase = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 4.0, 4.0, target).total));
  EXPECT_LT(EpisodeEndReward(env, e, 4.0, 4.0, target).total, -1000 * 4.0 + 2.0);
}

}  // namespace
}  // namespace windquant::rl
