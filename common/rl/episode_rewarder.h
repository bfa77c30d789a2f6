// EpisodeRewarder: the episode-end reward of measured episodes and the
// Lagrange multiplier it prices with, in one owner (DESIGN.md section 4: "the
// evaluator updates lambda and pushes it"; STYLE.md, one owner per piece of
// state). The evaluator (evaluator::EvaluationQueue) keeps one: it rewards
// each episode it measured with the lambda of the PPO batch the learner will
// train it in (rl::BatchLambda), sends the reward, that lambda and the next
// one with the report, and follows the learner's answer (the episode joined
// the batch, the batch completed, the learner is at another batch). The
// learner only adds the reward it is sent and shows the lambda it was pushed.
// Reports must reach the learner one at a time (answer before the next is
// rewarded): the batch an episode joins is the one the reward was computed for.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_EPISODE_REWARDER_H_
#define WINDQUANT_COMMON_RL_EPISODE_REWARDER_H_

#include <cstdint>

#include "common/rl/environment_options.h"
#include "common/rl/lagrange.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// What an episode's report carries besides its measurement.
struct EpisodeRewardGrant {
  int64_t batch = 0;            // the PPO batch (the learner's updates so far) it is meant for
  double lambda = 0;            // that batch's lambda, which `reward` used
  double lambda_after = 0;      // the multiplier after this episode's g: the next batch's
                                // lambda when it completes the batch
  double reward = 0;            // rl::EpisodeEndReward(...).total
  double constraint_value = 0;  // g (rl::ConstraintValue), observed once it joins the batch
};

class EpisodeRewarder {
 public:
  EpisodeRewarder(const EnvironmentOptions& env, const LagrangeOptions& lagrange)
      : env_(env), lambda_(lagrange) {}

  // The reward of an episode measured as `charged` (effective_bits: the bits
  // it is charged with, rl::ChargedEvaluation) at `target_bits`, in the open batch.
  EpisodeRewardGrant Reward(const PlanEvaluation& charged, double target_bits) const;

  // The learner's answer to a report: `grant` is the episode's (nullptr for
  // a candidate plan's report), `accepted` whether the learner took it,
  // `learner_updates` its PPO updates after it and `learner_lambda` the lambda
  // it was last pushed. An accepted episode's g moves the multiplier, and the
  // batch ends when the learner's update ran; a learner at another batch (it
  // restarted from an older checkpoint, or this owner lost its state) is
  // followed (BatchLambda::Rewind, else Adopt of `learner_lambda`). True when
  // an episode's report must be rewarded again and resent: it was refused
  // because it was meant for another batch.
  bool Settle(const EpisodeRewardGrant* grant, bool accepted, int64_t learner_updates,
              double learner_lambda);

  const BatchLambda& lambda() const { return lambda_; }
  BatchLambda& mutable_lambda() { return lambda_; }

 private:
  EnvironmentOptions env_;
  BatchLambda lambda_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_EPISODE_REWARDER_H_
