#include "common/transport/local_activation_transport.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::transport {

void MicroBatchQueue::Push(absl::StatusOr<MicroBatch> item) {
  absl::MutexLock lock(&mu_);
  items_.push_back(std::move(item));
}

void MicroBatchQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

absl::StatusOr<MicroBatch> MicroBatchQueue::Pop() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &MicroBatchQueue::Ready));
  if (items_.empty()) return absl::OutOfRangeError("end of stream");
  absl::StatusOr<MicroBatch> item = std::move(items_.front());
  items_.pop_front();
  return item;
}

absl::StatusOr<at::Tensor> RunPassOnWorker(stage::StageWorker& worker, const PassSpec& spec,
                                           const at::Tensor& hidden) {
  if (spec.mode == PassMode::kCalibrate) return worker.Calibrate(hidden);
  if (!spec.plan_id.empty()) {
    absl::StatusOr<plan::UnitTable> table = worker.table();
    if (table.ok() && !spec.model_fingerprint.empty() &&
        spec.model_fingerprint != table->fingerprint) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.model_fingerprint: ", spec.model_fingerprint.substr(0, 12),
                       " is not this stage's model ", table->fingerprint.substr(0, 12)));
    }
  }
  return worker.Forward(spec.plan_id, spec.actions, hidden);
}

namespace {

class LocalStageStream : public StageStream {
 public:
  LocalStageStream(stage::StageWorker* worker, PassSpec spec)
      : worker_(worker), spec_(std::move(spec)) {}

  absl::Status Send(MicroBatch batch) override {
    absl::StatusOr<at::Tensor> out = RunPassOnWorker(*worker_, spec_, batch.hidden);
    if (!out.ok()) {
      queue_.Push(out.status());
      return out.status();
    }
    queue_.Push(MicroBatch{batch.index, *std::move(out)});
    return absl::OkStatus();
  }
  absl::StatusOr<MicroBatch> Receive() override { return queue_.Pop(); }
  absl::Status CloseSend() override {
    queue_.Close();
    return absl::OkStatus();
  }

 private:
  stage::StageWorker* const worker_;
  const PassSpec spec_;
  MicroBatchQueue queue_;
};

}  // namespace

LocalActivationTransport::LocalActivationTransport(stage::StageWorker* worker, std::string name)
    : worker_(worker), name_(std::move(name)) {}

absl::StatusOr<std::pair<int64_t, int64_t>> LocalActivationTransport::Layers() {
  return std::make_pair(worker_->first_layer(), worker_->end_layer());
}

absl::StatusOr<std::unique_ptr<StageStream>> LocalActivationTransport::Open(const PassSpec& spec) {
  if (spec.mode == PassMode::kCalibrate) worker_->StartCalibration();
  return std::unique_ptr<StageStream>(new LocalStageStream(worker_, spec));
}

absl::StatusOr<plan::UnitTable> LocalActivationTransport::FinishCalibration(
    const std::string& fingerprint) {
  return worker_->FinishCalibration(fingerprint);
}

}  // namespace windquant::transport
