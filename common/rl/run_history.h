// A training run's history (the learner's curve and curriculum events): one
// UpdateRecord per PPO update and one StageEvent per curriculum step that
// ended. Kept in the run checkpoint and returned in rl::RunResult. ("stage"
// here is the curriculum step: the checkpoint's and report's field names.)
#ifndef WINDQUANT_COMMON_RL_RUN_HISTORY_H_
#define WINDQUANT_COMMON_RL_RUN_HISTORY_H_

#include <cstdint>
#include <string>

namespace windquant::rl {

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

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_RUN_HISTORY_H_
