// RunObserver: what LearnerCore tells about a run as it happens, for whoever
// keeps its results elsewhere (the artifact store, run_publisher.h). The core
// calls it under its mutex, right after the event: an implementation must
// not block (copy what it needs and hand the slow part to another thread)
// and must not call back into the core.
#ifndef WINDQUANT_LEARNER_RUN_OBSERVER_H_
#define WINDQUANT_LEARNER_RUN_OBSERVER_H_

#include <cstdint>

#include "common/plan/unit_table.h"
#include "common/rl/candidate_plan.h"

namespace windquant::learner {

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // A checkpoint of update `update` is in output.dir (checkpoint/run.ckpt,
  // unit_table.pb, plans.jsonl as of this update); `done`: the run's last.
  virtual void OnCheckpoint(int64_t update, bool done) = 0;
  // A new best feasible plan at the final target (BestPlans), of `table`.
  virtual void OnBestPlan(const rl::CandidatePlan& best, const plan::UnitTable& table) = 0;
  // The run is done (after its final checkpoint).
  virtual void OnDone() = 0;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_OBSERVER_H_
