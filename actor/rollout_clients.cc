#include "actor/rollout_clients.h"

#include <utility>

#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"

namespace windquant::actor {

GrpcLearnerClient::GrpcLearnerClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::Learner::NewStub(std::move(channel))) {}

GrpcLearnerClient::~GrpcLearnerClient() {
  cancel_.Cancel();
  ResetStream();
}

absl::StatusOr<v1::RunStatus> GrpcLearnerClient::GetRunStatus(absl::Duration deadline) {
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, deadline, /*wait_for_ready=*/true);
  net::Canceller::Scope scope(&cancel_, &ctx);
  v1::RunStatus run;
  WQ_RETURN_IF_ERROR(net::FromGrpcStatus(stub_->GetRunStatus(&ctx, v1::RunStatusRequest(), &run)));
  return run;
}

absl::StatusOr<plan::UnitTable> GrpcLearnerClient::GetUnitTable(absl::Duration deadline) {
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, deadline, /*wait_for_ready=*/true);
  net::Canceller::Scope scope(&cancel_, &ctx);
  v1::UnitTable proto;
  WQ_RETURN_IF_ERROR(
      net::FromGrpcStatus(stub_->GetUnitTable(&ctx, v1::GetUnitTableRequest(), &proto)));
  return plan::UnitTable::FromProto(proto);
}

absl::Status GrpcLearnerClient::WatchPolicy(const std::string& actor_id, int64_t known_version,
                                            const SnapshotFn& on_snapshot) {
  v1::WatchPolicyRequest req;
  req.set_actor_id(actor_id);
  req.set_known_version(known_version);
  grpc::ClientContext ctx;
  // Long-lived stream: ended by the learner, or by Cancel().
  net::ConfigureContext(ctx, absl::Hours(24), /*wait_for_ready=*/true);
  net::Canceller::Scope scope(&cancel_, &ctx);
  auto reader = stub_->WatchPolicy(&ctx, req);
  v1::PolicySnapshot snap;
  while (reader->Read(&snap)) on_snapshot(snap);
  return net::FromGrpcStatus(reader->Finish());
}

void GrpcLearnerClient::ResetStream() {
  stream_.reset();
  stream_scope_.reset();
  stream_ctx_.reset();
}

absl::StatusOr<v1::TransitionAck> GrpcLearnerClient::SendTransitions(
    const v1::TransitionBatch& batch) {
  if (stream_ == nullptr) {
    stream_ctx_ = std::make_unique<grpc::ClientContext>();
    // Long-lived stream: ended by a failure, or by Cancel().
    net::ConfigureContext(*stream_ctx_, absl::Hours(24), /*wait_for_ready=*/true);
    stream_scope_ = std::make_unique<net::Canceller::Scope>(&cancel_, stream_ctx_.get());
    stream_ = stub_->StreamTransitions(stream_ctx_.get());
  }
  v1::TransitionAck ack;
  if (stream_->Write(batch) && stream_->Read(&ack)) return ack;
  absl::Status st = net::FromGrpcStatus(stream_->Finish());
  ResetStream();
  if (st.ok()) return absl::UnavailableError("transitions stream: closed by the learner");
  return st;
}

void GrpcLearnerClient::CloseTransitions() {
  if (stream_ == nullptr) return;
  stream_->WritesDone();
  stream_ctx_->TryCancel();
  stream_->Finish().ok();
  ResetStream();
}

}  // namespace windquant::actor
