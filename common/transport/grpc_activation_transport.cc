#include "common/transport/grpc_activation_transport.h"

#include <atomic>
#include <functional>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "common/transport/hidden_states_codec.h"
#include "common/transport/work_deadline.h"

namespace windquant::transport {
namespace {

// A pass's hold on its transport's pipe (UsePipe): `release(keep)` ends it.
struct PipeHold {
  TensorPipe* pipe;
  std::string id;
  at::Device device;
  std::function<void(bool keep)> release;
};

// One pass over a bidi stream; Req is ForwardRequest or CalibrateRequest. With a pipe
// the messages announce the micro-batches (their `pipe`) and the tensors go over the pipe.
template <typename Req, typename Resp>
class GrpcStageStream : public StageStream {
 public:
  using Start =
      std::function<std::unique_ptr<grpc::ClientReaderWriter<Req, Resp>>(grpc::ClientContext*)>;
  GrpcStageStream(const Start& start, absl::Duration deadline,
                  std::function<void(Req*, bool first)> fill, std::optional<PipeHold> hold)
      : fill_(std::move(fill)), hold_(std::move(hold)), deadline_(absl::Now() + deadline) {
    net::ConfigureContext(context_, deadline);
    stream_ = start(&context_);
  }
  ~GrpcStageStream() override {
    if (!finished_) {
      context_.TryCancel();
      stream_->Finish();
    }
    // Only a pass that ended cleanly leaves the pipe empty and in step.
    if (hold_) hold_->release(clean_);
  }
  absl::Status Send(MicroBatch batch) override {
    Req req;
    fill_(&req, first_);
    first_ = false;
    req.set_request_id(static_cast<uint64_t>(batch.index));
    if (hold_) {
      req.set_pipe(hold_->id);
      sent_dtype_.store(static_cast<int>(batch.hidden.scalar_type()));
    } else {
      EncodeHiddenStates(batch.hidden, batch.index, req.mutable_hidden());
      // As EncodeHiddenStates sends it.
      sent_dtype_.store(static_cast<int>(batch.hidden.scalar_type() == at::kBFloat16 ? at::kBFloat16
                                                                                     : at::kFloat));
    }
    // A failed write means the actor ended the call; its status (e.g.
    // INVALID_ARGUMENT naming the field) is what Receive reports, so the
    // write failure itself is not an error here.
    stream_->Write(req);
    if (hold_) return SendFrame(*hold_->pipe, batch);
    return absl::OkStatus();
  }
  absl::StatusOr<MicroBatch> Receive() override {
    Resp resp;
    if (!stream_->Read(&resp)) {
      finished_ = true;
      const grpc::Status s = stream_->Finish();
      if (!s.ok()) return net::FromGrpcStatus(s);
      clean_ = true;
      return absl::OutOfRangeError("end of stream");
    }
    // The stage answers in the dtype it was sent (its compute dtype): anything else is a
    // stage of another model.compute_dtype.
    const int sent = sent_dtype_.load();
    std::optional<at::ScalarType> expected;
    if (sent >= 0) expected = static_cast<at::ScalarType>(sent);
    const int32_t index = static_cast<int32_t>(resp.request_id());
    if (resp.pipe().empty()) {
      WQ_ASSIGN_OR_RETURN(at::Tensor hidden, DecodeHiddenStates(resp.hidden(), "hidden", expected));
      return MicroBatch{index, hidden};
    }
    if (!hold_ || resp.pipe() != hold_->id) {
      return absl::DataLossError(
          absl::StrCat("pipe: the stage answered over pipe '", resp.pipe(), "', not this pass's"));
    }
    WQ_ASSIGN_OR_RETURN(MicroBatch out, RecvFrame(*hold_->pipe, hold_->device, deadline_));
    if (out.index != index) {
      return absl::DataLossError(
          absl::StrCat("pipe: frame of micro-batch ", out.index, " announced as ", index));
    }
    if (expected.has_value() && out.hidden.scalar_type() != *expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden: ", c10::toString(out.hidden.scalar_type()), ", expected ",
                       c10::toString(*expected), " (peers of another model.compute_dtype)"));
    }
    return out;
  }
  absl::Status CloseSend() override {
    stream_->WritesDone();
    return absl::OkStatus();
  }

 private:
  std::function<void(Req*, bool)> fill_;
  std::optional<PipeHold> hold_;
  const absl::Time deadline_;
  bool clean_ = false;  // the actor ended the call with OK after every output
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

void GrpcActivationTransport::UsePipe(PipeKind kind, at::Device device) {
  pipe_kind_ = kind;
  pipe_device_ = device;
}

absl::StatusOr<std::pair<TensorPipe*, std::string>> GrpcActivationTransport::HoldPipe(
    absl::Time deadline) {
  {
    absl::MutexLock lock(&pipe_mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipe_mu_) { return !pipe_busy_; };
    if (!pipe_mu_.AwaitWithDeadline(absl::Condition(&idle), deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, ": the hidden-states pipe stayed busy until the pass's deadline"));
    }
    pipe_busy_ = true;
    if (pipe_ != nullptr) return std::make_pair(pipe_.get(), pipe_id_);
  }
  // Connect (the hold keeps other passes waiting; the lock is not held across the call).
  static std::atomic<uint64_t> next{std::random_device()() * uint64_t{2654435761}};
  const std::string id = absl::StrCat("pipe-", absl::Hex(next.fetch_add(1)));
  absl::StatusOr<std::unique_ptr<TensorPipe>> pipe =
      ConnectPipe(pipe_kind_, id, pipe_device_, absl::Now() + deadline_,
                  [this](const v1::ConnectPipeRequest& request) -> absl::Status {
                    grpc::ClientContext context;
                    net::ConfigureContext(context, deadline_, /*wait_for_ready=*/true);
                    v1::ConnectPipeReply reply;
                    const grpc::Status s = stub_->ConnectPipe(&context, request, &reply);
                    return s.ok() ? absl::OkStatus() : net::FromGrpcStatus(s);
                  });
  absl::MutexLock lock(&pipe_mu_);
  if (!pipe.ok()) {
    pipe_busy_ = false;
    return absl::Status(pipe.status().code(),
                        absl::StrCat(name_, ": connecting a ", PipeKindName(pipe_kind_),
                                     " pipe for hidden states: ", pipe.status().message()));
  }
  pipe_ = *std::move(pipe);
  pipe_id_ = id;
  pipes_connected_.fetch_add(1);
  return std::make_pair(pipe_.get(), pipe_id_);
}

void GrpcActivationTransport::ReleasePipe(bool keep) {
  std::unique_ptr<TensorPipe> dropped;
  {
    absl::MutexLock lock(&pipe_mu_);
    if (!keep) dropped = std::move(pipe_);
    pipe_busy_ = false;
  }
  if (dropped != nullptr) dropped->Close();
}

absl::StatusOr<std::unique_ptr<StageStream>> GrpcActivationTransport::Open(const PassSpec& spec) {
  const absl::Duration deadline = PassDeadline(deadline_, spec.weights, spec.tokens);
  std::optional<PipeHold> hold;
  if (pipe_kind_ != PipeKind::kGrpc) {
    WQ_ASSIGN_OR_RETURN(auto held, HoldPipe(absl::Now() + deadline));
    hold =
        PipeHold{held.first, held.second, pipe_device_, [this](bool keep) { ReleasePipe(keep); }};
  }
  if (spec.mode == PassMode::kCalibrate) {
    using S = GrpcStageStream<v1::CalibrateRequest, v1::CalibrateResponse>;
    return std::unique_ptr<StageStream>(
        new S([this](grpc::ClientContext* c) { return stub_->Calibrate(c); }, deadline,
              [](v1::CalibrateRequest*, bool) {}, std::move(hold)));
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
            },
            std::move(hold)));
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
