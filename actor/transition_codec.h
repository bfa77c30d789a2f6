// Episodes on the wire (windquant.v1.TransitionBatch): an actor encodes the
// transitions of one finished episode with its plan; the learner decodes and
// validates them against the global unit table (INVALID_ARGUMENT naming the
// field: wrong feature count, NaN, unknown unit/action, masked action, plan
// for another model, plan disagreeing with the actions).
// Thread-safe (pure functions).
#ifndef WINDQUANT_ACTOR_TRANSITION_CODEC_H_
#define WINDQUANT_ACTOR_TRANSITION_CODEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quant/plan.h"
#include "common/quant/unit_table.h"
#include "common/rl/ppo.h"
#include "windquant/v1/types.pb.h"

namespace windquant::actor {

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
  std::vector<rl::Transition> steps;
  quant::Plan plan;
};

void EncodeEpisode(const Episode& episode, const quant::UnitTable& table, v1::TransitionBatch* out);
absl::StatusOr<Episode> DecodeEpisode(const v1::TransitionBatch& batch,
                                      const quant::UnitTable& table);

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_TRANSITION_CODEC_H_
