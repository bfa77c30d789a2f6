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

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_LAGRANGE_H_
