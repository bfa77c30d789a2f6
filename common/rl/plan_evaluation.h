// PlanEvaluation: one plan's measured quality (DESIGN.md section 4, the
// inputs of the episode-end reward), the one type for it: PlanEvaluationCore
// assembles it from what a PlanBackend measured (in this process or through a
// pipeline), the learner keeps it with its candidate plans (and checkpoints
// it, run_checkpoint.h).
#ifndef WINDQUANT_COMMON_RL_PLAN_EVALUATION_H_
#define WINDQUANT_COMMON_RL_PLAN_EVALUATION_H_

#include <cstdint>

namespace windquant::rl {

struct PlanEvaluation {
  double effective_bits = 0;         // of the plan (plan::UnitTable::EffectiveBits)
  double calib_nll = 0;              // mean NLL (nats/token) on the calibration slice
  double loss_increase = 0;          // calib_nll - the full-precision calib_nll
  double eval_nll = 0;               // mean NLL on the evaluation slice
  double eval_ppl = 0;               // exp(eval_nll)
  double relative_ppl_increase = 0;  // d = eval_ppl / full-precision eval_ppl - 1
  int64_t tokens = 0;                // tokens predicted over both slices (0 = not counted)
  double seconds = 0;                // wall time of the measurement (0 = not timed)
  bool cached = false;               // answered from a cache of identical plans
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_EVALUATION_H_
