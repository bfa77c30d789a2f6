// ActorService: the Actor gRPC service (actor.proto), a thin adapter over a
// StageWorker: validates every request (INVALID_ARGUMENT naming the field),
// runs it, maps the status. FinishCalibration also hands the stage's table to
// `on_table` (the actor registers it with the learner). ConnectPipe makes this
// actor's end of a pipe for hidden states (tensor_pipes.h); a request announcing
// its micro-batch on that pipe gets it from there and answers there.
// Thread-safety: gRPC calls handlers concurrently; StageWorker is thread-safe; the
// pipe is used by one pass at a time (the evaluator's passes take turns).
#ifndef WINDQUANT_ACTOR_ACTOR_SERVICE_H_
#define WINDQUANT_ACTOR_ACTOR_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"
#include "common/stage/stage_worker.h"
#include "common/transport/tensor_frames.h"
#include "windquant/v1/actor.grpc.pb.h"

namespace windquant::actor {

struct ActorIdentity {
  int stage = 0, replica = 0, stages = 1, replicas = 1;
  std::string actor_id;   // "actor-s<stage>-r<replica>"
  std::string model_key;  // quant::ModelKey(): model + quant config
};

class ActorService final : public v1::Actor::Service {
 public:
  using TableSink = std::function<absl::Status(const plan::UnitTable&)>;
  ActorService(stage::StageWorker* worker, ActorIdentity identity, TableSink on_table,
               metrics::Registry* registry);

  grpc::Status Forward(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ForwardResponse, v1::ForwardRequest>* stream) override;
  grpc::Status Calibrate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CalibrateResponse, v1::CalibrateRequest>* stream) override;
  grpc::Status FinishCalibration(grpc::ServerContext* context,
                                 const v1::FinishCalibrationRequest* request,
                                 v1::FinishCalibrationReply* reply) override;
  grpc::Status ConnectPipe(grpc::ServerContext* context, const v1::ConnectPipeRequest* request,
                           v1::ConnectPipeReply* reply) override;
  grpc::Status GetStageInfo(grpc::ServerContext* context, const v1::StageInfoRequest* request,
                            v1::StageInfo* reply) override;
  // Streams a part of the export from the stage (stage_exporter.h).
  grpc::Status ExportStage(grpc::ServerContext* context, const v1::ExportStageRequest* request,
                           grpc::ServerWriter<v1::ExportStageChunk>* writer) override;

 private:
  // A request's hidden states: from its message, or micro-batch `request_id` over
  // the pipe `pipe_id` names (then `*pipe` is that pipe, for the answer). UNAVAILABLE
  // for a pipe not connected here (this actor restarted, or another evaluator connected
  // since: the evaluator reconnects), the codec's and the pipe's errors.
  template <typename Req>
  absl::StatusOr<at::Tensor> ReceiveHidden(const Req& request, grpc::ServerContext* context,
                                           std::shared_ptr<transport::TensorPipe>* pipe);
  // Puts `hidden` in the response, or sends it over `pipe` and names the pipe there.
  template <typename Req, typename Resp>
  absl::Status AnswerHidden(const at::Tensor& hidden, const Req& request,
                            transport::TensorPipe* pipe, Resp* response);

  stage::StageWorker* const worker_;
  const ActorIdentity identity_;
  const TableSink on_table_;
  metrics::Registry* const registry_;
  absl::Mutex pipe_mu_;
  std::shared_ptr<transport::TensorPipe> pipe_ ABSL_GUARDED_BY(pipe_mu_);
  std::string pipe_id_ ABSL_GUARDED_BY(pipe_mu_);
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_ACTOR_SERVICE_H_
