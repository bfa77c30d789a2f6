#include "common/rl/lagrange.h"

#include <algorithm>
#include <cmath>

namespace windquant::rl {

double ConstraintValue(const LagrangeOptions& options, const PlanEvaluation& evaluation,
                       double target_bits) {
  if (options.prices == "budget") return evaluation.effective_bits - target_bits;
  return evaluation.relative_ppl_increase;
}

double LagrangeMultiplier::Update(double d) {
  if (!std::isfinite(d)) {
    lambda_ = options_.lambda_max;
    return lambda_;
  }
  // DESIGN.md section 4: lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max).
  lambda_ = std::clamp(lambda_ + options_.eta * (d - options_.epsilon), 0.0, options_.lambda_max);
  return lambda_;
}

}  // namespace windquant::rl
