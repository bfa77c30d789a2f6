// ActivationTransport: how hidden states reach one stage (a contiguous range of
// decoder layers held by one actor, DESIGN.md section 5) and come back.
//
// A pass is either a calibration pass (the stage accumulates activation
// statistics of its linear inputs) or the evaluation of a plan (the stage runs
// with the plan's quantized weights). A pass is a stream: the caller Sends
// micro-batches and Receives the stage's outputs in the same order, so several
// micro-batches can be in flight on a stage while the next stage works on
// earlier ones. Implementations: LocalActivationTransport (in process, a
// StageWorker), GrpcActivationTransport (actor's Forward RPC; its tensors
// optionally over a pipe beside it, tensor_pipes.h: NCCL between GPU stages),
// FakeActivationTransport (tests).
//
// Thread-safety: a transport may open several passes concurrently; one
// StageStream is used by at most one sender thread and one receiver thread.
#ifndef WINDQUANT_COMMON_TRANSPORT_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_ACTIVATION_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"

namespace windquant::transport {

enum class PassMode { kEvaluate = 0, kCalibrate = 1 };

// What a pass runs. For kEvaluate with empty `actions` the stage runs its
// full-precision weights (the reference of perplexity increases).
struct PassSpec {
  PassMode mode = PassMode::kEvaluate;
  std::string plan_id;                              // cache key of the applied weights
  std::string model_fingerprint;                    // must match the stage's table
  std::shared_ptr<const std::vector<int>> actions;  // one per unit of the global order
  // The pass's work, for transports whose calls have deadlines (work_deadline.h):
  // the decoder weights of every stage the pass goes through and the tokens it
  // carries. 0 = unknown (the transport's base deadline alone).
  int64_t weights = 0;
  int64_t tokens = 0;
};

// One micro-batch of hidden states [batch, seq, hidden] in the run's compute dtype
// (float32 or bfloat16: model.compute_dtype); a stage refuses another dtype
// (INVALID_ARGUMENT naming both).
struct MicroBatch {
  int32_t index = 0;
  at::Tensor hidden;
};

class StageStream {
 public:
  virtual ~StageStream() = default;
  // Queues one micro-batch for the stage. Errors: the stage's (INVALID_ARGUMENT
  // for a bad shape, NOT_FOUND for an unknown plan...) or UNAVAILABLE.
  virtual absl::Status Send(MicroBatch batch) = 0;
  // The next output, in Send order. OUT_OF_RANGE after CloseSend once every
  // output was received.
  virtual absl::StatusOr<MicroBatch> Receive() = 0;
  // No more Sends.
  virtual absl::Status CloseSend() = 0;
};

class ActivationTransport {
 public:
  virtual ~ActivationTransport() = default;
  // Layers [first_layer, end_layer) of the stage behind this transport.
  virtual absl::StatusOr<std::pair<int64_t, int64_t>> Layers() = 0;
  virtual absl::StatusOr<std::unique_ptr<StageStream>> Open(const PassSpec& spec) = 0;
  // Ends the calibration: the stage fits every (unit, action) of its shard and
  // returns its part of the unit table (it also registers it where configured).
  virtual absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint) = 0;
  // Human name for messages ("stage 1 replica 0 at 127.0.0.1:4242").
  virtual std::string Name() const = 0;
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_ACTIVATION_TRANSPORT_H_
