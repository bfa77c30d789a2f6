// RunLifecycle: whether the learner still takes work. A run is
// - running: it accepts episodes and evaluations;
// - stopped: this process ran its stop_after_updates PPO updates (`windquant
//   quantize --stop-after-updates`); the checkpoint has the state, a later
//   process resumes from it; done stays false;
// - done: the curriculum finished and no candidate plan is out any more (a
//   checkpoint of a finished curriculum restores it done).
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_RUN_LIFECYCLE_H_
#define WINDQUANT_LEARNER_RUN_LIFECYCLE_H_

#include <cstdint>

namespace windquant::learner {

class RunLifecycle {
 public:
  bool done() const { return done_; }
  bool stopped() const { return stopped_; }
  // PPO updates run by this process (a resumed run counts from 0).
  int64_t updates_here() const { return updates_here_; }

  // The run restored from a checkpoint (`curriculum_finished`: done).
  void Restore(bool curriculum_finished) { done_ = curriculum_finished; }
  // Stop after `n` updates of this process; n <= 0: never.
  void set_stop_after_updates(int64_t n) { stop_after_updates_ = n > 0 ? n : 0; }
  void OnUpdate() { ++updates_here_; }

  // stop_after_updates is reached and the run not stopped yet.
  bool StopDue() const;
  void MarkStopped() { stopped_ = true; }
  // The curriculum finished, nothing is out for evaluation (no candidate, no held
  // episode: every plan measured is counted before the final phase) and the run is
  // neither done nor stopped: it is done now (MarkDone).
  bool FinishDue(bool curriculum_finished, int64_t plans_out) const;
  void MarkDone() { done_ = true; }

 private:
  int64_t updates_here_ = 0;
  int64_t stop_after_updates_ = 0;
  bool done_ = false;
  bool stopped_ = false;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_LIFECYCLE_H_
