// CheckpointWriter: writes the learner's rl::RunCheckpoint
// (output.dir/checkpoint/run.ckpt) and survives a write that fails. The file
// is replaced atomically (rl::WriteRunCheckpoint: temporary, fsync, rename),
// so a failed write (disk full, a file-size limit, an I/O error) leaves the
// last good checkpoint as it was: a restart resumes from it. A failure is not
// the run's end: it is logged in one line ("learner: checkpoint: update N
// NOT written to DIR: <why>; the last good checkpoint is update M"), counted
// (windquant_learner_checkpoint_failures_total) and the next write is due at
// once (Due), not after training.checkpoint_every_updates more updates.
// windquant_learner_checkpoint_last_good_update says which update a restart
// would resume from (-1: none).
// Thread-compatible (LearnerCore calls it under its mutex).
#ifndef WINDQUANT_LEARNER_CHECKPOINT_WRITER_H_
#define WINDQUANT_LEARNER_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/rl/run_checkpoint.h"

namespace windquant::learner {

class CheckpointWriter {
 public:
  // `dir`: the checkpoint folder (output.dir/checkpoint). `registry` may be
  // null (no metrics); `log` may be empty.
  CheckpointWriter(std::string dir, int every_updates, base::LogSink log);
  // Registers the two metrics in `registry`; their error for a clashing name.
  absl::Status Register(metrics::Registry& registry);

  // The checkpoint read at start (nullptr when there was none): its update is
  // the last good one.
  void Restored(const rl::RunCheckpoint* checkpoint);
  // Whether the checkpoint of update `update` should be written: every
  // `every_updates` updates, and after a failed write at every update.
  bool Due(int64_t update) const;
  // Writes `checkpoint`: true when written (and logged "learner: checkpoint:
  // update N written to DIR"), false when the write failed (logged, counted;
  // the previous file is untouched).
  bool Write(const rl::RunCheckpoint& checkpoint);

  const std::string& dir() const { return dir_; }
  int64_t last_good_update() const { return last_good_update_; }
  int64_t failures() const { return failures_; }

 private:
  const std::string dir_;
  const int every_updates_;
  base::LogSink log_;
  metrics::Counter* failures_total_ = nullptr;
  metrics::Gauge* last_good_gauge_ = nullptr;
  int64_t last_good_update_ = -1;
  int64_t failures_ = 0;
  bool last_failed_ = false;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_CHECKPOINT_WRITER_H_
