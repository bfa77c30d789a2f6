// The final measurements of the quantize job: each plan's perplexity on the
// selection slice, the held-out part and the whole text (EvaluationSlices),
// and the winner among the plans at the target.
// Thread-compatible (the evaluator changes its model's weights).
#ifndef WINDQUANT_JOB_PLAN_MEASUREMENT_H_
#define WINDQUANT_JOB_PLAN_MEASUREMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/rl/local_plan_evaluator.h"
#include "job/evaluation_slices.h"

namespace windquant::job {

// Plans within this many bits above the target compete for the winner.
inline constexpr double kSameBitsTolerance = 0.01;

struct MeasuredPlan {
  std::string name;          // "fp", "rl", "uniform-2", "greedy", ...
  std::vector<int> actions;  // empty = full precision
  double bits = 0;           // effective bits (16 for fp)
  double selection_ppl = 0, whole_ppl = 0, heldout_ppl = 0;  // heldout_ppl 0 without one
};

// Whether the held-out part has at least one window of `context` tokens.
bool HasHeldOut(const EvaluationSlices& slices, int64_t context);

// Fills the perplexities of `plan` (whole = selection + held-out windows,
// token-weighted). The evaluator's errors.
absl::Status MeasurePlan(rl::LocalPlanEvaluator& evaluator, const EvaluationSlices& slices,
                         bool have_heldout, MeasuredPlan* plan);

// Lowest held-out perplexity (whole text when there is no held-out part)
// among `plans` within kSameBitsTolerance above `target_bits`; "" when none.
// Ties go to the later plan, so a baseline listed after the RL plan wins a tie
// (e.g. RL returning the Lagrangian plan is not an RL win).
std::string PickWinner(const std::vector<MeasuredPlan>& plans, double target_bits,
                       bool have_heldout);

// The plan quantize returns: the lowest selection-slice perplexity among the
// plans named in `candidates` (each a method that chose its plan on the
// selection slice: "rl", "search", "screened-search") whose bits are within
// `target_bits` (relative slack 1e-9 for sums in another order); ties go to
// the earlier candidate. Returns the index into `plans`, -1 when none.
// In the quality-target mode (`max_ppl_increase` > 0, with the FP model's
// selection perplexity `fp_selection_ppl`) the order is rl::QualityTargetBetter's
// on the selection slice's d = selection_ppl / fp_selection_ppl - 1: the fewest
// bits within epsilon, else the least degraded.
int PickReturned(const std::vector<MeasuredPlan>& plans, const std::vector<std::string>& candidates,
                 double target_bits, double max_ppl_increase = 0, double fp_selection_ppl = 0);

// d = selection_ppl / fp_selection_ppl - 1 of a measured plan (NaN when unknown).
double SelectionDegradation(const MeasuredPlan& plan, double fp_selection_ppl);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_PLAN_MEASUREMENT_H_
