// LagrangeOptions: the Lagrange multiplier's settings (lagrange.h), the run
// config's `lagrange` section as it is (config::RunConfig embeds it; the keys
// are validated once, in common/config/run_config.cc).
//
// lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max) for each sampled
// episode's constraint value g (common/rl/lagrange.h, docs/lagrange.md):
//   prices: quality  g = d, the relative PPL increase; lambda scales the
//                    penalty lambda * d (any budget_mode)
//   prices: budget   g = bits - target; lambda is the reward price of one bit over
//                    the target, the penalty lambda * (bits - target) (soft or
//                    repair; in repair the bits the episode chose, before the repair)
//   prices: target   the quality-target mode (docs/lagrange.md): epsilon is the
//                    maximum relative PPL increase on the selection slice, g = d,
//                    the target bits are a cap (hard mask) and lambda prices
//                    lambda * (d - epsilon) against the bits saved; the returned
//                    plan is the fewest-bits plan measured with d <= epsilon
#ifndef WINDQUANT_COMMON_RL_LAGRANGE_OPTIONS_H_
#define WINDQUANT_COMMON_RL_LAGRANGE_OPTIONS_H_

#include <string>

namespace windquant::rl {

struct LagrangeOptions {
  std::string prices = "quality";  // lagrange.prices: quality | budget | target
  double eta = 0.05;               // lagrange.eta
  double epsilon = 0.05;           // lagrange.epsilon (prices target: the maximum d)
  double lambda_init = 1.0;        // lagrange.lambda_init, in [0, lambda_max]
  double lambda_max = 100.0;       // lagrange.lambda_max

  // The quality-target mode (prices: target, `quantize --max-ppl-increase`).
  bool quality_target() const { return prices == "target"; }
  // Its epsilon, the maximum relative PPL increase; 0 in the fixed-budget mode.
  double max_ppl_increase() const { return quality_target() ? epsilon : 0; }
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_LAGRANGE_OPTIONS_H_
