// Warm start by behaviour cloning (DESIGN.md section 4; training.warm_start
// = lagrange, at the start of every curriculum step, and self-imitation):
// the policy is cloned on the episode that follows a plan (cross-entropy on
// its states, Adam, up to a number of steps, stopping once the plan's actions
// have mean probability `target_prob`, kWarmStartTargetProb by default, so
// that sampling still explores). The learner evaluates the plan itself as a
// candidate (learner/learner_core.h).
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_WARM_START_H_
#define WINDQUANT_COMMON_RL_WARM_START_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rl/environment.h"
#include "common/rl/environment_options.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"

namespace windquant::rl {

// Mean probability of the reference actions at which behaviour cloning stops.
inline constexpr double kWarmStartTargetProb = 0.9;

// Behaviour cloning: at most `steps` Adam steps (learning rate `lr`) of
// cross-entropy of `transitions`' actions under their masks; stops early when
// the mean probability of those actions reaches `target_prob`. Returns that
// mean probability at the end. INVALID_ARGUMENT for empty input.
absl::StatusOr<double> BehaviourClone(Policy& policy, const std::vector<Transition>& transitions,
                                      int steps, double lr, double target_prob);

// Behaviour-clones `policy` on the episode that follows `plan` at
// `target_bits` under `env` (ReplayPlan, then BehaviourClone with `steps`
// (training.warm_start_steps), the warm start's learning rate and
// `target_prob`). Returns the mean probability of the plan's actions.
absl::StatusOr<double> WarmStartOnPlan(Policy& policy, std::shared_ptr<const UnitCosts> costs,
                                       const EnvironmentOptions& env, int steps, double target_bits,
                                       const std::vector<int>& plan,
                                       double target_prob = kWarmStartTargetProb);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_WARM_START_H_
