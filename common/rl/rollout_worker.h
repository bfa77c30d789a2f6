// RolloutWorker: an actor's rollout worker (DESIGN.md section 5): vectorised
// episodes over the global unit table with the actor's local copy of the
// policy (rl::BatchedEnvironment), each finished episode packaged with its
// plan for the learner (transitions) and the evaluator (plan).
// Episode ids: (actor index + 1) << 48 | incarnation << 32 | counter, unique
// across actors and across restarts of one actor. Each worker samples with its
// own generator, seeded from (seed, actor index, incarnation) through
// base::SplitMix64, so that workers of one policy version sample different
// episodes.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_ROLLOUT_WORKER_H_
#define WINDQUANT_COMMON_RL_ROLLOUT_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rl/environment.h"
#include "common/rl/environment_options.h"
#include "common/rl/episode.h"
#include "common/rl/policy.h"

namespace windquant::rl {

class RolloutWorker {
 public:
  // INVALID_ARGUMENT for an empty table or envs < 1.
  static absl::StatusOr<std::unique_ptr<RolloutWorker>> Create(
      const plan::UnitTable& table, const EnvironmentOptions& env, std::string actor_id,
      int actor_index, uint32_t incarnation, int envs, uint64_t seed);
  // Runs `envs` episodes with `policy` at `target_bits` (sampled actions).
  absl::StatusOr<std::vector<Episode>> Run(const Policy& policy, double target_bits);
  const plan::UnitTable& table() const { return costs_->table(); }
  int envs() const { return envs_; }  // episodes per Run

 private:
  RolloutWorker() = default;
  std::shared_ptr<const UnitCosts> costs_;
  EnvironmentOptions env_;
  std::string actor_id_;
  uint64_t id_base_ = 0;
  uint64_t next_ = 0;
  int envs_ = 1;
  at::Generator generator_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_ROLLOUT_WORKER_H_
