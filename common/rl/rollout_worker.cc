#include "common/rl/rollout_worker.h"

#include "absl/strings/str_cat.h"
#include "common/base/split_mix64.h"
#include "common/base/status_macros.h"

namespace windquant::rl {

absl::StatusOr<std::unique_ptr<RolloutWorker>> RolloutWorker::Create(
    const plan::UnitTable& table, const EnvironmentOptions& env, std::string actor_id,
    int actor_index, uint32_t incarnation, int envs, uint64_t seed) {
  if (envs < 1) return absl::InvalidArgumentError("rollout envs: must be >= 1");
  std::unique_ptr<RolloutWorker> w(new RolloutWorker());
  WQ_ASSIGN_OR_RETURN(w->costs_, UnitCosts::Create(table));
  w->env_ = env;
  w->actor_id_ = std::move(actor_id);
  w->id_base_ = (static_cast<uint64_t>(actor_index + 1) << 48) |
                (static_cast<uint64_t>(incarnation & 0xffff) << 32);
  w->envs_ = envs;
  // Mixed: mt19937 keeps only the low 32 bits of a seed, and id_base_ lives in
  // the high 32, so an unmixed seed ^ id_base_ gave every actor (and every
  // incarnation) the same sample stream: the actors of one policy version
  // sampled the same episodes.
  w->generator_ = MakeGenerator(base::SplitMix64(seed ^ base::SplitMix64(w->id_base_)));
  return w;
}

absl::StatusOr<std::vector<Episode>> RolloutWorker::Run(const Policy& policy, double target_bits) {
  BatchedEnvironment envs(costs_, MakeEnvOptions(env_, target_bits), envs_);
  const uint64_t first = id_base_ | next_;
  WQ_ASSIGN_OR_RETURN(Rollout rollout, envs.Run(policy, generator_, /*deterministic=*/false,
                                                static_cast<int64_t>(first)));
  next_ += envs_;
  std::vector<Episode> out;
  for (size_t i = 0; i < rollout.episodes.size(); ++i) {
    Episode e;
    e.actor_id = actor_id_;
    e.episode_id = first + i;
    e.policy_version = policy.version();
    e.steps = std::move(rollout.episodes[i]);
    e.plan.plan_id = absl::StrCat(actor_id_, "-", e.episode_id);
    e.plan.model_fingerprint = costs_->table().fingerprint;
    e.plan.source = "rl";
    e.plan.target_bits = target_bits;
    e.plan.policy_version = e.policy_version;
    e.plan.episode_id = e.episode_id;
    e.plan.actions = rollout.plans[i];
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace windquant::rl
