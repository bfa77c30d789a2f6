// NcclActivationTransport: hidden states between GPU stages over NCCL
// (DESIGN.md section 5, "hidden states between GPU stages may go over NCCL").
// Control (layers, opening a pass with its plan, finishing calibration) goes
// through another transport (the gRPC one); each micro-batch travels as a
// tensor_frames.h frame (header, then the hidden states in their own dtype:
// float32, bfloat16 or float16) by ncclSend to the stage's rank, and its output
// comes back by ncclRecv. Tensors stay on the GPU: NCCL sends from and receives
// into device memory on torch's current CUDA stream of the peer's device (no
// host copy of the payload, no stream synchronisation but the receiver's read
// of the 40-byte header). NcclPeer is the symmetric half an actor uses on its
// side of the link.
//
// Built only in the CUDA build (libtorch with c10_cuda) where the top-level
// CMake found nccl.h and libnccl (WQ_HAVE_NCCL); nothing selects it yet: the
// services pass hidden states over gRPC (a config key for same-node GPU stages
// is to come), so it is exercised by its framing tests (tensor_frames_test, on a
// fake pipe) and, on a GPU machine, by nccl-transport-check --probe.
// Thread-safety: one sender and one receiver thread per stream; a
// communicator is used by one pass at a time (NCCL's rule for one stream).
#ifndef WINDQUANT_COMMON_TRANSPORT_NCCL_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_NCCL_ACTIVATION_TRANSPORT_H_

#include <memory>
#include <string>

#include "common/transport/activation_transport.h"
#include "common/transport/tensor_frames.h"

namespace windquant::transport {

// A point-to-point NCCL link to one peer rank of an initialised communicator,
// as a TensorPipe: Send and Recv run on torch's current CUDA stream of
// `device`; a tensor on the host (a frame header) is staged through the device.
class NcclPeer : public TensorPipe {
 public:
  // `comm` is an ncclComm_t (opaque here so this header needs no CUDA
  // include), borrowed; `device` the CUDA device index.
  NcclPeer(void* comm, int device, int peer_rank);
  absl::Status Send(const at::Tensor& t) override;
  absl::Status Recv(at::Tensor& t) override;
  at::Device device() const {
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }

 private:
  void* comm_;
  int device_;
  int peer_;
};

// Creates an NCCL unique id (rank 0 sends it to the others out of band) and a
// communicator for `rank` of `ranks`. Returned as an opaque ncclComm_t.
absl::StatusOr<std::string> NcclUniqueId();
absl::StatusOr<void*> NcclInitRank(const std::string& unique_id, int ranks, int rank, int device);

class NcclActivationTransport : public ActivationTransport {
 public:
  NcclActivationTransport(std::unique_ptr<ActivationTransport> control, void* comm, int device,
                          int peer_rank);
  absl::StatusOr<std::pair<int64_t, int64_t>> Layers() override { return control_->Layers(); }
  absl::StatusOr<std::unique_ptr<StageStream>> Open(const PassSpec& spec) override;
  absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint) override {
    return control_->FinishCalibration(fingerprint);
  }
  std::string Name() const override { return control_->Name() + " (nccl)"; }

 private:
  std::unique_ptr<ActivationTransport> control_;
  NcclPeer peer_;
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_NCCL_ACTIVATION_TRANSPORT_H_
