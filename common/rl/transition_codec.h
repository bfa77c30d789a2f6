// Episodes on the wire (windquant.v1.TransitionBatch): an actor encodes the
// transitions of one finished episode with its plan; the learner decodes and
// validates them against the global unit table (INVALID_ARGUMENT naming the
// field: wrong feature count, NaN, unknown unit/action, masked action, plan
// for another model, plan disagreeing with the actions).
// Thread-safe (pure functions).
#ifndef WINDQUANT_COMMON_RL_TRANSITION_CODEC_H_
#define WINDQUANT_COMMON_RL_TRANSITION_CODEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/episode.h"
#include "windquant/v1/types.pb.h"

namespace windquant::rl {

void EncodeEpisode(const Episode& episode, const plan::UnitTable& table, v1::TransitionBatch* out);
absl::StatusOr<Episode> DecodeEpisode(const v1::TransitionBatch& batch,
                                      const plan::UnitTable& table);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_TRANSITION_CODEC_H_
