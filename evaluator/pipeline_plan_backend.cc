#include "evaluator/pipeline_plan_backend.h"

#include <memory>

#include "common/base/status_macros.h"
#include "evaluator/pipeline_evaluator.h"

namespace windquant::evaluator {

absl::StatusOr<rl::SliceMeasurement> PipelinePlanBackend::Measure(const quant::Plan* plan) {
  transport::PassSpec spec;  // empty plan id: full precision
  if (plan != nullptr) {
    spec.plan_id = PipelineEvaluator::PlanKey(*plan);
    spec.model_fingerprint = plan->model_fingerprint;
    spec.actions = std::make_shared<const std::vector<int>>(plan->actions);
  }
  const PipelineEvaluatorOptions& o = evaluator_->options();
  rl::SliceMeasurement m;
  WQ_ASSIGN_OR_RETURN(
      m.calibration,
      evaluator_->Perplexity(stages_, spec, evaluator_->calibration_ids(), o.calib_slice_tokens));
  WQ_ASSIGN_OR_RETURN(
      m.evaluation,
      evaluator_->Perplexity(stages_, spec, evaluator_->evaluation_ids(), o.eval_slice_tokens));
  return m;
}

}  // namespace windquant::evaluator
