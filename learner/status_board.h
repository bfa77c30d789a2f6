// StatusBoard: the learner's last published LearnerStatus. LearnerCore
// publishes after every change, under its own lock; readers (Status RPCs, the
// in-process job's progress line) read the copy here, so a status probe with a
// short deadline never waits for a PPO update that holds the learner's lock.
// Thread-safe (one leaf mutex: nothing else is locked while it is held).
// Memory: one LearnerStatus (a few hundred bytes).
#ifndef WINDQUANT_LEARNER_STATUS_BOARD_H_
#define WINDQUANT_LEARNER_STATUS_BOARD_H_

#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"

namespace windquant::learner {

// The learner's state as `windquant status` shows it. The curriculum fields
// keep the proto's names (curriculum_stage is the curriculum step, 0-based).
struct LearnerStatus {
  int curriculum_stage = 0, curriculum_stages = 0;
  double target_bits = 0;
  int64_t updates = 0, episodes = 0, evaluations = 0, dropped_stale = 0, given_up = 0;
  int64_t policy_version = 0;
  std::string best_plan_id;
  double best_bits = 0, best_perplexity = 0;
  double lambda = 0;
  bool done = false, table_complete = false;
  bool stopped = false;  // stop_after_updates reached (done stays false)
  int pending = 0;
  int pending_candidates = 0;         // candidate plans queued or at the evaluator
  int64_t candidate_evaluations = 0;  // candidate plans evaluated
};

// The text of output.dir/status.txt (for scripts without the CLI): the fields
// of `windquant status`, one key=value per line.
std::string StatusFileText(const LearnerStatus& status);

class StatusBoard {
 public:
  void Publish(LearnerStatus status);
  // The status last published (a default LearnerStatus before the first).
  LearnerStatus Get() const;

 private:
  mutable absl::Mutex mu_;
  LearnerStatus status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_STATUS_BOARD_H_
