#include "common/testing/caching_plan_evaluator.h"

#include <optional>
#include <utility>

#include "common/base/status_macros.h"

namespace windquant::testing {

absl::StatusOr<rl::PlanEvaluation> CachingPlanEvaluator::Evaluate(const std::vector<int>& actions) {
  // The inner evaluator measures one model: the plan's actions are the key.
  if (std::optional<rl::PlanEvaluation> hit = cache_.Find("", actions)) return *hit;
  WQ_ASSIGN_OR_RETURN(rl::PlanEvaluation e, inner_->Evaluate(actions));
  return cache_.Insert("", actions, std::move(e));
}

}  // namespace windquant::testing
