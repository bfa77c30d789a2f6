// Curriculum over target bits (DESIGN.md section 4): training starts at
// curriculum.target_bits[0] and steps down through the list (e.g. 3.0 -> 2.5
// -> 2.0). A stage ends after max_updates updates, or earlier, after at least
// min_updates, once the best feasible plan of the stage has a measured
// perplexity within advance_ppl_ratio of the stage's reference (the best
// baseline evaluated at the stage's target):
//
//   advance  iff  updates >= max_updates
//            or  (updates >= min_updates and best_ppl <= advance_ppl_ratio * reference_ppl)
//
// After the last stage's criterion holds the curriculum is finished.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_CURRICULUM_H_
#define WINDQUANT_COMMON_RL_CURRICULUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/run_config.h"

namespace windquant::rl {

class Curriculum {
 public:
  explicit Curriculum(const config::CurriculumConfig& config) : config_(config) {}

  int stage() const { return stage_; }
  int num_stages() const { return static_cast<int>(config_.target_bits.size()); }
  double target_bits() const { return config_.target_bits[stage_]; }
  bool is_final_stage() const { return stage_ + 1 >= num_stages(); }
  bool finished() const { return finished_; }
  int updates_in_stage() const { return updates_in_stage_; }

  // Records one finished update of the current stage with the stage's best
  // feasible perplexity so far and the reference perplexity (<= 0 or
  // non-finite: unknown, then only max_updates ends the stage). Returns true
  // when the stage advanced (or, on the last stage, the curriculum finished);
  // `reason` then says why, for the log.
  bool OnUpdate(double best_ppl, double reference_ppl, std::string* reason);

  // Upper bound of the remaining updates (for ETAs).
  int64_t MaxRemainingUpdates() const;

  // For checkpoints.
  void Restore(int stage, int updates_in_stage, bool finished) {
    stage_ = stage;
    updates_in_stage_ = updates_in_stage;
    finished_ = finished;
  }

 private:
  config::CurriculumConfig config_;
  int stage_ = 0;
  int updates_in_stage_ = 0;
  bool finished_ = false;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_CURRICULUM_H_
