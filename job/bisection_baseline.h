// The bisection baselines of the quality-target mode (issue 36 item 2): what a
// user without RL would do to find the fewest bits within epsilon, given the
// same count N of real evaluations as the RL run. Bits b are bisected in
// [lowest reachable bits of the table, cap]: at each b a method builds its
// plan within b (a probe), the plan is measured on the selection slice, and
//   d <= epsilon: the upper end moves down to the plan's bits (<= b);
//   else:         the lower end moves up to b;
// until the N evaluations are spent or the bracket is narrower than the
// table's smallest bit step (SmallestBitStep). The result is the best probe
// under rl::QualityTargetBetter (the fewest bits within epsilon, else the
// least degraded), the order RL's returned plan follows.
// Two probes (the report's rows):
//   "lagrange-bisect": the Lagrangian plan at b (search::LagrangePlan, the
//      "lagrange" row's builder), one evaluation per distinct plan (a plan
//      built again at another b is answered from memory, free);
//   "screened-bisect": the screened search at b (RunProductSearch, screened,
//      from the Lagrangian plan at b); it spends evaluations itself, so N is
//      split over kScreenedBisectSteps probes of ceil(N / kScreenedBisectSteps)
//      evaluations each (the last one gets what is left).
// Both assume d falls as b grows (true of the Lagrangian plans up to the
// proxy's misrankings; a violation costs optimality, never the budget).
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_BISECTION_BASELINE_H_
#define WINDQUANT_JOB_BISECTION_BASELINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/plan/unit_table.h"
#include "common/search/bisection_result.h"
#include "job/search_baseline.h"

namespace windquant::job {

// The screened bisection's split of N: this many probes (fewer when N is smaller).
inline constexpr int64_t kScreenedBisectSteps = 4;

// A method's plan within `target_bits` and its d on the selection slice.
struct BisectionProbe {
  std::vector<int> actions;
  double bits = 0;          // effective bits of `actions` (<= the probe's target)
  double degradation = 0;   // selection perplexity / FP's - 1
  int64_t evaluations = 0;  // real evaluations spent (0: answered from memory)
  int64_t screened = 0;     // proposals the reward model ranked and left unmeasured
};

// Builds and measures the plan at `target_bits` with at most `evaluations`
// real evaluations (>= 1).
using BisectionProber =
    std::function<absl::StatusOr<BisectionProbe>(double target_bits, int64_t evaluations)>;

struct BisectionOptions {
  double low_bits = 0;          // the lowest reachable bits (search::MinEffectiveBits)
  double cap_bits = 0;          // the upper end (the mode's cap), > low_bits
  double max_ppl_increase = 0;  // epsilon, > 0
  int64_t evaluations = 0;      // N, the total budget (>= 1)
  int64_t per_probe = 1;        // evaluations given to each probe (>= 1)
  double min_step_bits = 0;     // stop when the bracket is narrower (> 0)
};

using search::BisectionResult;
using search::BisectionStep;

// INVALID_ARGUMENT for options out of range; INTERNAL when a probe spends more
// than it was given; the prober's errors.
absl::StatusOr<BisectionResult> BisectBits(const BisectionOptions& options,
                                           const BisectionProber& probe);

// The smallest change of effective bits one unit's action change makes
// (smallest positive difference of a unit's bits over the table's weights).
double SmallestBitStep(const plan::UnitTable& table);

// The rows above over `table` under `cap_bits`, each measuring through
// `measure` (perplexity on the selection slice) against `fp_selection_ppl`,
// with N = max(1, rl_evaluations); a line per row to `log`. The baselines' and
// the search's errors and `measure`'s.
absl::StatusOr<BisectionResult> LagrangeBisect(const plan::UnitTable& table, double cap_bits,
                                               double max_ppl_increase, int64_t rl_evaluations,
                                               double fp_selection_ppl, const PlanMeasure& measure,
                                               const base::LogSink& log);
// The quality-target mode's start (learner/run_start.h, docs/lagrange.md) is
// LagrangeBisect under the run's cap with this budget, which the table's bit
// step ends long before (job/learner_options.h RunStartOf).
inline constexpr int64_t kStartBisectEvaluations = 64;
// ScreenedBisect's probes screen `screen` (> 1, else INVALID_ARGUMENT) proposals per measurement
// (ScreenedSearchScreen of RL's training.screen_samples).
absl::StatusOr<BisectionResult> ScreenedBisect(const plan::UnitTable& table, double cap_bits,
                                               double max_ppl_increase, int64_t rl_evaluations,
                                               double fp_selection_ppl, uint64_t seed, int screen,
                                               const PlanMeasure& measure,
                                               const base::LogSink& log);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_BISECTION_BASELINE_H_
