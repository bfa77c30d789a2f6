#include "common/rl/episode_rewarder.h"

#include "common/rl/episode_reward.h"

namespace windquant::rl {

EpisodeRewardGrant EpisodeRewarder::Reward(const PlanEvaluation& charged,
                                           double target_bits) const {
  const LagrangeOptions& o = lambda_.options();
  EpisodeRewardGrant g;
  g.batch = lambda_.batch();
  g.lambda = lambda_.batch_lambda();
  g.reward = EpisodeEndReward(env_, charged, g.lambda, target_bits, o).total;
  g.constraint_value = ConstraintValue(o, charged, target_bits);
  g.lambda_after = lambda_.Preview(g.constraint_value);
  return g;
}

bool EpisodeRewarder::Settle(const EpisodeRewardGrant* grant, bool accepted,
                             int64_t learner_updates, double learner_lambda) {
  const bool joined = grant != nullptr && accepted && grant->batch == lambda_.batch();
  if (joined) {
    lambda_.Observe(grant->constraint_value);
    if (learner_updates == lambda_.batch() + 1) {  // it completed the batch: the update ran
      lambda_.EndBatch();
      return false;
    }
  }
  if (learner_updates == lambda_.batch()) return false;
  if (!lambda_.Rewind(learner_updates)) lambda_.Adopt(learner_updates, learner_lambda);
  return grant != nullptr && !accepted;
}

}  // namespace windquant::rl
