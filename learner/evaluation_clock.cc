#include "learner/evaluation_clock.h"

#include <algorithm>

#include "common/transport/work_deadline.h"

namespace windquant::learner {

absl::Duration EvaluationWorkPrior(int64_t weights, int64_t tokens) {
  return transport::PassDeadline(absl::ZeroDuration(), weights, tokens);
}

void EvaluationClock::OnHeld(absl::Time now, int64_t pending) {
  if (pending_ <= 0 && pending > 0) busy_since_ = now;
  OnPending(pending);
}

void EvaluationClock::OnReport(absl::Time now, int64_t pending) {
  const absl::Duration took = now - std::max(last_report_, busy_since_);
  if (took > per_plan_ || !measured_) per_plan_ = std::max(took, absl::ZeroDuration());
  measured_ = true;
  last_report_ = now;
  pending_ = pending;
  if (pending > 0) busy_since_ = now;
}

void EvaluationClock::OnPending(int64_t pending) {
  pending_ = pending;
  max_pending_ = std::max(max_pending_, pending);
}

absl::Duration EvaluationClock::StallBudget() const { return allowance_ + kSlack * per_plan(); }

absl::Duration EvaluationClock::QueueBudget() const {
  return allowance_ + kSlack * static_cast<double>(max_pending_ + 1) * per_plan();
}

absl::Time EvaluationClock::Cutoff(absl::Time now) const {
  const absl::Duration stall = StallBudget();
  if (now - last_report_ > stall) return now - stall;
  return now - QueueBudget();
}

}  // namespace windquant::learner
