// GrpcActivationTransport: an ActivationTransport to a remote actor over its
// Actor service: a pass is one bidirectional Forward (or Calibrate) stream,
// the first Forward request carrying the plan in full. Layers come from
// GetStageInfo; FinishCalibration is the RPC of that name. Deadlines follow
// the work of each call (work_deadline.h).
// Thread-safety: as ActivationTransport. Owns nothing but the stub.
#ifndef WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/transport/activation_transport.h"
#include "grpcpp/channel.h"
#include "windquant/v1/actor.grpc.pb.h"

namespace windquant::transport {

class GrpcActivationTransport : public ActivationTransport {
 public:
  // `deadline`: of each unary call, and the base of the calls whose work
  // grows with the model (work_deadline.h): a pass gets PassDeadline of its
  // PassSpec's weights and tokens, FinishCalibration FitDeadline of the
  // stage's layers x `weights_per_layer` (0 = unknown: `deadline` alone).
  GrpcActivationTransport(std::shared_ptr<grpc::Channel> channel, std::string name,
                          absl::Duration deadline, int64_t weights_per_layer = 0);
  absl::StatusOr<std::pair<int64_t, int64_t>> Layers() override;
  absl::StatusOr<std::unique_ptr<StageStream>> Open(const PassSpec& spec) override;
  absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint) override;
  std::string Name() const override { return name_; }
  // The stage's info (also tells whether it is fitted).
  absl::StatusOr<v1::StageInfo> Info();

 private:
  std::unique_ptr<v1::Actor::Stub> stub_;
  const std::string name_;
  const absl::Duration deadline_;
  const int64_t weights_per_layer_;
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_
