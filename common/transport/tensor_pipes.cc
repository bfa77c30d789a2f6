#include "common/transport/tensor_pipes.h"

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#ifdef WQ_HAVE_NCCL
#include "common/transport/nccl_pipe.h"
#endif

namespace windquant::transport {
namespace {

// One direction of an in-process pipe: the messages sent and not yet received.
struct Queue {
  absl::Mutex mu;
  std::deque<at::Tensor> messages ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
};

// NCCL's contract (messages in order; the receiver's buffer has the sent element count
// and type), between two threads of one process.
class InProcessPipe : public TensorPipe {
 public:
  InProcessPipe(std::shared_ptr<Queue> out, std::shared_ptr<Queue> in)
      : out_(std::move(out)), in_(std::move(in)) {}
  ~InProcessPipe() override { Close(); }

  absl::Status Send(const at::Tensor& t) override {
    at::Tensor copy = t.contiguous().clone();
    absl::MutexLock lock(&out_->mu);
    if (out_->closed) return absl::UnavailableError("in-process pipe: closed");
    out_->messages.push_back(std::move(copy));
    return absl::OkStatus();
  }
  absl::Status Recv(at::Tensor& t, absl::Time deadline) override {
    at::Tensor m;
    {
      absl::MutexLock lock(&in_->mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(in_->mu) {
        return in_->closed || !in_->messages.empty();
      };
      in_->mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
      if (in_->closed) return absl::UnavailableError("in-process pipe: closed");
      if (in_->messages.empty()) {
        return absl::DeadlineExceededError("in-process pipe: nothing received by the deadline");
      }
      m = std::move(in_->messages.front());
      in_->messages.pop_front();
    }
    if (m.numel() != t.numel() || m.scalar_type() != t.scalar_type()) {
      return absl::DataLossError(absl::StrCat("in-process pipe: received ", m.numel(), " x ",
                                              c10::toString(m.scalar_type()), " into ", t.numel(),
                                              " x ", c10::toString(t.scalar_type())));
    }
    t.copy_(m.reshape(t.sizes()));
    return absl::OkStatus();
  }
  // Closes both directions: the peer's waits end too.
  void Close() override {
    for (Queue* q : {out_.get(), in_.get()}) {
      absl::MutexLock lock(&q->mu);
      q->closed = true;
    }
  }

 private:
  std::shared_ptr<Queue> out_, in_;
};

// In-process actor ends offered by ConnectPipe and not yet taken by AcceptPipe.
struct Offers {
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<TensorPipe>> pipes ABSL_GUARDED_BY(mu);
};
Offers& InProcessOffers() {
  static Offers* const offers = new Offers;  // never destroyed: used until exit
  return *offers;
}

absl::StatusOr<std::unique_ptr<TensorPipe>> ConnectInProcess(const v1::ConnectPipeRequest& request,
                                                             const AcceptCall& accept) {
  auto down = std::make_shared<Queue>(), up = std::make_shared<Queue>();
  Offers& offers = InProcessOffers();
  {
    absl::MutexLock lock(&offers.mu);
    offers.pipes[request.pipe_id()] = std::make_unique<InProcessPipe>(up, down);
  }
  const absl::Status s = accept(request);
  absl::MutexLock lock(&offers.mu);
  offers.pipes.erase(request.pipe_id());  // taken, or refused
  WQ_RETURN_IF_ERROR(s);
  return std::unique_ptr<TensorPipe>(new InProcessPipe(down, up));
}

int DeviceIndex(const at::Device& device) { return device.has_index() ? device.index() : 0; }

#ifdef WQ_HAVE_NCCL
absl::StatusOr<std::unique_ptr<TensorPipe>> ConnectNccl(v1::ConnectPipeRequest request,
                                                        const at::Device& device,
                                                        absl::Time deadline,
                                                        const AcceptCall& accept) {
  WQ_ASSIGN_OR_RETURN(const std::string down, NcclUniqueId());
  WQ_ASSIGN_OR_RETURN(const std::string up, NcclUniqueId());
  request.set_nccl_id_down(down);
  request.set_nccl_id_up(up);
  absl::Mutex mu;
  std::optional<absl::Status> answer;  // the actor's, once it came
  std::thread call([&] {
    const absl::Status s = accept(request);
    absl::MutexLock lock(&mu);
    answer = s;
  });
  auto refused = [&]() -> absl::Status {
    absl::MutexLock lock(&mu);
    return answer.has_value() ? *answer : absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<NcclPipe>> pipe =
      NcclPipe::Join(down, up, /*rank=*/0, DeviceIndex(device), deadline, refused);
  call.join();
  WQ_RETURN_IF_ERROR(pipe.status());
  WQ_RETURN_IF_ERROR(refused());  // joined, yet the actor's call failed after its join
  return std::unique_ptr<TensorPipe>(*std::move(pipe));
}
#endif

}  // namespace

const char* PipeKindName(PipeKind kind) {
  switch (kind) {
    case PipeKind::kNccl:
      return "nccl";
    case PipeKind::kInProcess:
      return "in-process";
    case PipeKind::kGrpc:
      break;
  }
  return "grpc";
}

absl::StatusOr<PipeKind> ParseHiddenStates(absl::string_view key, absl::string_view value) {
  if (value == "grpc") return PipeKind::kGrpc;
  if (value == "nccl") return PipeKind::kNccl;
  return absl::InvalidArgumentError(absl::StrCat(key, ": '", value, "', must be grpc or nccl"));
}

bool NcclBuilt() {
#ifdef WQ_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

absl::Status CheckPipeKind(absl::string_view key, PipeKind kind, absl::string_view device) {
  if (kind != PipeKind::kNccl) return absl::OkStatus();
  if (!NcclBuilt()) {
    return absl::FailedPreconditionError(absl::StrCat(
        key, ": nccl, but this build has no NCCL (the CUDA build: scripts/gpu-build.sh)"));
  }
  if (device.rfind("cuda", 0) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(key, ": nccl, but the stages compute on ", device,
                     " (nccl links GPUs: set model.device to cuda, or use grpc)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TensorPipe>> ConnectPipe(PipeKind kind, const std::string& pipe_id,
                                                        const at::Device& device,
                                                        absl::Time deadline,
                                                        const AcceptCall& accept) {
  v1::ConnectPipeRequest request;
  request.set_pipe_id(pipe_id);
  request.set_kind(PipeKindName(kind));
  switch (kind) {
    case PipeKind::kInProcess:
      return ConnectInProcess(request, accept);
    case PipeKind::kNccl:
#ifdef WQ_HAVE_NCCL
      return ConnectNccl(std::move(request), device, deadline, accept);
#else
      return CheckPipeKind("hidden states pipe", kind, device.str());
#endif
    case PipeKind::kGrpc:
      break;
  }
  return absl::InvalidArgumentError("hidden states pipe: grpc is not a pipe");
}

absl::StatusOr<std::unique_ptr<TensorPipe>> AcceptPipe(const v1::ConnectPipeRequest& request,
                                                       const at::Device& device,
                                                       absl::Time deadline) {
  if (request.kind() == PipeKindName(PipeKind::kInProcess)) {
    Offers& offers = InProcessOffers();
    absl::MutexLock lock(&offers.mu);
    auto it = offers.pipes.find(request.pipe_id());
    if (it == offers.pipes.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("pipe_id: no in-process pipe '", request.pipe_id(),
                       "' offered in this process (an in-process pipe needs the evaluator in it)"));
    }
    std::unique_ptr<TensorPipe> end = std::move(it->second);
    offers.pipes.erase(it);
    return end;
  }
  if (request.kind() != PipeKindName(PipeKind::kNccl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kind: '", request.kind(), "', must be nccl or in-process"));
  }
  WQ_RETURN_IF_ERROR(CheckPipeKind("kind", PipeKind::kNccl, device.str()));
#ifdef WQ_HAVE_NCCL
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<NcclPipe> end,
                      NcclPipe::Join(request.nccl_id_down(), request.nccl_id_up(), /*rank=*/1,
                                     DeviceIndex(device), deadline, nullptr));
  return std::unique_ptr<TensorPipe>(std::move(end));
#else
  return absl::InternalError("unreachable: CheckPipeKind refuses nccl without NCCL");
#endif
}

}  // namespace windquant::transport
