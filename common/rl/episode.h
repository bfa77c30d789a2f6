// Episode (DESIGN.md section 2): one pass of the policy over all units in the
// global order, as an actor's rollout worker produced it and the learner
// trains on it: its transitions (the behaviour policy's version, log-probs
// and values) and the plan it ended in. On the wire: transition_codec.h.
#ifndef WINDQUANT_COMMON_RL_EPISODE_H_
#define WINDQUANT_COMMON_RL_EPISODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/plan/plan.h"
#include "common/rl/ppo.h"

namespace windquant::rl {

// What a plan sent for evaluation is (v1::PlanKind on the wire): an episode's
// (its transitions wait in the learner for the reward) or one of the learner's
// candidate plans (the stage's Lagrangian reference, the greedy plan after an
// update: no transitions, never in a PPO batch, λ unchanged). Both go to the
// evaluator through the learner (learner/plan_sender.h); ids are unique per kind.
enum class PlanKind { kEpisode, kCandidate };

struct Episode {
  std::string actor_id;
  uint64_t episode_id = 0;
  int64_t policy_version = 0;
  std::vector<Transition> steps;
  plan::Plan plan;
  // A sample that reward-model screening (training.screen_samples) did not send
  // for measurement: PPO still learns from it, so that the episodes it learns
  // from are the policy's samples and not only the best-predicted few; its
  // episode-end reward is computed from `predicted_log_ppl`, the reward model's
  // prediction of its selection-slice log perplexity (PredictedEvaluation,
  // reward_model.h).
  bool screened_out = false;
  double predicted_log_ppl = 0;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_EPISODE_H_
