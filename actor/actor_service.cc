#include "actor/actor_service.h"

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "actor/stage_exporter.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"
#include "common/net/status_convert.h"
#include "common/quant/table_fingerprint.h"
#include "common/rl/plan_validation.h"
#include "common/transport/hidden_states_codec.h"
#include "common/transport/local_activation_transport.h"
#include "common/transport/tensor_pipes.h"

namespace windquant::actor {

ActorService::ActorService(stage::StageWorker* worker, ActorIdentity identity, TableSink on_table,
                           metrics::Registry* registry)
    : worker_(worker),
      identity_(std::move(identity)),
      on_table_(std::move(on_table)),
      registry_(registry) {}

namespace {

// Checks the plan of a Forward request against the stage's table.
absl::StatusOr<std::shared_ptr<const std::vector<int>>> CheckPlan(const v1::Plan& plan,
                                                                  const std::string& plan_id,
                                                                  stage::StageWorker& worker) {
  if (!plan.plan_id().empty() && plan.plan_id() != plan_id) {
    return absl::InvalidArgumentError("plan.plan_id: differs from plan_id");
  }
  absl::StatusOr<plan::UnitTable> table = worker.table();
  if (!table.ok()) return table.status();
  WQ_RETURN_IF_ERROR(rl::ValidatePlan(plan, *table, rl::PlanScope::kStage));
  return std::make_shared<const std::vector<int>>(plan.actions().begin(), plan.actions().end());
}

}  // namespace

grpc::Status ActorService::Forward(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ForwardResponse, v1::ForwardRequest>* stream) {
  auto* histogram =
      registry_
          ? metrics::HistogramFamily(*registry_, metrics::kActorForwardDurationSeconds).value()
          : nullptr;
  v1::ForwardRequest req;
  transport::PassSpec spec;
  while (stream->Read(&req)) {
    if (req.plan_id() != spec.plan_id || req.has_plan()) {
      if (!req.plan_id().empty()) {
        absl::Status s = net::RequireIdentifier("plan_id", req.plan_id());
        if (!s.ok()) return net::ToGrpcStatus(s);
      }
      spec.plan_id = req.plan_id();
      spec.actions = nullptr;
      spec.model_fingerprint.clear();
      if (req.has_plan() && !req.plan_id().empty()) {
        auto actions = CheckPlan(req.plan(), req.plan_id(), *worker_);
        if (!actions.ok()) return net::ToGrpcStatus(actions.status());
        spec.actions = *std::move(actions);
        spec.model_fingerprint = req.plan().model_fingerprint();
      }
    }
    std::shared_ptr<transport::TensorPipe> pipe;
    absl::StatusOr<at::Tensor> hidden = ReceiveHidden(req, context, &pipe);
    if (!hidden.ok()) return net::ToGrpcStatus(hidden.status());
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<at::Tensor> out = transport::RunPassOnWorker(*worker_, spec, *hidden);
    if (!out.ok()) return net::ToGrpcStatus(out.status());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (histogram != nullptr) histogram->Get().Observe(seconds);
    v1::ForwardResponse resp;
    resp.set_request_id(req.request_id());
    resp.set_forward_seconds(seconds);
    absl::Status sent = AnswerHidden(*out, req, pipe.get(), &resp);
    if (!sent.ok()) return net::ToGrpcStatus(sent);
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

grpc::Status ActorService::Calibrate(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::CalibrateResponse, v1::CalibrateRequest>* stream) {
  v1::CalibrateRequest req;
  bool started = false;
  while (stream->Read(&req)) {
    std::shared_ptr<transport::TensorPipe> pipe;
    absl::StatusOr<at::Tensor> hidden = ReceiveHidden(req, context, &pipe);
    if (!hidden.ok()) return net::ToGrpcStatus(hidden.status());
    // A pass starts with its first valid batch: a bad first request leaves
    // the calibration state of the worker as it was.
    if (absl::Status s = worker_->CheckHidden(*hidden, "hidden"); !s.ok()) {
      return net::ToGrpcStatus(s);
    }
    if (!started) {
      worker_->StartCalibration();
      started = true;
    }
    absl::StatusOr<at::Tensor> out = worker_->Calibrate(*hidden);
    if (!out.ok()) return net::ToGrpcStatus(out.status());
    v1::CalibrateResponse resp;
    resp.set_request_id(req.request_id());
    absl::Status sent = AnswerHidden(*out, req, pipe.get(), &resp);
    if (!sent.ok()) return net::ToGrpcStatus(sent);
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

template <typename Req>
absl::StatusOr<at::Tensor> ActorService::ReceiveHidden(
    const Req& request, grpc::ServerContext* context,
    std::shared_ptr<transport::TensorPipe>* pipe) {
  if (request.pipe().empty()) return transport::DecodeHiddenStates(request.hidden(), "hidden");
  {
    absl::MutexLock lock(&pipe_mu_);
    if (pipe_ == nullptr || request.pipe() != pipe_id_) {
      return absl::UnavailableError(
          absl::StrCat("pipe: '", request.pipe(),
                       "' is not connected to this actor (it restarted, or another evaluator "
                       "connected since); the evaluator reconnects"));
    }
    *pipe = pipe_;
  }
  WQ_ASSIGN_OR_RETURN(
      transport::MicroBatch batch,
      transport::RecvFrame(**pipe, worker_->device(), absl::FromChrono(context->deadline())));
  if (static_cast<uint64_t>(static_cast<uint32_t>(batch.index)) != request.request_id()) {
    return absl::DataLossError(absl::StrCat("pipe: frame of micro-batch ", batch.index,
                                            " announced as ", request.request_id()));
  }
  return batch.hidden;
}

template <typename Req, typename Resp>
absl::Status ActorService::AnswerHidden(const at::Tensor& hidden, const Req& request,
                                        transport::TensorPipe* pipe, Resp* response) {
  if (pipe == nullptr) {
    transport::EncodeHiddenStates(hidden, request.hidden().micro_batch(),
                                  response->mutable_hidden());
    return absl::OkStatus();
  }
  response->set_pipe(request.pipe());
  return transport::SendFrame(
      *pipe, transport::MicroBatch{static_cast<int32_t>(request.request_id()), hidden});
}

grpc::Status ActorService::ConnectPipe(grpc::ServerContext* context,
                                       const v1::ConnectPipeRequest* request,
                                       v1::ConnectPipeReply* reply) {
  absl::Status s = net::RequireIdentifier("pipe_id", request->pipe_id());
  if (!s.ok()) return net::ToGrpcStatus(s);
  absl::StatusOr<std::unique_ptr<transport::TensorPipe>> end =
      transport::AcceptPipe(*request, worker_->device(), absl::FromChrono(context->deadline()));
  if (!end.ok()) return net::ToGrpcStatus(end.status());
  std::shared_ptr<transport::TensorPipe> replaced;
  {
    absl::MutexLock lock(&pipe_mu_);
    replaced = std::move(pipe_);
    pipe_ = *std::move(end);
    pipe_id_ = request->pipe_id();
  }
  if (replaced != nullptr) replaced->Close();  // a pass still on it fails, never waits
  reply->set_device(worker_->device().str());
  return grpc::Status::OK;
}

grpc::Status ActorService::FinishCalibration(grpc::ServerContext* context,
                                             const v1::FinishCalibrationRequest* request,
                                             v1::FinishCalibrationReply* reply) {
  absl::Status s =
      net::RequireNonEmpty("calibration_fingerprint", request->calibration_fingerprint());
  if (!s.ok()) return net::ToGrpcStatus(s);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<plan::UnitTable> table = worker_->FinishCalibration(
      quant::TableFingerprint(identity_.model_key, request->calibration_fingerprint()));
  if (!table.ok()) return net::ToGrpcStatus(table.status());
  reply->set_fit_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  table->ToProto(reply->mutable_table());
  if (on_table_) {
    absl::Status r = on_table_(*table);
    if (!r.ok()) return net::ToGrpcStatus(r);
  }
  return grpc::Status::OK;
}

grpc::Status ActorService::GetStageInfo(grpc::ServerContext* context,
                                        const v1::StageInfoRequest* request, v1::StageInfo* reply) {
  reply->set_stage(identity_.stage);
  reply->set_replica(identity_.replica);
  reply->set_stages(identity_.stages);
  reply->set_replicas(identity_.replicas);
  reply->set_first_layer(static_cast<int32_t>(worker_->first_layer()));
  reply->set_end_layer(static_cast<int32_t>(worker_->end_layer()));
  reply->set_num_layers(static_cast<int32_t>(worker_->config().num_hidden_layers));
  reply->set_hidden_size(static_cast<int32_t>(worker_->config().hidden_size));
  absl::StatusOr<plan::UnitTable> table = worker_->table();
  if (table.ok()) reply->set_model_fingerprint(table->fingerprint);
  reply->set_calibrated(table.ok());
  reply->set_unit_table_ready(table.ok());
  reply->set_device(worker_->device().str());
  return grpc::Status::OK;
}

grpc::Status ActorService::ExportStage(grpc::ServerContext* context,
                                       const v1::ExportStageRequest* request,
                                       grpc::ServerWriter<v1::ExportStageChunk>* writer) {
  absl::StatusOr<StageExportRequest> r = StageExportRequestFromProto(*request);
  if (!r.ok()) return net::ToGrpcStatus(r.status());
  if (absl::StatusOr<std::shared_ptr<const std::vector<int>>> plan =
          CheckPlan(request->plan(), request->plan().plan_id(), *worker_);
      !plan.ok()) {
    return net::ToGrpcStatus(plan.status());
  }
  const StageExporter exporter(worker_, {worker_->model_dir()});
  v1::ExportStageChunk chunk;
  const absl::Status s =
      exporter.Export(*r, [&](std::string_view bytes, uint64_t part_bytes) -> absl::Status {
        if (context->IsCancelled()) return absl::CancelledError("export: the caller went away");
        chunk.set_data(bytes.data(), bytes.size());
        chunk.set_part_bytes(part_bytes);
        if (!writer->Write(chunk)) return absl::CancelledError("export: the stream closed");
        return absl::OkStatus();
      });
  return net::ToGrpcStatus(s);
}

}  // namespace windquant::actor
