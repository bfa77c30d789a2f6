// FakeActivationTransport: an ActivationTransport for tests of pipeline
// drivers. The "stage" maps hidden -> hidden * scale + offset (no model), can be
// told to fail on a given micro-batch, and records how many micro-batches were
// in flight at once (to show that a driver pipelines).
// Thread-safety: as ActivationTransport.
#ifndef WINDQUANT_COMMON_TRANSPORT_FAKE_ACTIVATION_TRANSPORT_H_
#define WINDQUANT_COMMON_TRANSPORT_FAKE_ACTIVATION_TRANSPORT_H_

#include <atomic>
#include <string>

#include "common/transport/activation_transport.h"

namespace windquant::transport {

class FakeActivationTransport : public ActivationTransport {
 public:
  FakeActivationTransport(int64_t first_layer, int64_t end_layer, float scale, float offset)
      : first_(first_layer), end_(end_layer), scale_(scale), offset_(offset) {}

  // Send of micro-batch `index` answers `status` (-1 = never fail).
  void FailAt(int index, absl::Status status) {
    fail_index_ = index;
    fail_status_ = std::move(status);
  }
  int opened() const { return opened_; }
  int calibrations_finished() const { return finished_; }
  int64_t micro_batches() const { return micro_batches_; }

  absl::StatusOr<std::pair<int64_t, int64_t>> Layers() override {
    return std::make_pair(first_, end_);
  }
  absl::StatusOr<std::unique_ptr<StageStream>> Open(const PassSpec& spec) override;
  absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint) override;
  std::string Name() const override;

 private:
  friend class FakeStageStream;
  const int64_t first_, end_;
  const float scale_, offset_;
  int fail_index_ = -1;
  absl::Status fail_status_;
  std::atomic<int> opened_{0}, finished_{0};
  std::atomic<int64_t> micro_batches_{0};
};

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_FAKE_ACTIVATION_TRANSPORT_H_
