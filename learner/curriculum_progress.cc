#include "learner/curriculum_progress.h"

#include <cmath>

namespace windquant::learner {

const std::vector<int>* CurriculumProgress::SelfImitationPlan(
    const rl::CandidatePlan& best, const rl::CandidatePlan& best_of_step) const {
  const bool last = std::abs(curriculum_.target_bits() - best.target_bits) < 1e-9;
  const rl::CandidatePlan& plan = last ? best : best_of_step;
  if (plan.actions.empty() || plan.actions == imitated_) return nullptr;
  return &plan.actions;
}

void CurriculumProgress::Restore(const rl::RunCheckpoint& c) {
  curriculum_.Restore(c.stage, c.updates_in_stage, c.curriculum_finished);
  started_step_ = c.warm_started_stage;
}

void CurriculumProgress::SaveTo(rl::RunCheckpoint* c) const {
  c->stage = curriculum_.step();
  c->updates_in_stage = curriculum_.updates_in_step();
  c->curriculum_finished = curriculum_.finished();
  c->warm_started_stage = started_step_;
}

}  // namespace windquant::learner
