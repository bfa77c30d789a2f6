// The Lagrange multiplier of the episode-end reward's constraint (DESIGN.md
// section 4; what it prices and why: docs/lagrange.md):
//
//   lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max)
//
// g = ConstraintValue of a sampled episode's plan: with lagrange.prices
// "quality" the relative perplexity increase d = PPL_plan / PPL_fp - 1 (lambda
// scales the penalty lambda * d); with "budget" (soft budget mode) the overrun
// bits - target (lambda is the reward price of one bit over the target, the
// penalty lambda * (bits - target)). lambda grows while g exceeds epsilon and
// shrinks otherwise (EpisodeEndReward, episode_evaluator.h).
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_LAGRANGE_H_
#define WINDQUANT_COMMON_RL_LAGRANGE_H_

#include "common/rl/lagrange_options.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// The constraint value g of one evaluated plan at `target_bits` (above).
double ConstraintValue(const LagrangeOptions& options, const PlanEvaluation& evaluation,
                       double target_bits);

class LagrangeMultiplier {
 public:
  explicit LagrangeMultiplier(const LagrangeOptions& options)
      : options_(options), lambda_(options.lambda_init) {}

  // Applies the update above for one constraint value g and returns the new
  // lambda. A non-finite g counts as lambda_max pressure (lambda goes to lambda_max).
  double Update(double constraint_value);

  double lambda() const { return lambda_; }
  void set_lambda(double lambda) { lambda_ = lambda; }
  const LagrangeOptions& options() const { return options_; }

 private:
  LagrangeOptions options_;
  double lambda_;
};

// The lambda of the episode-end rewards of PPO batches (learner::LearnerCore):
// every episode of one batch is rewarded with the same lambda, the
// one in effect when the batch began (batch_lambda(): lambda_init, or the
// value at the end of the previous batch); every measured d of the batch's
// episodes (its ConstraintValue) updates the multiplier (Observe) in the order measured, and
// EndBatch() (at the PPO update) makes the updated value the next batch's.
// Candidate plans (reference, greedy) neither use nor move lambda.
// Thread-compatible.
class BatchLambda {
 public:
  explicit BatchLambda(const LagrangeOptions& options)
      : multiplier_(options), batch_lambda_(multiplier_.lambda()) {}

  // The lambda for every episode of the current batch.
  double batch_lambda() const { return batch_lambda_; }
  // The multiplier after the d's observed so far (= batch_lambda() right after EndBatch).
  double lambda() const { return multiplier_.lambda(); }
  // One constraint value g of an episode of the current batch.
  void Observe(double constraint_value) { multiplier_.Update(constraint_value); }
  // The batch is complete: the next batch uses the updated lambda. Returns it.
  double EndBatch() {
    batch_lambda_ = multiplier_.lambda();
    return batch_lambda_;
  }
  // A checkpointed lambda (taken right after EndBatch): both values.
  void Restore(double lambda) {
    multiplier_.set_lambda(lambda);
    batch_lambda_ = lambda;
  }

 private:
  LagrangeMultiplier multiplier_;
  double batch_lambda_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_LAGRANGE_H_
