// The one check of a plan that arrived over the wire (windquant.v1.Plan,
// DESIGN.md section 5: every RPC validates its input) against a unit table:
// the evaluator checks the plans it is asked to evaluate, the learner the plan
// of every episode (DecodeEpisode), an actor the plan of a Forward pass.
// Thread-safe (a pure function).
#ifndef WINDQUANT_COMMON_RL_PLAN_VALIDATION_H_
#define WINDQUANT_COMMON_RL_PLAN_VALIDATION_H_

#include "absl/status/status.h"
#include "common/plan/unit_table.h"
#include "windquant/v1/types.pb.h"

namespace windquant::rl {

// What `table` is: the run's whole unit table (the plan has exactly one
// action per unit), or one stage's part of it (the plan, over the global unit
// order, must reach at least the stage's last unit).
enum class PlanScope { kRun, kStage };

// OK, or INVALID_ARGUMENT naming the field: "plan.model_fingerprint: ..." for a
// plan of another model, "plan.actions: ..." for a wrong action count,
// "plan.actions[i]: ..." for a value that is not an action index.
absl::Status ValidatePlan(const v1::Plan& plan, const plan::UnitTable& table, PlanScope scope);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_VALIDATION_H_
