// ReplicaEvaluator: what the EvaluationQueue needs of an evaluator, and nothing
// more: the calibration pass of one replica's stages and the evaluation of a plan
// through them (rl::PlanEvaluation). PipelineEvaluator is the implementation; a test
// may fake it. Implementations are thread-safe: the queue calls them from one worker
// per replica.
#ifndef WINDQUANT_EVALUATOR_REPLICA_EVALUATOR_H_
#define WINDQUANT_EVALUATOR_REPLICA_EVALUATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/rl/plan_evaluation.h"
#include "common/transport/activation_transport.h"

namespace windquant::evaluator {

using rl::PlanEvaluation;

class ReplicaEvaluator {
 public:
  virtual ~ReplicaEvaluator() = default;

  // The calibration's identity (quant::CalibrationKey) the stages' tables carry.
  virtual std::string CalibrationFingerprint() const = 0;
  // Calibration pass through `stages` (one replica, stage order), then every stage fits
  // its shard; returns the stage tables in stage order.
  virtual absl::StatusOr<std::vector<plan::UnitTable>> Calibrate(
      const std::vector<transport::ActivationTransport*>& stages,
      const std::string& fingerprint) = 0;
  // Evaluates `plan` through `stages` (identical plans may be answered from a cache).
  virtual absl::StatusOr<rl::PlanEvaluation> Evaluate(
      const std::vector<transport::ActivationTransport*>& stages, const plan::Plan& plan) = 0;
  // The perplexity of `plan` on the held-out text through `stages` (the
  // eval_* fields and tokens are the held-out text's). FAILED_PRECONDITION
  // when the evaluator has none (the default).
  virtual absl::StatusOr<rl::PlanEvaluation> HeldOutPerplexity(
      const std::vector<transport::ActivationTransport*>& /*stages*/, const plan::Plan& /*plan*/) {
    return absl::FailedPreconditionError("evaluation.heldout: the evaluator has no held-out text");
  }
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_REPLICA_EVALUATOR_H_
