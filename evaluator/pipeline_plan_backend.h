// PipelinePlanBackend: the rl::PlanBackend of one replica's stages (DESIGN.md
// section 5). A plan runs on the stages (each applies its shard of the plan
// to its fitted layers, keyed by PipelineEvaluator::PlanKey) and the
// PipelineEvaluator measures both slices through them:
//   calibration slice: the first calib_slice_tokens of the calibration text,
//   evaluation slice:  the first eval_slice_tokens of the evaluation text.
// A light handle: borrows the evaluator and the transports, holds nothing.
// Thread-compatible (one measurement at a time through one replica).
#ifndef WINDQUANT_EVALUATOR_PIPELINE_PLAN_BACKEND_H_
#define WINDQUANT_EVALUATOR_PIPELINE_PLAN_BACKEND_H_

#include <vector>

#include "common/rl/plan_backend.h"
#include "common/transport/activation_transport.h"

namespace windquant::evaluator {

class PipelineEvaluator;

class PipelinePlanBackend : public rl::PlanBackend {
 public:
  // `evaluator` and the transports of `stages` must outlive this.
  PipelinePlanBackend(PipelineEvaluator* evaluator,
                      const std::vector<transport::ActivationTransport*>& stages)
      : evaluator_(evaluator), stages_(stages) {}

  // The errors of PipelineEvaluator::Perplexity, prefixed with the stage at
  // fault (a stage's INVALID_ARGUMENT for a malformed plan, UNAVAILABLE or
  // FAILED_PRECONDITION from a stage that lost its fits).
  absl::StatusOr<rl::SliceMeasurement> Measure(const plan::Plan* plan) override;

 private:
  PipelineEvaluator* const evaluator_;
  const std::vector<transport::ActivationTransport*>& stages_;
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_PIPELINE_PLAN_BACKEND_H_
