#include "evaluator/pipeline_plan_backend.h"

#include "common/base/status_macros.h"
#include "evaluator/pipeline_evaluator.h"

namespace windquant::evaluator {

absl::StatusOr<rl::SliceMeasurement> PipelinePlanBackend::Measure(const plan::Plan* plan) {
  const transport::PassSpec spec = PipelineEvaluator::PlanPass(plan);
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
