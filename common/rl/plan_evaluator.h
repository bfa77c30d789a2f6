// PlanEvaluator: what the trainer, the benches and the RL tests ask for a
// plan's measured quality (DESIGN.md section 4), whoever measures it:
// LocalPlanEvaluator (the real model in this process), CachingPlanEvaluator
// (any PlanEvaluator, identical plans measured once) and
// testing::SyntheticEvaluator (closed form, no model). How a plan is measured
// (in this process or through the stages of a pipeline) is a PlanBackend's
// business (plan_backend.h); PlanEvaluationCore turns what a backend measures
// into a PlanEvaluation, once for every backend.
#ifndef WINDQUANT_COMMON_RL_PLAN_EVALUATOR_H_
#define WINDQUANT_COMMON_RL_PLAN_EVALUATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// Thread-compatible (implementations may mutate a model).
class PlanEvaluator {
 public:
  virtual ~PlanEvaluator() = default;
  // Measures `actions` (one action index per unit of the global table).
  // INVALID_ARGUMENT for a malformed plan; INTERNAL for a model failure.
  virtual absl::StatusOr<PlanEvaluation> Evaluate(const std::vector<int>& actions) = 0;
  // FP perplexity on the evaluation slice (the reference of d).
  virtual double fp_eval_ppl() const = 0;
};

// Hash of an action vector (FNV-1a over the indices).
uint64_t PlanHash(const std::vector<int>& actions);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_EVALUATOR_H_
