#include "learner/run_lifecycle.h"

namespace windquant::learner {

bool RunLifecycle::StopDue() const {
  return stop_after_updates_ > 0 && !stopped_ && updates_here_ >= stop_after_updates_;
}

bool RunLifecycle::FinishDue(bool curriculum_finished, int64_t pending_candidates) const {
  return !done_ && !stopped_ && curriculum_finished && pending_candidates == 0;
}

}  // namespace windquant::learner
