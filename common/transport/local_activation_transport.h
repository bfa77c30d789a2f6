// LocalActivationTransport: an ActivationTransport to a StageWorker in the same
// process (the one-process wiring and tests). Send runs the stage on the
// caller's thread and queues the output for Receive, so a pipeline driver with
// one thread per stage keeps every stage busy at once.
// Thread-safety: as ActivationTransport. Borrows the worker.
#ifndef WINDQUANT_COMMON_TRANSPORT_LOCAL_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_LOCAL_ACTIVATION_TRANSPORT_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/stage/stage_worker.h"
#include "common/transport/activation_transport.h"

namespace windquant::transport {

// The output queue shared by the in-process streams (also used by the actor's
// Forward handler): Push from the producer, Pop blocks until an item or Close.
class MicroBatchQueue {
 public:
  void Push(absl::StatusOr<MicroBatch> item);
  void Close();
  // OUT_OF_RANGE once closed and drained.
  absl::StatusOr<MicroBatch> Pop();

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !items_.empty() || closed_; }
  absl::Mutex mu_;
  std::deque<absl::StatusOr<MicroBatch>> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs one micro-batch of a pass on a worker (shared by the local transport and
// the actor's RPC handler): calibration or plan forward, fingerprint checked.
absl::StatusOr<at::Tensor> RunPassOnWorker(stage::StageWorker& worker, const PassSpec& spec,
                                           const at::Tensor& hidden);

class LocalActivationTransport : public ActivationTransport {
 public:
  LocalActivationTransport(stage::StageWorker* worker, std::string name);
  absl::StatusOr<std::pair<int64_t, int64_t>> Layers() override;
  absl::StatusOr<std::unique_ptr<StageStream>> Open(const PassSpec& spec) override;
  absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint) override;
  std::string Name() const override { return name_; }

 private:
  stage::StageWorker* const worker_;
  const std::string name_;
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_LOCAL_ACTIVATION_TRANSPORT_H_
