#include "common/transport/grpc_activation_transport.h"

#include <atomic>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "common/transport/hidden_states_codec.h"
#include "common/transport/work_deadline.h"

namespace windquant::transport {
namespace {

// One pass over a bidi stream; Req is ForwardRequest or CalibrateRequest.
template <typename Req, typename Resp>
class GrpcStageStream : public StageStream {
 public:
  using Start =
      std::function<std::unique_ptr<grpc::ClientReaderWriter<Req, Resp>>(grpc::ClientContext*)>;
  GrpcStageStream(const Start& start, absl::Duration deadline,
                  std::function<void(Req*, bool first)> fill)
      : fill_(std::move(fill)) {
    net::ConfigureContext(context_, deadline);
    stream_ = start(&context_);
  }
  ~GrpcStageStream() override {
    if (!finished_) {
      context_.TryCancel();
      stream_->Finish();
    }
  }
  absl::Status Send(MicroBatch batch) override {
    Req req;
    fill_(&req, first_);
    first_ = false;
    req.set_request_id(static_cast<uint64_t>(batch.index));
    EncodeHiddenStates(batch.hidden, batch.index, req.mutable_hidden());
    // As EncodeHiddenStates sends it.
    sent_dtype_.store(
        static_cast<int>(batch.hidden.scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kFloat));
    // A failed write means the actor ended the call; its status (e.g.
    // INVALID_ARGUMENT naming the field) is what Receive reports, so the
    // write failure itself is not an error here.
    stream_->Write(req);
    return absl::OkStatus();
  }
  absl::StatusOr<MicroBatch> Receive() override {
    Resp resp;
    if (!stream_->Read(&resp)) {
      finished_ = true;
      const grpc::Status s = stream_->Finish();
      if (s.ok()) return absl::OutOfRangeError("end of stream");
      return net::FromGrpcStatus(s);
    }
    // The stage answers in the dtype it was sent (its compute dtype): anything else is a
    // stage of another model.compute_dtype.
    const int sent = sent_dtype_.load();
    std::optional<at::ScalarType> expected;
    if (sent >= 0) expected = static_cast<at::ScalarType>(sent);
    WQ_ASSIGN_OR_RETURN(at::Tensor hidden, DecodeHiddenStates(resp.hidden(), "hidden", expected));
    return MicroBatch{static_cast<int32_t>(resp.request_id()), hidden};
  }
  absl::Status CloseSend() override {
    stream_->WritesDone();
    return absl::OkStatus();
  }

 private:
  std::function<void(Req*, bool)> fill_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<Req, Resp>> stream_;
  bool first_ = true;
  bool finished_ = false;
  std::atomic<int> sent_dtype_{-1};  // at::ScalarType of the last batch sent (-1: none)
};

}  // namespace

GrpcActivationTransport::GrpcActivationTransport(std::shared_ptr<grpc::Channel> channel,
                                                 std::string name, absl::Duration deadline,
                                                 int64_t weights_per_layer)
    : stub_(v1::Actor::NewStub(std::move(channel))),
      name_(std::move(name)),
      deadline_(deadline),
      weights_per_layer_(weights_per_layer) {}

absl::StatusOr<v1::StageInfo> GrpcActivationTransport::Info() {
  grpc::ClientContext context;
  net::ConfigureContext(context, deadline_, /*wait_for_ready=*/true);
  v1::StageInfo info;
  const grpc::Status s = stub_->GetStageInfo(&context, v1::StageInfoRequest(), &info);
  if (!s.ok()) return net::FromGrpcStatus(s);
  return info;
}

absl::StatusOr<std::pair<int64_t, int64_t>> GrpcActivationTransport::Layers() {
  WQ_ASSIGN_OR_RETURN(v1::StageInfo info, Info());
  return std::make_pair<int64_t, int64_t>(info.first_layer(), info.end_layer());
}

absl::StatusOr<std::unique_ptr<StageStream>> GrpcActivationTransport::Open(const PassSpec& spec) {
  const absl::Duration deadline = PassDeadline(deadline_, spec.weights, spec.tokens);
  if (spec.mode == PassMode::kCalibrate) {
    using S = GrpcStageStream<v1::CalibrateRequest, v1::CalibrateResponse>;
    return std::unique_ptr<StageStream>(
        new S([this](grpc::ClientContext* c) { return stub_->Calibrate(c); }, deadline,
              [](v1::CalibrateRequest*, bool) {}));
  }
  using S = GrpcStageStream<v1::ForwardRequest, v1::ForwardResponse>;
  PassSpec copy = spec;
  return std::unique_ptr<StageStream>(
      new S([this](grpc::ClientContext* c) { return stub_->Forward(c); }, deadline,
            [copy](v1::ForwardRequest* req, bool first) {
              req->set_plan_id(copy.plan_id);
              if (first && !copy.plan_id.empty() && copy.actions != nullptr) {
                v1::Plan* plan = req->mutable_plan();
                plan->set_plan_id(copy.plan_id);
                plan->set_model_fingerprint(copy.model_fingerprint);
                for (int a : *copy.actions) plan->add_actions(static_cast<uint32_t>(a));
              }
            }));
}

absl::StatusOr<plan::UnitTable> GrpcActivationTransport::FinishCalibration(
    const std::string& fingerprint) {
  int64_t weights = 0;
  if (weights_per_layer_ > 0) {
    WQ_ASSIGN_OR_RETURN(auto layers, Layers());
    weights = (layers.second - layers.first) * weights_per_layer_;
  }
  grpc::ClientContext context;
  net::ConfigureContext(context, FitDeadline(deadline_, weights));
  v1::FinishCalibrationRequest req;
  req.set_calibration_fingerprint(fingerprint);
  v1::FinishCalibrationReply reply;
  const grpc::Status s = stub_->FinishCalibration(&context, req, &reply);
  if (!s.ok()) return net::FromGrpcStatus(s);
  return plan::UnitTable::FromProto(reply.table());
}

}  // namespace windquant::transport
