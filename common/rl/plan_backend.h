// PlanBackend: where a plan's model runs when it is evaluated (DESIGN.md
// sections 4 and 5). A backend measures the perplexity of the model running a
// plan (or the full-precision model) on the two slices of an evaluation, with
// the protocol of model::ComputePerplexity; what those numbers mean (the loss
// increase, d, the cache of identical plans) is PlanEvaluationCore's, written
// once for every backend. Backends, one file each:
//   InProcessPlanBackend (common/rl)  the whole model in this process, the plan
//                                     applied from cached fits;
//   PipelinePlanBackend (evaluator/)  the stages of one replica, through
//                                     activation transports;
//   testing::FakePlanBackend          closed-form numbers, counts its calls.
#ifndef WINDQUANT_COMMON_RL_PLAN_BACKEND_H_
#define WINDQUANT_COMMON_RL_PLAN_BACKEND_H_

#include "absl/status/statusor.h"
#include "common/model/perplexity.h"
#include "common/plan/plan.h"

namespace windquant::rl {

// What a backend measures for one plan.
struct SliceMeasurement {
  model::PerplexityResult calibration;  // the calibration slice (the loss-increase term)
  model::PerplexityResult evaluation;   // the evaluation slice (the PPL term)
  double effective_bits = 0;            // of the plan when the backend knows its table, else 0
};

// Thread-compatible unless a backend says otherwise.
class PlanBackend {
 public:
  virtual ~PlanBackend() = default;
  // Measures the model running `plan` (its actions over the global unit
  // order), or the full-precision model when `plan` is nullptr. The
  // backend's errors: INVALID_ARGUMENT for a malformed plan, INTERNAL for a
  // model failure, UNAVAILABLE / FAILED_PRECONDITION from remote stages.
  virtual absl::StatusOr<SliceMeasurement> Measure(const plan::Plan* plan) = 0;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_BACKEND_H_
