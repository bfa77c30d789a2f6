// The policy of a run (15 state features -> 7 actions, DESIGN.md section 4):
// the same network, from the same seed, in the learner and in every actor.
#ifndef WINDQUANT_COMMON_RL_RUN_POLICY_H_
#define WINDQUANT_COMMON_RL_RUN_POLICY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"
#include "common/rl/ppo_options.h"

namespace windquant::rl {

// The policy of `ppo.hidden`, initialised from `seed` (training.seed).
PolicyOptions RunPolicyOptions(const PpoOptions& ppo, uint64_t seed);

// The PPO learner of that policy (`seed` also seeds the minibatch shuffle).
// Errors of PpoLearner::Create.
absl::StatusOr<std::unique_ptr<PpoLearner>> CreatePpoLearner(const PpoOptions& ppo, uint64_t seed);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_RUN_POLICY_H_
