// Checkpoint of a training run (DESIGN.md section 5, learner): the PPO
// learner (policy + optimiser, PpoLearner::SaveState), lambda (as the
// evaluator, its owner, pushed it; the evaluator keeps its own state), curriculum
// position, the RNG position, the update counter, the best plan so far and the
// run's history, with a fingerprint of model + data + config
// (config::RunFingerprint, common/config/run_digest.h). One file,
// output.dir/checkpoint/run.ckpt, written atomically (WriteFileAtomic), so a
// crash leaves the previous checkpoint intact.
//
// Format: "WQRUNCKPT1\n", the JSON header's length as 20 decimal digits and
// "\n", the JSON header, then the learner state bytes (their sha256 is in
// the header). Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_RUN_CHECKPOINT_H_
#define WINDQUANT_COMMON_RL_RUN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rl/candidate_plan.h"
#include "common/rl/run_history.h"

namespace windquant::rl {

struct RunCheckpoint {
  std::string fingerprint;
  int64_t update = 0;  // updates completed
  int stage = 0;
  int updates_in_stage = 0;
  bool curriculum_finished = false;
  int warm_started_stage = -1;  // last stage whose warm start ran
  double lambda = 0;
  uint64_t rng_seed = 0;  // rollouts of update u use streams derived from (seed, u)
  int64_t next_episode_id = 0;
  std::string learner_state;  // PpoLearner::SaveState
  CandidatePlan best;         // best feasible at the final target
  CandidatePlan best_stage;   // best feasible at the current stage's target
  double stage_reference_ppl = 0;
  std::vector<UpdateRecord> curve;
  std::vector<StageEvent> stages;
  // The quality-target mode's epsilon (lagrange.epsilon with prices: target);
  // 0 = a fixed-budget run (the header then has no such key).
  double max_ppl_increase = 0;
};

// Path of the checkpoint file in `dir` (output.dir/checkpoint).
std::string RunCheckpointPath(const std::string& dir);

absl::Status WriteRunCheckpoint(const std::string& dir, const RunCheckpoint& checkpoint);
// NOT_FOUND when `dir` holds no checkpoint; DATA_LOSS for a corrupt file;
// FAILED_PRECONDITION when its quality target differs from
// `expected_max_ppl_increase` (0: fixed budget; the message names
// lagrange.epsilon and both values) or its fingerprint from
// `expected_fingerprint` (a different model, data or config: the message says
// so and names the file).
absl::StatusOr<RunCheckpoint> ReadRunCheckpoint(const std::string& dir,
                                                const std::string& expected_fingerprint,
                                                double expected_max_ppl_increase = 0);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_RUN_CHECKPOINT_H_
