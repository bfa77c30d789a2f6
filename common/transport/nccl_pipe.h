// NcclPipe: a TensorPipe between two GPUs over NCCL (tensor_pipes.h's "nccl" kind,
// DESIGN.md section 5: hidden states between GPU stages of one node). One link is
// two 2-rank communicators, one per direction (the evaluator is rank 0 of both),
// so the thread that sends and the thread that receives never share a
// communicator (NCCL's rule) and a send waiting for its receiver never blocks the
// other direction. Each direction has its own CUDA stream: a send waits (an
// event, not the host) for the sender's current stream, where the tensor was
// made; the current stream waits for a receive before it reads the tensor. The
// one host wait is a receive into host memory (a frame's 40-byte header), polled
// until `deadline`.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0): joining and
// every call are polled, so a peer that never joins or dies is a
// DEADLINE_EXCEEDED / UNAVAILABLE, never a hang; Close aborts both
// communicators (ncclCommAbort), failing what is in flight.
//
// Built only in the CUDA build (libtorch with c10_cuda) where CMake found nccl.h
// and libnccl (WQ_HAVE_NCCL). Thread-safety: as TensorPipe.
#ifndef WINDQUANT_COMMON_TRANSPORT_NCCL_PIPE_H_
#define WINDQUANT_COMMON_TRANSPORT_NCCL_PIPE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/tensor_frames.h"

namespace windquant::transport {

// An NCCL unique id (rank 0 makes it and sends it to the other rank out of band).
absl::StatusOr<std::string> NcclUniqueId();

class NcclPipe : public TensorPipe {
 public:
  // Joins the link's two communicators as `rank` (0: the evaluator, which sends
  // down and receives up; 1: the actor) on CUDA device `device`, polling until
  // the peer has joined too, `deadline` passes (DEADLINE_EXCEEDED) or `give_up`
  // returns an error (that error: the evaluator's ConnectPipe call failed, so the
  // actor will never join).
  static absl::StatusOr<std::unique_ptr<NcclPipe>> Join(
      const std::string& id_down, const std::string& id_up, int rank, int device,
      absl::Time deadline, const std::function<absl::Status()>& give_up);
  ~NcclPipe() override;

  absl::Status Send(const at::Tensor& t) override;
  absl::Status Recv(at::Tensor& t, absl::Time deadline) override;
  void Close() override;

 private:
  struct Direction;
  NcclPipe(int device, std::unique_ptr<Direction> send, std::unique_ptr<Direction> recv);
  at::Device device() const;

  const int device_;
  std::unique_ptr<Direction> send_, recv_;
  std::atomic<bool> closed_{false};
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_NCCL_PIPE_H_
