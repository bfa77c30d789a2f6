#include "common/rl/local_plan_evaluator.h"

#include <utility>

#include "common/base/status_macros.h"

namespace windquant::rl {

absl::StatusOr<std::unique_ptr<LocalPlanEvaluator>> LocalPlanEvaluator::Create(
    const model::LlamaModel* model, const quant::StageFits* fits, const plan::UnitTable* table,
    std::vector<int32_t> calib_ids, std::vector<int32_t> eval_ids,
    const LocalEvaluatorOptions& options) {
  model::PerplexityOptions ppl;
  ppl.context = options.context;
  ppl.batch_size = options.batch;
  std::unique_ptr<LocalPlanEvaluator> e(
      new LocalPlanEvaluator(model, fits, table, std::move(calib_ids), std::move(eval_ids), ppl));
  WQ_ASSIGN_OR_RETURN(e->reference_, e->core_.Reference(e->backend_));
  return e;
}

absl::StatusOr<PlanEvaluation> LocalPlanEvaluator::Evaluate(const std::vector<int>& actions) {
  plan::Plan plan;
  plan.actions = actions;
  return core_.Evaluate(backend_, plan);
}

}  // namespace windquant::rl
