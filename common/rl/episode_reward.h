// The episode-end reward (DESIGN.md section 4), built from a plan's
// evaluation measured on the real quantized model.
//
// What measures a plan: PlanEvaluator (plan_evaluator.h), the interface the
// trainer, the benches and the RL tests use (LocalPlanEvaluator,
// CachingPlanEvaluator); the evaluator process measures through the same
// PlanEvaluationCore with a pipeline backend (plan_backend.h).
#ifndef WINDQUANT_COMMON_RL_EPISODE_REWARD_H_
#define WINDQUANT_COMMON_RL_EPISODE_REWARD_H_

#include "common/rl/environment_options.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/plan_evaluator.h"

namespace windquant::rl {

// The parts of the episode-end reward, for logs and tests.
struct EpisodeReward {
  double bit_reduction = 0;  // (16 - bits) / 16
  double violation = 0;      // max(0, bits - target)
  double total = 0;
};

// Episode-end reward (DESIGN.md section 4), one formula, here:
//   R = bit_reduction_weight     * (16 - bits) / 16
//     - loss_penalty_weight      * loss_increase
//     - violation_penalty_weight * max(0, bits - target)
//     - ppl_penalty_weight       * lambda * d            (prices "quality")
//     - ppl_penalty_weight * d - lambda * (bits - target) (prices "budget")
// bits = the plan's effective bits (in the repair budget mode the bits the
// episode chose: environment.h ChargedEvaluation), d = relative PPL increase, lambda the
// current Lagrange multiplier (lagrange.h) and `lagrange.prices`: what
// lambda multiplies. A non-finite measurement gives a large finite penalty so
// PPO never sees NaN.
//
// The quality-target mode (prices "target", epsilon = lagrange.epsilon, the
// maximum d; docs/lagrange.md) is the paper's Lagrangian of "fewest bits
// subject to d <= epsilon":
//   R = bit_reduction_weight     * (16 - bits) / 16
//     - violation_penalty_weight * max(0, bits - target)   (0 under the hard cap)
//     - lambda * (d - epsilon)
// without the calibration-loss and ppl_penalty_weight terms: the constraint is
// on d alone, and a second, unpriced quality term would move the fixed point
// of lambda away from the exchange rate between bits and d.
EpisodeReward EpisodeEndReward(const EnvironmentOptions& env, const PlanEvaluation& evaluation,
                               double lambda, double target_bits,
                               const LagrangeOptions& lagrange = LagrangeOptions());

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_EPISODE_REWARD_H_
