#include "common/rl/plan_evaluation_core.h"

#include "common/base/status_macros.h"

namespace windquant::rl {

PlanEvaluation ReferenceEvaluation(const SliceMeasurement& fp) {
  PlanEvaluation ref;
  ref.calib_nll = fp.calibration.nll;
  ref.eval_nll = fp.evaluation.nll;
  ref.eval_ppl = fp.evaluation.perplexity;
  ref.tokens = fp.calibration.tokens + fp.evaluation.tokens;
  ref.seconds = fp.calibration.seconds + fp.evaluation.seconds;
  return ref;
}

PlanEvaluation AssembleEvaluation(const SliceMeasurement& m, const PlanEvaluation& reference) {
  PlanEvaluation e = ReferenceEvaluation(m);
  e.effective_bits = m.effective_bits;
  // DESIGN.md section 4: the loss-increase term and d of the episode-end reward.
  e.loss_increase = m.calibration.nll - reference.calib_nll;
  e.relative_ppl_increase = m.evaluation.perplexity / reference.eval_ppl - 1.0;
  return e;
}

absl::StatusOr<PlanEvaluation> PlanEvaluationCore::Reference(PlanBackend& backend) {
  {
    absl::MutexLock lock(&mu_);
    if (reference_.has_value()) return *reference_;
  }
  // Measured without the lock: replicas measuring it at once agree, the last one is kept.
  WQ_ASSIGN_OR_RETURN(const SliceMeasurement fp, backend.Measure(nullptr));
  const PlanEvaluation ref = ReferenceEvaluation(fp);
  absl::MutexLock lock(&mu_);
  reference_ = ref;
  return ref;
}

std::optional<PlanEvaluation> PlanEvaluationCore::reference() const {
  absl::MutexLock lock(&mu_);
  return reference_;
}

absl::StatusOr<PlanEvaluation> PlanEvaluationCore::Evaluate(PlanBackend& backend,
                                                            const plan::Plan& plan) {
  if (std::optional<PlanEvaluation> hit = cache_.Find(plan.model_fingerprint, plan.actions)) {
    return *hit;
  }
  WQ_ASSIGN_OR_RETURN(const PlanEvaluation ref, Reference(backend));
  WQ_ASSIGN_OR_RETURN(const SliceMeasurement m, backend.Measure(&plan));
  return cache_.Insert(plan.model_fingerprint, plan.actions, AssembleEvaluation(m, ref));
}

}  // namespace windquant::rl
