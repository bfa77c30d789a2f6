// LearnerService: the Learner gRPC service (learner.proto), a thin adapter over
// LearnerCore: validates each request (INVALID_ARGUMENT naming the field),
// calls the core, maps the status.
// Thread-safety: handlers run concurrently; LearnerCore is thread-safe.
#ifndef WINDQUANT_LEARNER_LEARNER_SERVICE_H_
#define WINDQUANT_LEARNER_LEARNER_SERVICE_H_

#include <atomic>

#include "common/metrics/registry.h"
#include "learner/learner_core.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::learner {

class LearnerService final : public v1::Learner::Service {
 public:
  // `registry` (optional) gets windquant_learner_connected_actors (open
  // WatchPolicy streams).
  explicit LearnerService(LearnerCore* core, metrics::Registry* registry = nullptr);

  grpc::Status RegisterUnitTable(grpc::ServerContext*, const v1::RegisterUnitTableRequest*,
                                 v1::RegisterUnitTableReply*) override;
  grpc::Status StreamTransitions(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::TransitionAck, v1::TransitionBatch>*) override;
  grpc::Status WatchPolicy(grpc::ServerContext*, const v1::WatchPolicyRequest*,
                           grpc::ServerWriter<v1::PolicySnapshot>*) override;
  grpc::Status ReportEvaluation(grpc::ServerContext*, const v1::EvaluationReport*,
                                v1::ReportEvaluationReply*) override;
  grpc::Status GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                            v1::RunStatus*) override;
  grpc::Status GetUnitTable(grpc::ServerContext*, const v1::GetUnitTableRequest*,
                            v1::UnitTable*) override;

  // Ends the policy streams (UNAVAILABLE, the actors reconnect to the next
  // learner) so that a drain does not wait for them. Call before Drain.
  void BeginShutdown() { shutting_down_ = true; }

 private:
  LearnerCore* const core_;
  std::atomic<int> watchers_{0};
  std::atomic<bool> shutting_down_{false};
  metrics::Gauge* connected_ = nullptr;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_SERVICE_H_
