// GrpcActivationTransport: an ActivationTransport to a remote actor over its
// Actor service: a pass is one bidirectional Forward (or Calibrate) stream,
// the first Forward request carrying the plan in full. Layers come from
// GetStageInfo; FinishCalibration is the RPC of that name. Deadlines follow
// the work of each call (work_deadline.h). With UsePipe the micro-batches travel
// over a pipe beside the stream (tensor_pipes.h: NCCL between GPUs), which the
// stream's messages announce.
// Thread-safety: as ActivationTransport; passes over a pipe take turns (one at a
// time holds it). Owns the stub and the pipe.
#ifndef WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/activation_transport.h"
#include "common/transport/tensor_pipes.h"
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
  // From now on the micro-batches go over a pipe of `kind` (nccl, in-process) whose
  // end here is on `device` (where the evaluator's head computes): a pass connects one
  // (the ConnectPipe call) when there is none, holds it while it runs and gives it up
  // when it does not end cleanly (an error, an early end: a frame may be left in it, or
  // the actor restarted), so the next pass connects anew. Call before the first Open.
  void UsePipe(PipeKind kind, at::Device device);
  // Pipes connected so far (a reconnect after a failed pass counts).
  int64_t pipes_connected() const { return pipes_connected_.load(); }

 private:
  // Waits until no pass holds the pipe, then holds it (connecting one when there is
  // none, by `deadline`): the pipe and its id.
  absl::StatusOr<std::pair<TensorPipe*, std::string>> HoldPipe(absl::Time deadline);
  // Ends a hold; `keep` false closes and drops the pipe.
  void ReleasePipe(bool keep);

  std::unique_ptr<v1::Actor::Stub> stub_;
  const std::string name_;
  const absl::Duration deadline_;
  const int64_t weights_per_layer_;

  PipeKind pipe_kind_ = PipeKind::kGrpc;
  at::Device pipe_device_{at::kCPU};
  absl::Mutex pipe_mu_;
  bool pipe_busy_ ABSL_GUARDED_BY(pipe_mu_) = false;  // a pass holds it
  std::unique_ptr<TensorPipe> pipe_ ABSL_GUARDED_BY(pipe_mu_);
  std::string pipe_id_ ABSL_GUARDED_BY(pipe_mu_);
  std::atomic<int64_t> pipes_connected_{0};
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_GRPC_ACTIVATION_TRANSPORT_H_
