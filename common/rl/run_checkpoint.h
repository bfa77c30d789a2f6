// Checkpoint of a training run (DESIGN.md section 5, learner): the PPO
// learner (policy + optimiser, PpoLearner::SaveState), lambda, curriculum
// position, the RNG position, the update counter, the best plan so far and the
// run's history, with a fingerprint of model + data + config. One file,
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
#include "common/config/run_config.h"
#include "common/quant/unit_table.h"
#include "common/rl/episode_evaluator.h"

namespace windquant::rl {

// A plan the trainer considered, with its measurement.
struct CandidatePlan {
  std::vector<int> actions;  // empty = none yet
  PlanEvaluation evaluation;
  double target_bits = 0;
  std::string source;  // "rl", "rl-greedy", "lagrange" (warm-start reference)
  int64_t update = 0;
  int64_t policy_version = 0;
};

struct UpdateRecord {
  int64_t update = 0;  // 1-based
  int stage = 0;
  double target_bits = 0;
  double mean_reward = 0;  // episode return (step rewards + end reward), mean over episodes
  double mean_ppl = 0;     // eval-slice PPL, mean over the update's episodes
  double mean_bits = 0;
  double best_ppl = 0;  // best feasible at the final target so far (0 = none)
  double best_bits = 0;
  double lambda = 0;
  double policy_loss = 0, value_loss = 0, entropy = 0;
  int64_t evaluations = 0;  // plans evaluated so far (cache misses)
  double seconds = 0;       // wall time since the run started (this process)
};

struct StageEvent {
  int stage = 0;  // the stage that ended
  double target_bits = 0;
  int64_t update = 0;
  std::string reason;
};

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
};

// sha256 over the unit table's fingerprint (model + calibration + quant
// config) and CanonicalText(config) without the keys that only say where
// output goes or how the process runs (output.*, model.threads, service.*,
// training.checkpoint_every_updates).
std::string RunFingerprint(const quant::UnitTable& table, const config::RunConfig& config);
// sha256 of the same config text alone: what a run is before its table
// exists (the store's run ids start with its first 8 hex digits).
std::string RunConfigDigest(const config::RunConfig& config);

// Path of the checkpoint file in `dir` (output.dir/checkpoint).
std::string RunCheckpointPath(const std::string& dir);

absl::Status WriteRunCheckpoint(const std::string& dir, const RunCheckpoint& checkpoint);
// NOT_FOUND when `dir` holds no checkpoint; DATA_LOSS for a corrupt file;
// FAILED_PRECONDITION when its fingerprint differs from `expected_fingerprint`
// (a different model, data or config: the message says so and names the file).
absl::StatusOr<RunCheckpoint> ReadRunCheckpoint(const std::string& dir,
                                                const std::string& expected_fingerprint);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_RUN_CHECKPOINT_H_
