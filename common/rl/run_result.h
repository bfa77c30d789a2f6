// RunResult: what a training run returns (learner::LearnerCore::Result), for
// the quantize job's final measurements and report and the learner's final
// artifacts.
#ifndef WINDQUANT_COMMON_RL_RUN_RESULT_H_
#define WINDQUANT_COMMON_RL_RUN_RESULT_H_

#include <cstdint>
#include <vector>

#include "common/rl/candidate_plan.h"
#include "common/rl/run_history.h"

namespace windquant::rl {

struct RunResult {
  CandidatePlan best;       // best feasible at the final target (actions empty if none)
  CandidatePlan reference;  // the final stage's reference plan as evaluated (may be empty)
  std::vector<UpdateRecord> curve;
  std::vector<StageEvent> stages;
  double lambda = 0;
  int64_t updates = 0;               // total, including those before a resume
  int64_t resumed_from_update = -1;  // -1: fresh run
  int64_t evaluations = 0;           // evaluations received in this process, cached included
  int64_t cache_hits = 0;            // of those, answered from the evaluator's cache
  // Real (uncached) evaluations of the whole run, those before a resume (up
  // to its checkpoint) included.
  int64_t real_evaluations = 0;
  double seconds = 0;          // wall time of this process
  bool stopped_early = false;  // stop_after_updates hit
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_RUN_RESULT_H_
