// Pipes for hidden states beside the Actor service's gRPC streams
// (service.hidden_states; DESIGN.md section 5). The evaluator connects one pipe to
// each actor (the ConnectPipe RPC); then each micro-batch of a pass travels over it
// as a frame (tensor_frames.h) while the Forward / Calibrate stream carries only its
// announcement, the plan and the errors. Kinds:
//   grpc        no pipe: the hidden states are in the gRPC messages (CPU runs, runs
//               across nodes).
//   nccl        NCCL between two GPUs of one node; the tensors never leave the
//               devices (nccl_pipe.h). Only in a build with NCCL (scripts/gpu-build.sh).
//   in-process  both ends in one process, a queue each way (tests: the same protocol
//               over real gRPC, without GPUs). Not a config value.
// Thread-safety: the free functions are thread-safe; a pipe carries one sender's and
// one receiver's frames, and Close may come from any thread.
#ifndef WINDQUANT_COMMON_TRANSPORT_TENSOR_PIPES_H_
#define WINDQUANT_COMMON_TRANSPORT_TENSOR_PIPES_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/transport/tensor_frames.h"
#include "windquant/v1/actor.pb.h"

namespace windquant::transport {

enum class PipeKind { kGrpc, kNccl, kInProcess };

// A kind's name as in the config and ConnectPipeRequest.kind.
const char* PipeKindName(PipeKind kind);
// service.hidden_states's values: grpc, nccl. INVALID_ARGUMENT naming `key` otherwise.
absl::StatusOr<PipeKind> ParseHiddenStates(absl::string_view key, absl::string_view value);

// Whether this build makes NCCL pipes (the CUDA build where NCCL was found).
bool NcclBuilt();

// Whether stages computing on `device` can take `kind` in this build: FAILED_PRECONDITION
// naming `key` for nccl without NCCL in the build or on a device that is not CUDA.
absl::Status CheckPipeKind(absl::string_view key, PipeKind kind, absl::string_view device);

// The evaluator's end of a new pipe `pipe_id` of `kind` (nccl or in-process) on `device`.
// `accept` makes the actor's ConnectPipe call with the request it is given; it runs on
// its own thread while this end joins (NCCL's join waits for both ranks), and its error
// is the result (this end closed). DEADLINE_EXCEEDED when the link is not up by `deadline`.
using AcceptCall = std::function<absl::Status(const v1::ConnectPipeRequest&)>;
absl::StatusOr<std::unique_ptr<TensorPipe>> ConnectPipe(PipeKind kind, const std::string& pipe_id,
                                                        const at::Device& device,
                                                        absl::Time deadline,
                                                        const AcceptCall& accept);

// The actor's end for `request`, on `device`, joined by `deadline`. INVALID_ARGUMENT naming
// the field for an unknown kind; FAILED_PRECONDITION for a kind this actor cannot make
// (CheckPipeKind) or an in-process pipe nobody offered in this process.
absl::StatusOr<std::unique_ptr<TensorPipe>> AcceptPipe(const v1::ConnectPipeRequest& request,
                                                       const at::Device& device,
                                                       absl::Time deadline);

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_TENSOR_PIPES_H_
