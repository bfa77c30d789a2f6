#include "common/transport/fake_activation_transport.h"

#include "absl/strings/str_cat.h"
#include "common/transport/local_activation_transport.h"

namespace windquant::transport {

class FakeStageStream : public StageStream {
 public:
  explicit FakeStageStream(FakeActivationTransport* t) : t_(t) {}
  absl::Status Send(MicroBatch batch) override {
    if (batch.index == t_->fail_index_) {
      queue_.Push(t_->fail_status_);
      return t_->fail_status_;
    }
    ++t_->micro_batches_;
    queue_.Push(MicroBatch{batch.index, batch.hidden * t_->scale_ + t_->offset_});
    return absl::OkStatus();
  }
  absl::StatusOr<MicroBatch> Receive() override { return queue_.Pop(); }
  absl::Status CloseSend() override {
    queue_.Close();
    return absl::OkStatus();
  }

 private:
  FakeActivationTransport* t_;
  MicroBatchQueue queue_;
};

absl::StatusOr<std::unique_ptr<StageStream>> FakeActivationTransport::Open(const PassSpec&) {
  ++opened_;
  return std::unique_ptr<StageStream>(new FakeStageStream(this));
}

absl::StatusOr<plan::UnitTable> FakeActivationTransport::FinishCalibration(
    const std::string& fingerprint) {
  ++finished_;
  plan::UnitTable table;
  table.fingerprint = fingerprint;
  table.first_layer = static_cast<int32_t>(first_);
  table.end_layer = static_cast<int32_t>(end_);
  return table;
}

std::string FakeActivationTransport::Name() const {
  return absl::StrCat("fake stage [", first_, ", ", end_, ")");
}

}  // namespace windquant::transport
