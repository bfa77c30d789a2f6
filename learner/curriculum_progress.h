// CurriculumProgress: where the learner is in the curriculum (rl::Curriculum:
// one step per target of curriculum.target_bits) and what it did at the
// current step: whether the step was started in this run (its best plans
// start afresh, its Lagrangian reference is queued, training.warm_start =
// lagrange clones it into the policy once) and which plan self-imitation
// (training.self_imitation) cloned last. The learner does the work (queueing,
// cloning); this part decides when and remembers it, in the checkpoint too.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_CURRICULUM_PROGRESS_H_
#define WINDQUANT_LEARNER_CURRICULUM_PROGRESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/plan/unit_table.h"
#include "common/rl/curriculum.h"
#include "common/rl/run_checkpoint.h"

namespace windquant::learner {

class CurriculumProgress {
 public:
  explicit CurriculumProgress(const rl::CurriculumOptions& config) : curriculum_(config) {}

  // What the learner needs of a merged table, checked before the table is
  // kept (TableMerger's validator): a table the run cannot finish with is
  // refused, not saved. With `warm_start`, a Lagrangian plan at every target.
  static absl::Status CheckTable(const rl::CurriculumOptions& curriculum, bool warm_start,
                                 const plan::UnitTable& table);

  int step() const { return curriculum_.step(); }
  int num_steps() const { return curriculum_.num_steps(); }
  double target_bits() const { return curriculum_.target_bits(); }
  bool finished() const { return curriculum_.finished(); }

  // The current step has not been started yet: not in this run, and not by
  // the process whose checkpoint this run resumed (whose warm start is in the
  // checkpointed policy and must not run again).
  bool StepIsNew() const { return started_step_ < curriculum_.step(); }
  // The current step started (its warm start ran or was impossible).
  void MarkStepStarted() { started_step_ = curriculum_.step(); }

  // One PPO update of the current step (rl::Curriculum::OnUpdate): true when
  // the step ended, `reason` then says why.
  bool OnUpdate(double best_ppl, double reference_ppl, std::string* reason) {
    return curriculum_.OnUpdate(best_ppl, reference_ppl, reason);
  }

  // With training.self_imitation, after an update: the plan to clone into the
  // policy now, or nullptr when there is none or it was cloned last time.
  // The plan is `best` (the final target's best, the reference included) in
  // the last step, else `best_of_step` (the step's best policy plan).
  const std::vector<int>* SelfImitationPlan(const rl::CandidatePlan& best,
                                            const rl::CandidatePlan& best_of_step) const;
  void MarkImitated(std::vector<int> actions) { imitated_ = std::move(actions); }

  // The curriculum fields of a checkpoint (stage, updates_in_stage,
  // curriculum_finished, warm_started_stage: the checkpoint's names).
  void Restore(const rl::RunCheckpoint& checkpoint);
  void SaveTo(rl::RunCheckpoint* checkpoint) const;

 private:
  rl::Curriculum curriculum_;
  int started_step_ = -1;      // the last step started (checkpointed)
  std::vector<int> imitated_;  // the plan self-imitation last cloned (not checkpointed)
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_CURRICULUM_PROGRESS_H_
