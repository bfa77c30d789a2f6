// The search baseline: what measuring many plans buys without any learning,
// the control the RL plan is compared with at equal cost. A (1+1) local
// search over plans: it starts from the Lagrangian plan of the unit table
// (quant::LagrangePlan) and repeats
//   propose: move k units (k uniform in [1, max_moves], distinct units) each one
//            step up or down (to the next more or less expensive action of the
//            unit, each with probability 1/2); then, while the plan is over the
//            budget, move a random other unit that is above its cheapest action
//            one step down (to its most expensive strictly cheaper action), so
//            every proposal is within the target by construction (a proposal
//            that cannot be repaired is dropped unmeasured);
//   measure: its perplexity on the selection slice (the caller's `measure`,
//            the same slice and protocol the RL run's episodes are rewarded on);
//   accept:  when strictly lower than the incumbent's,
// until `evaluations` distinct plans were measured (the start plan counts; a
// plan proposed again is answered from memory and does not count). That is the
// count of real evaluations, so a search given the RL run's count (cache
// misses, its reference plan included) spends exactly as many.
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_SEARCH_BASELINE_H_
#define WINDQUANT_JOB_SEARCH_BASELINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quant/unit_table.h"

namespace windquant::job {

struct SearchOptions {
  double target_bits = 2.0;  // the budget (effective bits, <=)
  int64_t evaluations = 0;   // distinct plans to measure, the start plan included (>= 1)
  uint64_t seed = 0;         // proposals
  int max_moves = 4;         // units moved per proposal: uniform in [1, max_moves]
};

struct SearchResult {
  std::vector<int> actions;        // the best plan measured (lowest perplexity)
  double selection_ppl = 0;        // its measured perplexity
  double start_ppl = 0;            // the Lagrangian start plan's
  int64_t evaluations = 0;         // distinct plans measured (= options.evaluations unless the
                                   // proposals ran out, see proposals)
  int64_t accepted = 0;            // proposals that became the incumbent
  int64_t repeats = 0;             // proposals answered from memory (not measured, not counted)
  int64_t proposals = 0;           // all proposals, including dropped and repeated ones
  std::vector<double> best_after;  // incumbent perplexity after each measurement
};

// A plan's perplexity on the selection slice (lower is better).
using PlanMeasure = std::function<absl::StatusOr<double>(const std::vector<int>& actions)>;

// INVALID_ARGUMENT naming --evals for evaluations < 1 or --bits for a target
// below the table's cheapest plan; `measure`'s errors.
absl::StatusOr<SearchResult> SearchPlan(const quant::UnitTable& table, const SearchOptions& options,
                                        const PlanMeasure& measure);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_SEARCH_BASELINE_H_
