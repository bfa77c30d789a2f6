// CurriculumOptions: the curriculum's settings (curriculum.h), the run
// config's `curriculum` section as it is (config::RunConfig embeds it; the
// keys are validated once, in common/config/run_config.cc).
//
// Target bits step down through `target_bits`; a step advances after
// `min_updates` updates once the best feasible plan's PPL is within
// `advance_ppl_ratio` of the step's best baseline (or after `max_updates`).
#ifndef WINDQUANT_COMMON_RL_CURRICULUM_OPTIONS_H_
#define WINDQUANT_COMMON_RL_CURRICULUM_OPTIONS_H_

#include <vector>

namespace windquant::rl {

struct CurriculumOptions {
  std::vector<double> target_bits = {2.0};  // curriculum.target_bits, not empty
  int min_updates = 5;                      // curriculum.min_updates
  int max_updates = 20;                     // curriculum.max_updates, >= min_updates
  double advance_ppl_ratio = 1.0;           // curriculum.advance_ppl_ratio
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_CURRICULUM_OPTIONS_H_
