// The greedy plan of a policy: the deterministic (argmax) plan of one
// episode, the candidate the learner evaluates after every PPO update.
#ifndef WINDQUANT_COMMON_RL_GREEDY_PLAN_H_
#define WINDQUANT_COMMON_RL_GREEDY_PLAN_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rl/environment.h"
#include "common/rl/environment_options.h"
#include "common/rl/policy.h"

namespace windquant::rl {

// The argmax plan of `policy` at `target_bits` under `env` (one greedy episode).
absl::StatusOr<std::vector<int>> PolicyGreedyPlan(const Policy& policy,
                                                  std::shared_ptr<const UnitCosts> costs,
                                                  const EnvironmentOptions& env,
                                                  double target_bits);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_GREEDY_PLAN_H_
