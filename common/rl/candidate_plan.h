// CandidatePlan: a plan the trainer considered, with its measurement, and the
// best-plan rule of the learner (ConsiderCandidate; DESIGN.md section 4):
// the lowest selection-slice perplexity among evaluated plans whose effective
// bits are within the final curriculum target (in the quality-target mode:
// the fewest bits among those within epsilon, QualityTargetBetter); the best at the current
// curriculum step's target among the plans the policy produced (not the
// reference) drives the curriculum criterion.
#ifndef WINDQUANT_COMMON_RL_CANDIDATE_PLAN_H_
#define WINDQUANT_COMMON_RL_CANDIDATE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

struct CandidatePlan {
  std::vector<int> actions;  // empty = none yet
  PlanEvaluation evaluation;
  double target_bits = 0;
  std::string source;  // "rl", "rl-greedy", "lagrange" (warm-start reference)
  int64_t update = 0;
  int64_t policy_version = 0;
};

// The quality-target mode's order of measured plans (lagrange.prices: target,
// docs/lagrange.md): true when a plan of `bits` and selection-slice
// degradation `d` is better than one of `other_bits` and `other_d` under
// "the fewest bits among the plans with d <= epsilon, ties (bits within
// 1e-9) to the lower d; a plan within epsilon beats every plan that is not;
// among plans none of which is within epsilon, the lower d" (so a run that
// met epsilon nowhere returns its least degraded plan). A non-finite d is
// never within epsilon and loses to every finite one.
bool QualityTargetBetter(double bits, double d, double other_bits, double other_d, double epsilon);

// Best-plan bookkeeping of the learner: `candidate`
// (measured, candidate.target_bits = the stage target it was made for)
// replaces `*best` (the best feasible at `final_target`, target_bits set to
// it) when its perplexity is finite and lower and its effective bits are
// within `final_target`; unless its source is "lagrange" (the reference), it
// also replaces `*best_stage` (may be nullptr) under the same rule at the
// stage target. Returns true when `*best` changed. With `max_ppl_increase` > 0
// (the quality-target mode's epsilon), `*best` follows QualityTargetBetter
// instead of the lower perplexity (the stage's best, the curriculum
// criterion, keeps the lower perplexity).
bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage, double max_ppl_increase = 0);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_CANDIDATE_PLAN_H_
