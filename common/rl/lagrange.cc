#include "common/rl/lagrange.h"

#include <algorithm>
#include <cmath>

namespace windquant::rl {

double ConstraintValue(const config::LagrangeConfig& config, const PlanEvaluation& evaluation,
                       double target_bits) {
  if (config.prices == "budget") return evaluation.effective_bits - target_bits;
  return evaluation.relative_ppl_increase;
}

double LagrangeMultiplier::Update(double d) {
  if (!std::isfinite(d)) {
    lambda_ = config_.lambda_max;
    return lambda_;
  }
  // DESIGN.md section 4: lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max).
  lambda_ = std::clamp(lambda_ + config_.eta * (d - config_.epsilon), 0.0, config_.lambda_max);
  return lambda_;
}

}  // namespace windquant::rl
