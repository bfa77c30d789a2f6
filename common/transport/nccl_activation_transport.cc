#include "common/transport/nccl_activation_transport.h"

#include <algorithm>
#include <atomic>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::transport {
namespace {

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

}  // namespace

NcclPeer::NcclPeer(void* comm, int device, int peer_rank)
    : comm_(comm), device_(device), peer_(peer_rank) {}

absl::Status NcclPeer::Send(const at::Tensor& t) {
  WQ_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(t.scalar_type()));
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  // On the link's device (a host header is staged there), contiguous; the caching
  // allocator keeps a temporary's memory until the stream's work on it is done.
  const at::Tensor data = t.to(device()).contiguous();
  const cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  return Nccl(ncclSend(data.data_ptr(), static_cast<size_t>(data.numel()), type, peer_,
                       static_cast<ncclComm_t>(comm_), stream),
              "send");
}

absl::Status NcclPeer::Recv(at::Tensor& t) {
  WQ_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(t.scalar_type()));
  if (!t.is_contiguous()) return absl::InvalidArgumentError("nccl: receive into a strided tensor");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  const bool here = t.device() == device();
  at::Tensor data = here ? t : at::empty_like(t, at::TensorOptions().device(device()));
  const cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  WQ_RETURN_IF_ERROR(Nccl(ncclRecv(data.data_ptr(), static_cast<size_t>(data.numel()), type, peer_,
                                   static_cast<ncclComm_t>(comm_), stream),
                          "recv"));
  if (!here) t.copy_(data);  // to the host (the frame header): waits for the stream
  return absl::OkStatus();
}

absl::StatusOr<std::string> NcclUniqueId() {
  ncclUniqueId id;
  WQ_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "unique id"));
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<void*> NcclInitRank(const std::string& unique_id, int ranks, int rank, int device) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError("nccl unique id: wrong length");
  }
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  WQ_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "set device"));
  ncclComm_t comm;
  WQ_RETURN_IF_ERROR(Nccl(ncclCommInitRank(&comm, ranks, id, rank), "init rank"));
  return static_cast<void*>(comm);
}

namespace {

// Data over NCCL; the control stream (plan, end of pass) over `control`.
class NcclStageStream : public StageStream {
 public:
  NcclStageStream(std::unique_ptr<StageStream> control, NcclPeer* peer)
      : control_(std::move(control)), peer_(peer) {}
  absl::Status Send(MicroBatch batch) override {
    ++sent_;
    return SendFrame(*peer_, batch);
  }
  absl::StatusOr<MicroBatch> Receive() override {
    if (closed_ && received_ == sent_) return absl::OutOfRangeError("end of stream");
    ++received_;
    return RecvFrame(*peer_, peer_->device());
  }
  absl::Status CloseSend() override {
    closed_ = true;
    return control_->CloseSend();
  }

 private:
  std::unique_ptr<StageStream> control_;
  NcclPeer* peer_;
  std::atomic<int64_t> sent_{0}, received_{0};
  std::atomic<bool> closed_{false};
};

}  // namespace

NcclActivationTransport::NcclActivationTransport(std::unique_ptr<ActivationTransport> control,
                                                 void* comm, int device, int peer_rank)
    : control_(std::move(control)), peer_(comm, device, peer_rank) {}

absl::StatusOr<std::unique_ptr<StageStream>> NcclActivationTransport::Open(const PassSpec& spec) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<StageStream> control, control_->Open(spec));
  return std::unique_ptr<StageStream>(new NcclStageStream(std::move(control), &peer_));
}

}  // namespace windquant::transport
