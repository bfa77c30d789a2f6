// The non-RL plans of DESIGN.md section 3 by name, from one unit table:
// `windquant baseline` builds one, `windquant quantize` measures every one at
// its final target beside the RL plan.
// Thread-safe (pure functions of the table).
#ifndef WINDQUANT_JOB_BASELINE_PLANS_H_
#define WINDQUANT_JOB_BASELINE_PLANS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/action.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "job/search_baseline.h"

namespace windquant::job {

struct BaselineSpec {
  std::string method;  // uniform | greedy | lagrange | random | search | measured
  double bits = 0;     // budget (greedy, lagrange, random), > 0
  plan::Action action = plan::Action::k4;       // uniform
  uint64_t seed = 0;                            // random, search
  int64_t evals = 0;                            // search: plans to measure (>= 1)
  int64_t restart_after = kSearchRestartAfter;  // search: restart after R stale (0: never)
  int screen = 0;  // search: > 1 screens this many proposals per measurement
  int rounds = 2;  // measured: linearisations of the measured proxy (measured_proxy.h), >= 1
};

// INVALID_ARGUMENT naming --method for an unknown method, --bits for a
// budget <= 0 (greedy, lagrange, random, search) or --evals for a search
// without a positive count, --rounds < 1 for measured; the baselines' own errors.
// BaselinePlan builds every method but search and measured, which measure plans
// (search_baseline.h: SearchPlan; measured_proxy.h: MeasureProxy).
absl::Status ValidateBaselineSpec(const BaselineSpec& spec);
absl::StatusOr<plan::Plan> BaselinePlan(const plan::UnitTable& table, const BaselineSpec& spec);

// Every baseline at `target_bits`, named as the quantize report names them:
// "uniform-<action>" twice: the uniform action with the most bits within the target
// and the one with the fewest above it (over the budget: a reference at its own bits,
// never a contender), then "greedy", "lagrange", "random" (`seed`).
absl::StatusOr<std::vector<std::pair<std::string, plan::Plan>>> BaselinesAt(
    const plan::UnitTable& table, double target_bits, uint64_t seed);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_BASELINE_PLANS_H_
