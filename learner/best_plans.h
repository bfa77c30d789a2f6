// BestPlans: the learner's best-plan rule (rl::ConsiderCandidate, DESIGN.md
// section 5) over every measured plan, episode or candidate:
// - the best feasible plan: the lowest evaluation-slice perplexity within
//   the final curriculum target (in the quality-target mode the fewest bits
//   within epsilon, rl::QualityTargetBetter), kept as plan files under `dir`
//   (plan id "best") whenever it changes;
// - the curriculum criterion: the best feasible policy plan at the current
//   step's target and the step reference's perplexity (0 until its
//   evaluation arrives: no early advance before that). Only plans made for
//   the current step compete for it (a late evaluation of an earlier step's
//   plan does not);
// - the final step's Lagrangian reference as evaluated (rl::RunResult::
//   reference; empty when none arrived, e.g. a learner restarted after the
//   curriculum finished).
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_BEST_PLANS_H_
#define WINDQUANT_LEARNER_BEST_PLANS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/rl/candidate_plan.h"

namespace windquant::learner {

class BestPlans {
 public:
  // `final_target_bits`: the last curriculum target; `dir`: where the best
  // plan's files go (output.dir/best); `max_ppl_increase`: the quality-target
  // mode's epsilon (0: the fixed-budget mode).
  BestPlans(double final_target_bits, std::string dir, double max_ppl_increase = 0);

  // A new curriculum step (not a resumed one): its best and reference
  // perplexity start afresh.
  void StartStep();
  // The quality-target mode's start (run_start.h): the final target comes
  // down to `cap_bits` when above it (before any plan is considered).
  void CapFinalTarget(double cap_bits);
  // The state of a checkpoint.
  void Restore(const rl::CandidatePlan& best, const rl::CandidatePlan& best_of_step,
               double step_reference_ppl);

  // Offers the measured plan `candidate` (its `plan` as the evaluator saw
  // it). `this_step`: made for the current step's target while the
  // curriculum runs. Returns whether it is the new best; its plan files are
  // written then (errors of the write, naming the path).
  absl::StatusOr<bool> Consider(const rl::CandidatePlan& candidate, plan::Plan plan, bool this_step,
                                const plan::UnitTable& table);

  // The best feasible plan (actions empty when none).
  const rl::CandidatePlan& best() const { return best_; }
  const rl::CandidatePlan& best_of_step() const { return best_of_step_; }
  const rl::CandidatePlan& reference() const { return reference_; }
  double step_reference_ppl() const { return step_reference_ppl_; }
  // The step's best policy plan's perplexity; +inf when none.
  double StepBestPpl() const;

 private:
  double final_target_bits_;
  const std::string dir_;
  const double max_ppl_increase_;
  rl::CandidatePlan best_;
  rl::CandidatePlan best_of_step_;
  double step_reference_ppl_ = 0;
  rl::CandidatePlan reference_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_BEST_PLANS_H_
