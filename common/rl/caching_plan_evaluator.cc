#include "common/rl/caching_plan_evaluator.h"

#include <optional>
#include <utility>

#include "common/base/status_macros.h"

namespace windquant::rl {

absl::StatusOr<PlanEvaluation> CachingPlanEvaluator::Evaluate(const std::vector<int>& actions) {
  // The inner evaluator measures one model: the plan's actions are the key.
  if (std::optional<PlanEvaluation> hit = cache_.Find("", actions)) return *hit;
  WQ_ASSIGN_OR_RETURN(PlanEvaluation e, inner_->Evaluate(actions));
  return cache_.Insert("", actions, std::move(e));
}

}  // namespace windquant::rl
