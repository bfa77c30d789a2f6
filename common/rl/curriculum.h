// Curriculum over target bits (DESIGN.md section 4): training starts at
// curriculum.target_bits[0] and steps down through the list (e.g. 3.0 -> 2.5
// -> 2.0), one curriculum step per target. A step ends after max_updates
// updates, or earlier, after at least min_updates, once the best feasible plan
// of the step has a measured perplexity within advance_ppl_ratio of the step's
// reference (the best baseline evaluated at the step's target):
//
//   advance  iff  updates >= max_updates
//            or  (updates >= min_updates and best_ppl <= advance_ppl_ratio * reference_ppl)
//
// After the last step's criterion holds the curriculum is finished. ("Stage"
// is a pipeline shard elsewhere; the config keys, checkpoint and proto fields
// keep their older curriculum "stage" names.)
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_CURRICULUM_H_
#define WINDQUANT_COMMON_RL_CURRICULUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/rl/curriculum_options.h"

namespace windquant::rl {

class Curriculum {
 public:
  explicit Curriculum(const CurriculumOptions& options) : options_(options) {}

  int step() const { return step_; }
  int num_steps() const { return static_cast<int>(options_.target_bits.size()); }
  double target_bits() const { return options_.target_bits[step_]; }
  bool is_final_step() const { return step_ + 1 >= num_steps(); }
  bool finished() const { return finished_; }
  int updates_in_step() const { return updates_in_step_; }

  // Records one finished update of the current step with the step's best
  // feasible perplexity so far and the reference perplexity (<= 0 or
  // non-finite: unknown, then only max_updates ends the step). Returns true
  // when the step advanced (or, on the last step, the curriculum finished);
  // `reason` then says why, for the log.
  bool OnUpdate(double best_ppl, double reference_ppl, std::string* reason);

  // Upper bound of the remaining updates (for ETAs).
  int64_t MaxRemainingUpdates() const;

  // For checkpoints.
  void Restore(int step, int updates_in_step, bool finished) {
    step_ = step;
    updates_in_step_ = updates_in_step;
    finished_ = finished;
  }

 private:
  CurriculumOptions options_;
  int step_ = 0;
  int updates_in_step_ = 0;
  bool finished_ = false;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_CURRICULUM_H_
