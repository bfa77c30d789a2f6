#include "learner/curriculum_progress.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rl/environment.h"
#include "common/search/baselines.h"

namespace windquant::learner {

absl::Status CurriculumProgress::CheckTable(const rl::CurriculumOptions& curriculum,
                                            bool warm_start, const plan::UnitTable& table) {
  WQ_RETURN_IF_ERROR(rl::UnitCosts::Create(table).status());
  if (!warm_start) return absl::OkStatus();
  for (double target : curriculum.target_bits) {
    absl::Status s = search::LagrangePlan(table, target).status();
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("unit table: no lagrange plan at ", target,
                                                     " bits (training.warm_start): ", s.message()));
    }
  }
  return absl::OkStatus();
}

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
