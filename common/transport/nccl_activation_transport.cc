#include "common/transport/nccl_activation_transport.h"

#include <algorithm>
#include <atomic>

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

}  // namespace

NcclPeer::NcclPeer(void* comm, void* stream, int device, int peer_rank)
    : comm_(comm), stream_(stream), device_(device), peer_(peer_rank) {}

absl::Status NcclPeer::SendTensor(int32_t index, const at::Tensor& t) {
  if (t.dim() != 3 || t.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError("hidden: must be float32 [batch, seq, hidden]");
  }
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  WQ_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "set device"));
  const int64_t header_host[4] = {index, t.size(0), t.size(1), t.size(2)};
  const at::Tensor cpu = t.contiguous().cpu();
  const size_t n = static_cast<size_t>(cpu.numel());
  void* header = nullptr;
  void* payload = nullptr;
  WQ_RETURN_IF_ERROR(Cuda(cudaMalloc(&header, sizeof(header_host)), "malloc"));
  absl::Status s = Cuda(cudaMalloc(&payload, n * sizeof(float)), "malloc");
  if (s.ok()) {
    s = Cuda(
        cudaMemcpyAsync(header, header_host, sizeof(header_host), cudaMemcpyHostToDevice, stream),
        "copy header");
  }
  if (s.ok()) {
    s = Cuda(cudaMemcpyAsync(payload, cpu.data_ptr<float>(), n * sizeof(float),
                             cudaMemcpyHostToDevice, stream),
             "copy payload");
  }
  if (s.ok()) s = Nccl(ncclGroupStart(), "group start");
  if (s.ok()) s = Nccl(ncclSend(header, 4, ncclInt64, peer_, comm, stream), "send header");
  if (s.ok()) s = Nccl(ncclSend(payload, n, ncclFloat32, peer_, comm, stream), "send payload");
  if (s.ok()) s = Nccl(ncclGroupEnd(), "group end");
  if (s.ok()) s = Cuda(cudaStreamSynchronize(stream), "synchronize");
  cudaFree(header);
  if (payload != nullptr) cudaFree(payload);
  return s;
}

absl::StatusOr<MicroBatch> NcclPeer::RecvTensor() {
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  WQ_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "set device"));
  int64_t header_host[4] = {0, 0, 0, 0};
  void* header = nullptr;
  WQ_RETURN_IF_ERROR(Cuda(cudaMalloc(&header, sizeof(header_host)), "malloc"));
  absl::Status s = Nccl(ncclRecv(header, 4, ncclInt64, peer_, comm, stream), "recv header");
  if (s.ok()) {
    s = Cuda(
        cudaMemcpyAsync(header_host, header, sizeof(header_host), cudaMemcpyDeviceToHost, stream),
        "copy header");
  }
  if (s.ok()) s = Cuda(cudaStreamSynchronize(stream), "synchronize");
  cudaFree(header);
  WQ_RETURN_IF_ERROR(s);
  for (int i = 1; i < 4; ++i) {
    if (header_host[i] < 1 || header_host[i] > (int64_t{1} << 24)) {
      return absl::DataLossError("nccl: malformed micro-batch header");
    }
  }
  at::Tensor out = at::empty({header_host[1], header_host[2], header_host[3]}, at::kFloat);
  const size_t n = static_cast<size_t>(out.numel());
  void* payload = nullptr;
  WQ_RETURN_IF_ERROR(Cuda(cudaMalloc(&payload, n * sizeof(float)), "malloc"));
  s = Nccl(ncclRecv(payload, n, ncclFloat32, peer_, comm, stream), "recv payload");
  if (s.ok()) {
    s = Cuda(cudaMemcpyAsync(out.data_ptr<float>(), payload, n * sizeof(float),
                             cudaMemcpyDeviceToHost, stream),
             "copy payload");
  }
  if (s.ok()) s = Cuda(cudaStreamSynchronize(stream), "synchronize");
  cudaFree(payload);
  WQ_RETURN_IF_ERROR(s);
  return MicroBatch{static_cast<int32_t>(header_host[0]), out};
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
    return peer_->SendTensor(batch.index, batch.hidden);
  }
  absl::StatusOr<MicroBatch> Receive() override {
    if (closed_ && received_ == sent_) return absl::OutOfRangeError("end of stream");
    ++received_;
    return peer_->RecvTensor();
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
                                                 void* comm, void* stream, int device,
                                                 int peer_rank)
    : control_(std::move(control)), peer_(comm, stream, device, peer_rank) {}

absl::StatusOr<std::unique_ptr<StageStream>> NcclActivationTransport::Open(const PassSpec& spec) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<StageStream> control, control_->Open(spec));
  return std::unique_ptr<StageStream>(new NcclStageStream(std::move(control), &peer_));
}

}  // namespace windquant::transport
