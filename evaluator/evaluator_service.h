// EvaluatorService: the Evaluator gRPC service (evaluator.proto), a thin
// adapter over EvaluationQueue: validates the plan (INVALID_ARGUMENT naming the
// field: fingerprint of another model, wrong action count, action out of
// range, bad identifiers, non-finite bits), queues or evaluates it (EvaluatePlan:
// on the selection slice, or on the held-out text for final numbers).
// Thread-safety: handlers run concurrently; the queue is thread-safe.
#ifndef WINDQUANT_EVALUATOR_EVALUATOR_SERVICE_H_
#define WINDQUANT_EVALUATOR_EVALUATOR_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "evaluator/evaluation_queue.h"
#include "windquant/v1/evaluator.grpc.pb.h"

namespace windquant::evaluator {

class EvaluatorService final : public v1::Evaluator::Service {
 public:
  // `table` answers the run's global unit table (from the learner), used to
  // validate plans; UNAVAILABLE while it is not complete.
  using TableFn = std::function<absl::StatusOr<plan::UnitTable>()>;
  EvaluatorService(EvaluationQueue* queue, TableFn table)
      : queue_(queue), table_(std::move(table)) {}

  grpc::Status SubmitPlan(grpc::ServerContext*, const v1::SubmitPlanRequest*,
                          v1::SubmitPlanReply*) override;
  grpc::Status GetQueueStatus(grpc::ServerContext*, const v1::QueueStatusRequest*,
                              v1::QueueStatus* out) override;
  grpc::Status EvaluatePlan(grpc::ServerContext*, const v1::EvaluatePlanRequest*,
                            v1::EvaluationReport*) override;

 private:
  absl::StatusOr<plan::Plan> CheckPlan(const v1::Plan& plan, double* effective_bits);
  EvaluationQueue* const queue_;
  TableFn table_;
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_EVALUATOR_SERVICE_H_
