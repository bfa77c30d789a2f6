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

// Episode ids with this bit set name the learner's candidate plans (the
// stage's Lagrangian reference, the greedy plan after an update): submitted
// to the evaluator like an episode's plan, but they have no transitions, never
// enter a PPO batch and do not update λ. Actor ids stay below it
// ((actor index + 1) << 48 | counter).
inline constexpr uint64_t kCandidateEpisodeBit = uint64_t{1} << 63;
inline bool IsCandidateEpisode(uint64_t episode_id) {
  return (episode_id & kCandidateEpisodeBit) != 0;
}

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
