#include "common/rl/greedy_plan.h"

#include <utility>

#include "common/base/status_macros.h"

namespace windquant::rl {

absl::StatusOr<std::vector<int>> PolicyGreedyPlan(const Policy& policy,
                                                  std::shared_ptr<const UnitCosts> costs,
                                                  const EnvironmentOptions& env,
                                                  double target_bits) {
  BatchedEnvironment envs(std::move(costs), MakeEnvOptions(env, target_bits), 1);
  // Deterministic: the generator is not drawn from.
  at::Generator gen = MakeGenerator(0);
  WQ_ASSIGN_OR_RETURN(Rollout r, envs.Run(policy, gen, /*deterministic=*/true, -1));
  return std::move(r.plans[0]);
}

}  // namespace windquant::rl
