#include "common/rl/episode_rewarder.h"

#include <gtest/gtest.h>

#include "common/rl/episode_reward.h"

namespace windquant::rl {
namespace {

PlanEvaluation Measured(double bits, double d) {
  PlanEvaluation e;
  e.effective_bits = bits;
  e.relative_ppl_increase = d;
  e.loss_increase = 0.1;
  return e;
}

LagrangeOptions Lagrange() {
  LagrangeOptions c;
  c.eta = 0.5;
  c.epsilon = 0.05;
  return c;
}

// The reward is rl::EpisodeEndReward with the open batch's λ; the g of an
// accepted episode moves the multiplier, the learner's update ends the batch.
TEST(EpisodeRewarderTest, RewardsWithTheBatchLambdaAndEndsTheBatchWithTheLearner) {
  EnvironmentOptions env;
  EpisodeRewarder r(env, Lagrange());
  const EpisodeRewardGrant a = r.Reward(Measured(2.0, 1.0), 2.0);
  EXPECT_EQ(a.batch, 0);
  EXPECT_EQ(a.lambda, Lagrange().lambda_init);
  EXPECT_EQ(a.reward, EpisodeEndReward(env, Measured(2.0, 1.0), a.lambda, 2.0).total);
  EXPECT_DOUBLE_EQ(a.lambda_after, 1.0 + 0.5 * (1.0 - 0.05));
  EXPECT_FALSE(r.Settle(&a, /*accepted=*/true, /*learner_updates=*/0, a.lambda));
  const EpisodeRewardGrant b = r.Reward(Measured(2.0, 3.0), 2.0);
  EXPECT_EQ(b.lambda, a.lambda);                        // the same batch, the same λ
  EXPECT_FALSE(r.Settle(&b, true, 1, b.lambda_after));  // it completed the batch
  EXPECT_EQ(r.lambda().batch(), 1);
  EXPECT_EQ(r.lambda().batch_lambda(), b.lambda_after);
  // A refused episode (unknown to the learner) and a candidate move nothing.
  const EpisodeRewardGrant c = r.Reward(Measured(2.0, 9.0), 2.0);
  EXPECT_FALSE(r.Settle(&c, false, 1, b.lambda_after));
  EXPECT_FALSE(r.Settle(nullptr, true, 1, b.lambda_after));
  EXPECT_EQ(r.lambda().lambda(), b.lambda_after);
}

// A learner at an earlier batch (resumed from its checkpoint): back to that
// batch's λ and the report is resent; at a later one this owner never
// reached (its state lost): the learner's pushed λ is taken.
TEST(EpisodeRewarderTest, FollowsALearnerAtAnotherBatch) {
  EpisodeRewarder r(EnvironmentOptions(), Lagrange());
  for (int i = 0; i < 2; ++i) {
    const EpisodeRewardGrant g = r.Reward(Measured(2.0, 1.0), 2.0);
    r.Settle(&g, true, i + 1, g.lambda_after);
  }
  ASSERT_EQ(r.lambda().batch(), 2);
  const double lambda1 = 1.0 + 0.5 * (1.0 - 0.05);
  const EpisodeRewardGrant g = r.Reward(Measured(2.0, 1.0), 2.0);
  EXPECT_TRUE(r.Settle(&g, false, 1, lambda1));
  EXPECT_EQ(r.lambda().batch(), 1);
  EXPECT_DOUBLE_EQ(r.Reward(Measured(2.0, 1.0), 2.0).lambda, lambda1);
  EXPECT_FALSE(r.Settle(nullptr, true, 7, 4.5));
  EXPECT_EQ(r.lambda().batch(), 7);
  EXPECT_EQ(r.lambda().batch_lambda(), 4.5);
}

}  // namespace
}  // namespace windquant::rl
