// CachingPlanEvaluator: any PlanEvaluator with a PlanCache in front, so that
// identical plans are evaluated once (the benches' and the RL tests' view of a
// trainer's evaluator).
// Thread-compatible (the inner evaluator may mutate a model).
#ifndef WINDQUANT_COMMON_TESTING_CACHING_PLAN_EVALUATOR_H_
#define WINDQUANT_COMMON_TESTING_CACHING_PLAN_EVALUATOR_H_

#include <cstdint>
#include <vector>

#include "common/rl/plan_cache.h"
#include "common/rl/plan_evaluator.h"

namespace windquant::testing {

class CachingPlanEvaluator : public rl::PlanEvaluator {
 public:
  // Does not own `inner`, which must outlive this. Remembers every plan.
  explicit CachingPlanEvaluator(rl::PlanEvaluator* inner) : inner_(inner) {}
  // From the cache (cached = true), else `inner`'s (its errors, not cached).
  absl::StatusOr<rl::PlanEvaluation> Evaluate(const std::vector<int>& actions) override;
  double fp_eval_ppl() const override { return inner_->fp_eval_ppl(); }
  int64_t hits() const { return cache_.hits(); }
  int64_t misses() const { return cache_.misses(); }

 private:
  rl::PlanEvaluator* inner_;
  rl::PlanCache cache_;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_CACHING_PLAN_EVALUATOR_H_
