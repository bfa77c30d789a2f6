#include "learner/run_lifecycle.h"

namespace windquant::learner {

bool RunLifecycle::StopDue() const {
  return stop_after_updates_ > 0 && !stopped_ && updates_here_ >= stop_after_updates_;
}

bool RunLifecycle::FinishDue(bool curriculum_finished, int64_t plans_out) const {
  return !done_ && !stopped_ && curriculum_finished && plans_out == 0;
}

}  // namespace windquant::learner
