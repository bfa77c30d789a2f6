// PlanEvaluationCore: a plan's evaluation (DESIGN.md section 4), written once
// for every backend (plan_backend.h):
//   - the full-precision reference, measured once through a backend and kept;
//   - identical plans answered from a PlanCache (cached = true);
//   - the PlanEvaluation assembled from what the backend measured:
//       loss increase = mean NLL(plan) - mean NLL(FP) on the calibration slice,
//       d             = PPL(plan) / PPL(FP) - 1 on the evaluation slice.
// The backend comes with each call, so the replicas of a pipeline (one
// backend each) share one reference and one cache.
// Memory: the PlanCache's (no tensor).
// Thread-safety: all methods are thread-safe; measurements through different
// backends run concurrently (a backend is used by one call at a time).
#ifndef WINDQUANT_COMMON_RL_PLAN_EVALUATION_CORE_H_
#define WINDQUANT_COMMON_RL_PLAN_EVALUATION_CORE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/plan/plan.h"
#include "common/rl/plan_backend.h"
#include "common/rl/plan_cache.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// The reference of the full-precision model: calib_nll, eval_nll, eval_ppl,
// tokens and seconds of `fp` (no loss increase, d = 0, effective bits 0).
PlanEvaluation ReferenceEvaluation(const SliceMeasurement& fp);

// A plan's evaluation from its measurement and the full-precision reference.
PlanEvaluation AssembleEvaluation(const SliceMeasurement& measured,
                                  const PlanEvaluation& reference);

class PlanEvaluationCore {
 public:
  // `cache_capacity` plans remembered (0: none, PlanCache::kUnbounded: all).
  explicit PlanEvaluationCore(size_t cache_capacity) : cache_(cache_capacity) {}

  // The full-precision reference, measured through `backend` on first use.
  // The backend's errors.
  absl::StatusOr<PlanEvaluation> Reference(PlanBackend& backend);
  // The reference when it has been measured.
  std::optional<PlanEvaluation> reference() const;

  // Evaluates `plan` through `backend`: from the cache when an identical plan
  // (fingerprint and actions) was measured, else the reference (measured
  // first when needed) and the plan measured. The backend's errors; a failed
  // measurement is not cached.
  absl::StatusOr<PlanEvaluation> Evaluate(PlanBackend& backend, const plan::Plan& plan);

  const PlanCache& cache() const { return cache_; }

 private:
  PlanCache cache_;
  mutable absl::Mutex mu_;
  std::optional<PlanEvaluation> reference_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_EVALUATION_CORE_H_
