// EvaluationClock: how long the learner waits for the evaluation of a plan it
// holds (an episode, a candidate) before it gives the plan up. The wait
// follows the evaluator instead of one fixed timeout that must be tuned to
// the model (an evaluation of the 16-layer LLaMA-3.2-1B shape takes minutes
// on 2 cores, one of the 0.26M-parameter test model milliseconds):
//   per_plan  the longest evaluation measured in this run: the time from the
//             later of the previous report and the moment the learner had a
//             plan out again to the next report (so idle time is not
//             counted); before the first report, `prior` (the work of one
//             evaluation at the floor rates of work_deadline.h);
//   stall     allowance + slack x per_plan: nothing expires while the
//             evaluator reports within this; once it went quiet this long,
//             every plan held longer than this expires;
//   queue     allowance + slack x (most plans ever out + 1) x per_plan: the
//             longest a plan can wait behind the others in a FIFO evaluator
//             that keeps reporting; a plan held longer was lost (a report
//             that never came) and expires although others are reported.
// `allowance` is service.evaluation_timeout_ms: round trips, a restart of the
// evaluator, and the whole wait where nothing was measured (tests set it
// negative to expire everything at once). Both budgets only grow with what
// is measured, so a plan held is never given up earlier than the fixed
// allowance alone would.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_EVALUATION_CLOCK_H_
#define WINDQUANT_LEARNER_EVALUATION_CLOCK_H_

#include <cstdint>

#include "absl/time/time.h"

namespace windquant::learner {

// The time one evaluation takes before any was measured: a pass of `tokens`
// through `weights` decoder weights at the floor rates of work_deadline.h
// (transport::PassDeadline without its base).
absl::Duration EvaluationWorkPrior(int64_t weights, int64_t tokens);

class EvaluationClock {
 public:
  static constexpr double kSlack = 3.0;

  EvaluationClock(absl::Duration allowance, absl::Time now)
      : allowance_(allowance), last_report_(now) {}

  // The per-plan time assumed until the first report.
  void set_prior(absl::Duration per_plan) { prior_ = per_plan; }
  // A plan is out for evaluation; `pending` plans are out after it.
  void OnHeld(absl::Time now, int64_t pending);
  // An evaluation arrived; `pending` plans are out after it.
  void OnReport(absl::Time now, int64_t pending);
  // Plans left without a report (expired, dropped); `pending` are out now.
  void OnPending(int64_t pending);

  absl::Duration per_plan() const { return measured_ ? per_plan_ : prior_; }
  bool measured() const { return measured_; }
  absl::Duration StallBudget() const;
  absl::Duration QueueBudget() const;
  // Plans held since before the returned time expire at `now`.
  absl::Time Cutoff(absl::Time now) const;

 private:
  absl::Duration allowance_;
  absl::Duration prior_ = absl::ZeroDuration();
  absl::Duration per_plan_ = absl::ZeroDuration();
  bool measured_ = false;
  absl::Time last_report_;
  absl::Time busy_since_ = absl::InfinitePast();  // when plans were out again
  int64_t pending_ = 0;
  int64_t max_pending_ = 0;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_EVALUATION_CLOCK_H_
