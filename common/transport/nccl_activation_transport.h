// NcclActivationTransport: hidden states between GPU stages over NCCL
// (DESIGN.md section 5, "hidden states between GPU stages may go over NCCL").
// Control (layers, opening a pass with its plan, finishing calibration) goes
// through another transport (the gRPC one); each micro-batch travels as a
// 4 x int64 header {index, batch, seq, hidden} followed by the float32 payload,
// ncclSend to the stage's rank, and its output comes back by ncclRecv.
// NcclPeer is the symmetric half an actor uses on its side of the link.
//
// Built only where the top-level CMake found nccl.h and libnccl (WQ_HAVE_NCCL).
// Thread-safety: one sender and one receiver thread per stream; a
// communicator is used by one pass at a time (NCCL's rule for one stream).
#ifndef WINDQUANT_COMMON_TRANSPORT_NCCL_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_NCCL_ACTIVATION_TRANSPORT_H_

#include <memory>
#include <string>

#include "common/transport/activation_transport.h"

namespace windquant::transport {

// A point-to-point NCCL link to one peer rank of an initialised communicator.
class NcclPeer {
 public:
  // `comm` is an ncclComm_t, `stream` a cudaStream_t (opaque here so this
  // header needs no CUDA include); `device` the CUDA device index. Borrowed.
  NcclPeer(void* comm, void* stream, int device, int peer_rank);
  // Copies `t` ([B, T, H] float32, any device) to the GPU and sends header + payload.
  absl::Status SendTensor(int32_t index, const at::Tensor& t);
  // Receives header + payload; the tensor is returned on the CPU.
  absl::StatusOr<MicroBatch> RecvTensor();

 private:
  void* comm_;
  void* stream_;
  int device_;
  int peer_;
};

// Creates an NCCL unique id (rank 0 sends it to the others out of band) and a
// communicator for `rank` of `ranks`. Returned as an opaque ncclComm_t.
absl::StatusOr<std::string> NcclUniqueId();
absl::StatusOr<void*> NcclInitRank(const std::string& unique_id, int ranks, int rank, int device);

class NcclActivationTransport : public ActivationTransport {
 public:
  NcclActivationTransport(std::unique_ptr<ActivationTransport> control, void* comm, void* stream,
                          int device, int peer_rank);
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
