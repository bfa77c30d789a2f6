#include "common/rl/run_policy.h"

#include "common/plan/action.h"
#include "common/rl/state_features.h"

namespace windquant::rl {

PolicyOptions RunPolicyOptions(const PpoOptions& ppo, uint64_t seed) {
  PolicyOptions po;
  po.state_dim = kStateDim;
  po.num_actions = plan::kNumActions;
  po.hidden_sizes.assign(ppo.hidden.begin(), ppo.hidden.end());
  po.init_seed = seed;
  return po;
}

absl::StatusOr<std::unique_ptr<PpoLearner>> CreatePpoLearner(const PpoOptions& ppo, uint64_t seed) {
  return PpoLearner::Create(RunPolicyOptions(ppo, seed), ppo, seed);
}

}  // namespace windquant::rl
