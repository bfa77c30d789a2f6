// The Lagrange multiplier of the perplexity constraint (DESIGN.md section 4):
//
//   lambda <- clip(lambda + eta * (d - epsilon), 0, lambda_max)
//
// d = relative perplexity increase of an evaluated plan (PPL_plan / PPL_fp - 1),
// epsilon = tolerated degradation. lambda grows while plans degrade more than
// epsilon and shrinks otherwise; it scales the perplexity penalty of the
// episode-end reward (EpisodeEndReward, episode_evaluator.h).
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_LAGRANGE_H_
#define WINDQUANT_COMMON_RL_LAGRANGE_H_

#include "common/config/run_config.h"

namespace windquant::rl {

class LagrangeMultiplier {
 public:
  explicit LagrangeMultiplier(const config::LagrangeConfig& config)
      : config_(config), lambda_(config.lambda_init) {}

  // Applies the update above for one measured d and returns the new lambda.
  // A non-finite d counts as lambda_max pressure (lambda goes to lambda_max).
  double Update(double relative_ppl_increase);

  double lambda() const { return lambda_; }
  void set_lambda(double lambda) { lambda_ = lambda; }
  const config::LagrangeConfig& config() const { return config_; }

 private:
  config::LagrangeConfig config_;
  double lambda_;
};

// The lambda of the episode-end rewards of PPO batches (learner::LearnerCore):
// every episode of one batch is rewarded with the same lambda, the
// one in effect when the batch began (batch_lambda(): lambda_init, or the
// value at the end of the previous batch); every measured d of the batch's
// episodes updates the multiplier (Observe) in the order measured, and
// EndBatch() (at the PPO update) makes the updated value the next batch's.
// Candidate plans (reference, greedy) neither use nor move lambda.
// Thread-compatible.
class BatchLambda {
 public:
  explicit BatchLambda(const config::LagrangeConfig& config)
      : multiplier_(config), batch_lambda_(multiplier_.lambda()) {}

  // The lambda for every episode of the current batch.
  double batch_lambda() const { return batch_lambda_; }
  // The multiplier after the d's observed so far (= batch_lambda() right after EndBatch).
  double lambda() const { return multiplier_.lambda(); }
  // One measured d of an episode of the current batch.
  void Observe(double relative_ppl_increase) { multiplier_.Update(relative_ppl_increase); }
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
