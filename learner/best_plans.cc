#include "learner/best_plans.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/base/status_macros.h"
#include "common/plan/plan_io.h"
#include "common/rl/candidate_plan.h"

namespace windquant::learner {

BestPlans::BestPlans(double final_target_bits, std::string dir, double max_ppl_increase)
    : final_target_bits_(final_target_bits),
      dir_(std::move(dir)),
      max_ppl_increase_(max_ppl_increase) {}

void BestPlans::StartStep() {
  best_of_step_ = rl::CandidatePlan{};
  step_reference_ppl_ = 0;
}

void BestPlans::CapFinalTarget(double cap_bits) {
  final_target_bits_ = std::min(final_target_bits_, cap_bits);
}

void BestPlans::Restore(const rl::CandidatePlan& best, const rl::CandidatePlan& best_of_step,
                        double step_reference_ppl) {
  best_ = best;
  best_of_step_ = best_of_step;
  step_reference_ppl_ = step_reference_ppl;
}

absl::StatusOr<bool> BestPlans::Consider(const rl::CandidatePlan& candidate, plan::Plan plan,
                                         bool this_step, const plan::UnitTable& table) {
  if (candidate.source == "lagrange" && candidate.target_bits == final_target_bits_) {
    reference_ = candidate;
  }
  if (this_step && candidate.source == "lagrange") {
    step_reference_ppl_ = candidate.evaluation.eval_ppl;
  }
  if (!rl::ConsiderCandidate(candidate, final_target_bits_, &best_,
                             this_step ? &best_of_step_ : nullptr, max_ppl_increase_)) {
    return false;
  }
  plan.plan_id = "best";
  plan.source = candidate.source;
  WQ_RETURN_IF_ERROR(plan::WritePlanFiles(plan, table, dir_));
  return true;
}

double BestPlans::StepBestPpl() const {
  return best_of_step_.actions.empty() ? std::numeric_limits<double>::infinity()
                                       : best_of_step_.evaluation.eval_ppl;
}

}  // namespace windquant::learner
