#include "common/rl/episode_reward.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

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
  EXPECT_NEAR(EpisodeEndReward(env, e, 1.5, 2.0, "budget").total,
              2.0 * (13.75 / 16) - 3.0 * 0.1 - 5.0 * 0.25 - 0.5 * 0.4 - 1.5 * 0.25, 1e-12);
  e.effective_bits = 1.75;  // under the target: the price is a reward
  EXPECT_NEAR(EpisodeEndReward(env, e, 1.5, 2.0, "budget").total,
              2.0 * (14.25 / 16) - 3.0 * 0.1 - 0.5 * 0.4 + 1.5 * 0.25, 1e-12);
  e.relative_ppl_increase = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 1.5, 2.0).total));
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 1.5, 2.0, "budget").total));
}

}  // namespace
}  // namespace windquant::rl
