#include "common/transport/nccl_pipe.h"

#include <algorithm>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::transport {
namespace {

constexpr absl::Duration kPoll = absl::Microseconds(50);
// A send or receive is queued in well under this; a communicator still busy queueing
// after it is stuck.
constexpr absl::Duration kQueueLimit = absl::Minutes(2);

absl::Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("nccl ", what, ": ", ncclGetErrorString(r)));
}
absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("cuda ", what, ": ", cudaGetErrorString(e)));
}

absl::StatusOr<ncclDataType_t> NcclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kHalf:
      return ncclFloat16;
    case at::kLong:
      return ncclInt64;
    default:
      return absl::InvalidArgumentError(absl::StrCat("nccl: no NCCL type for ", c10::toString(t)));
  }
}

// Polls a non-blocking communicator until its last call (join, send, receive) is
// done, `deadline` passes or `give_up` returns an error.
absl::Status Await(ncclComm_t comm, const char* what, absl::Time deadline,
                   const std::function<absl::Status()>& give_up = nullptr) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    WQ_RETURN_IF_ERROR(Nccl(ncclCommGetAsyncError(comm, &state), what));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return Nccl(state, what);
    if (give_up) WQ_RETURN_IF_ERROR(give_up());
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("nccl ", what, ": not done by its deadline"));
    }
    absl::SleepFor(kPoll);
  }
}

// A call on a non-blocking communicator: ncclInProgress means "still queueing".
absl::Status Call(ncclResult_t r, ncclComm_t comm, const char* what) {
  if (r == ncclInProgress) return Await(comm, what, absl::Now() + kQueueLimit);
  return Nccl(r, what);
}

}  // namespace

struct NcclPipe::Direction {
  ncclComm_t comm;
  int peer;
  c10::cuda::CUDAStream stream;
};

absl::StatusOr<std::string> NcclUniqueId() {
  ncclUniqueId id;
  WQ_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "unique id"));
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclPipe>> NcclPipe::Join(
    const std::string& id_down, const std::string& id_up, int rank, int device, absl::Time deadline,
    const std::function<absl::Status()>& give_up) {
  WQ_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "set device"));
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  auto begin = [rank](const std::string& bytes, ncclComm_t* comm) -> absl::Status {
    ncclUniqueId id;
    if (bytes.size() != sizeof(id.internal)) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl unique id: ", bytes.size(), " bytes, expected ", sizeof(id.internal)));
    }
    std::copy(bytes.begin(), bytes.end(), id.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(comm, 2, id, rank, &config);
    return r == ncclInProgress ? absl::OkStatus() : Nccl(r, "join");
  };
  ncclComm_t down = nullptr, up = nullptr;
  absl::Status s = begin(id_down, &down);
  if (s.ok()) s = begin(id_up, &up);
  if (s.ok()) s = Await(down, "join", deadline, give_up);
  if (s.ok()) s = Await(up, "join", deadline, give_up);
  if (!s.ok()) {
    if (down != nullptr) ncclCommAbort(down);
    if (up != nullptr) ncclCommAbort(up);
    return s;
  }
  auto direction = [&](ncclComm_t comm) {
    return std::unique_ptr<Direction>(
        new Direction{comm, 1 - rank,
                      c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                                   static_cast<c10::DeviceIndex>(device))});
  };
  // The evaluator (rank 0) sends down and receives up; the actor the other way.
  if (rank == 0)
    return std::unique_ptr<NcclPipe>(new NcclPipe(device, direction(down), direction(up)));
  return std::unique_ptr<NcclPipe>(new NcclPipe(device, direction(up), direction(down)));
}

NcclPipe::NcclPipe(int device, std::unique_ptr<Direction> send, std::unique_ptr<Direction> recv)
    : device_(device), send_(std::move(send)), recv_(std::move(recv)) {}

NcclPipe::~NcclPipe() { Close(); }

at::Device NcclPipe::device() const {
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
}

void NcclPipe::Close() {
  if (closed_.exchange(true)) return;
  ncclCommAbort(send_->comm);
  ncclCommAbort(recv_->comm);
}

absl::Status NcclPipe::Send(const at::Tensor& t) {
  if (closed_) return absl::UnavailableError("nccl pipe: closed");
  WQ_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(t.scalar_type()));
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  // On the link's device (a host header is copied there), contiguous, made on the
  // current stream: the send stream waits for it there.
  const at::Tensor data = t.to(device()).contiguous();
  at::cuda::CUDAEvent made;
  made.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)));
  made.block(send_->stream);
  // The caching allocator keeps the memory until the send stream is done with it.
  c10::cuda::CUDACachingAllocator::recordStream(data.storage().data_ptr(), send_->stream);
  return Call(ncclSend(data.data_ptr(), static_cast<size_t>(data.numel()), type, send_->peer,
                       send_->comm, send_->stream.stream()),
              send_->comm, "send");
}

absl::Status NcclPipe::Recv(at::Tensor& t, absl::Time deadline) {
  if (closed_) return absl::UnavailableError("nccl pipe: closed");
  WQ_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(t.scalar_type()));
  if (!t.is_contiguous()) return absl::InvalidArgumentError("nccl: receive into a strided tensor");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  const c10::cuda::CUDAStream current =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_));
  const bool here = t.device() == device();
  at::Tensor data = here ? t : at::empty_like(t, at::TensorOptions().device(device()));
  // The receive writes the buffer only after the current stream's earlier work on it.
  at::cuda::CUDAEvent free;
  free.record(current);
  free.block(recv_->stream);
  c10::cuda::CUDACachingAllocator::recordStream(data.storage().data_ptr(), recv_->stream);
  WQ_RETURN_IF_ERROR(Call(ncclRecv(data.data_ptr(), static_cast<size_t>(data.numel()), type,
                                   recv_->peer, recv_->comm, recv_->stream.stream()),
                          recv_->comm, "recv"));
  at::cuda::CUDAEvent received;
  received.record(recv_->stream);
  received.block(current);  // whatever reads the tensor on the current stream waits for it
  if (here) return absl::OkStatus();
  // Into host memory (a frame header): the one host wait, polled, so a peer that
  // died is a DEADLINE_EXCEEDED and not a hang.
  while (!received.query()) {
    if (closed_) return absl::UnavailableError("nccl pipe: closed");
    if (absl::Now() > deadline) {
      Close();  // the link is out of step now
      return absl::DeadlineExceededError("nccl pipe: nothing received by the deadline");
    }
    absl::SleepFor(kPoll);
  }
  t.copy_(data);
  return absl::OkStatus();
}

}  // namespace windquant::transport
