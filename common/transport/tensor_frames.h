// Framing of micro-batches over a point-to-point tensor pipe (what NCCL's
// ncclSend / ncclRecv give between two GPUs: in-order messages whose receiver
// must post a buffer of the sent element count and type). One micro-batch is two
// messages: a header of kFrameHeaderWords int64 {index, batch, seq, hidden,
// dtype code}, then the hidden states [batch, seq, hidden] in their own dtype
// (float32, bfloat16 or float16: the stage's compute dtype, never converted).
// Tensors stay on their device: the sender sends the contiguous tensor where it
// is, the receiver allocates the payload on the device it is given. The one
// host transfer is the receiver's read of the 40-byte header (the payload's
// size must be known before its buffer is posted).
// The pipes are tensor_pipes.h's (NCCL, in-process); tests also use a fake pipe.
// Thread-compatible; a pipe carries one sender's and one receiver's frames.
#ifndef WINDQUANT_COMMON_TRANSPORT_TENSOR_FRAMES_H_
#define WINDQUANT_COMMON_TRANSPORT_TENSOR_FRAMES_H_

#include <cstdint>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/activation_transport.h"

namespace windquant::transport {

// A point-to-point link that moves whole tensors in order.
class TensorPipe {
 public:
  virtual ~TensorPipe() = default;
  // Sends the elements of `t` (contiguous, on the pipe's device or the host).
  virtual absl::Status Send(const at::Tensor& t) = 0;
  // Fills `t` (contiguous, allocated by the caller) with the next message; the
  // message must have t's element count and type. DEADLINE_EXCEEDED when none has
  // arrived by `deadline` (a pipe that cannot tell when its device-side receive ends,
  // none: it returns once the receive is queued, and the tensor is ready in stream order).
  virtual absl::Status Recv(at::Tensor& t, absl::Time deadline) = 0;
  // Fails every pending and later Send / Recv (UNAVAILABLE), from any thread: a link
  // that is replaced or given up never leaves a thread waiting on it. Idempotent.
  virtual void Close() {}
};

inline constexpr int kFrameHeaderWords = 5;
// Each of batch, seq and hidden must lie in [1, kMaxFrameDim]; their product
// in [1, kMaxFrameElements] (a malformed header is refused before any
// allocation).
inline constexpr int64_t kMaxFrameDim = int64_t{1} << 24;
inline constexpr int64_t kMaxFrameElements = int64_t{1} << 32;

// The dtype's code in the header (float32 1, bfloat16 2, float16 3), or
// INVALID_ARGUMENT naming the dtype.
absl::StatusOr<int64_t> FrameDtypeCode(at::ScalarType dtype);

// The header of `batch` (int64 [kFrameHeaderWords] on the host).
// INVALID_ARGUMENT unless hidden is [batch, seq, hidden] within the limits and
// of a framed dtype.
absl::StatusOr<at::Tensor> EncodeFrameHeader(const MicroBatch& batch);

struct FrameHeader {
  int32_t index = 0;
  int64_t batch = 0, seq = 0, hidden = 0;
  at::ScalarType dtype = at::kFloat;
};

// DATA_LOSS naming the word that is out of range: a dimension outside
// [1, kMaxFrameDim], too many elements, an unknown dtype code, an index
// outside int32.
absl::StatusOr<FrameHeader> DecodeFrameHeader(const at::Tensor& header);

// Sends `batch` as header + payload; the payload leaves from the tensor's own
// device, in its dtype. EncodeFrameHeader's errors and the pipe's.
absl::Status SendFrame(TensorPipe& pipe, const MicroBatch& batch);

// Receives one header + payload by `deadline`; the payload lands on `device`.
// DecodeFrameHeader's errors and the pipe's.
absl::StatusOr<MicroBatch> RecvFrame(TensorPipe& pipe, const at::Device& device,
                                     absl::Time deadline = absl::InfiniteFuture());

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_TENSOR_FRAMES_H_
