// LearnerService: the Learner gRPC service (learner.proto), a thin adapter over
// LearnerCore: validates each request (INVALID_ARGUMENT naming the field),
// calls the core, maps the status.
// Thread-safety: handlers run concurrently; LearnerCore is thread-safe.
#ifndef WINDQUANT_LEARNER_LEARNER_SERVICE_H_
#define WINDQUANT_LEARNER_LEARNER_SERVICE_H_

#include <atomic>

#include "learner/learner_core.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::learner {

class LearnerService final : public v1::Learner::Service {
 public:
  explicit LearnerService(LearnerCore* core) : core_(core) {}

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

 private:
  LearnerCore* const core_;
  std::atomic<int> watchers_{0};
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_SERVICE_H_
