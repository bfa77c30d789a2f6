#include "learner/checkpoint_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"

namespace windquant::learner {

CheckpointWriter::CheckpointWriter(std::string dir, int every_updates, base::LogSink log)
    : dir_(std::move(dir)), every_updates_(std::max(1, every_updates)), log_(std::move(log)) {}

absl::Status CheckpointWriter::Register(metrics::Registry& registry) {
  WQ_ASSIGN_OR_RETURN(auto* failures,
                      metrics::CounterFamily(registry, metrics::kLearnerCheckpointFailuresTotal));
  WQ_ASSIGN_OR_RETURN(auto* last_good,
                      metrics::GaugeFamily(registry, metrics::kLearnerCheckpointLastGoodUpdate));
  failures_total_ = &failures->Get();
  last_good_gauge_ = &last_good->Get();
  last_good_gauge_->Set(static_cast<double>(last_good_update_));
  return absl::OkStatus();
}

void CheckpointWriter::Restored(const rl::RunCheckpoint* checkpoint) {
  last_good_update_ = checkpoint != nullptr ? checkpoint->update : -1;
  if (last_good_gauge_ != nullptr) last_good_gauge_->Set(static_cast<double>(last_good_update_));
}

bool CheckpointWriter::Due(int64_t update) const {
  return last_failed_ || update % every_updates_ == 0;
}

bool CheckpointWriter::Write(const rl::RunCheckpoint& checkpoint) {
  const absl::Status written = rl::WriteRunCheckpoint(dir_, checkpoint);
  if (!written.ok()) {
    last_failed_ = true;
    ++failures_;
    if (failures_total_ != nullptr) failures_total_->Inc();
    if (log_) {
      log_(absl::StrCat("learner: checkpoint: update ", checkpoint.update, " NOT written to ", dir_,
                        ": ", written.message(), "; the last good checkpoint is ",
                        last_good_update_ < 0 ? std::string("none")
                                              : absl::StrCat("update ", last_good_update_)));
    }
    return false;
  }
  last_failed_ = false;
  last_good_update_ = checkpoint.update;
  if (last_good_gauge_ != nullptr) last_good_gauge_->Set(static_cast<double>(last_good_update_));
  if (log_)
    log_(absl::StrCat("learner: checkpoint: update ", checkpoint.update, " written to ", dir_));
  return true;
}

}  // namespace windquant::learner
