// The search baseline: what measuring many plans buys without any learning,
// the control the RL plan is compared with at equal cost. A (1+1) local
// search over plans: it starts from the Lagrangian plan of the unit table
// (search::LagrangePlan) and repeats
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
// Restarts (restart_after = R > 0): a (1+1) search stuck on a local optimum
// spends the rest of its budget on neighbours of one plan; after R measured
// proposals in a row that did not beat the incumbent, the next proposal is a
// kick: the best plan so far with exactly kick_moves units moved (then
// repaired), which becomes the incumbent whatever it measures (the best plan
// is kept apart and returned).
// Screening (screen = K > 1): each proposal is the one of K distinct,
// not yet measured proposals that a reward model of the plans measured so far
// (rl::RewardModelFitter, the model RL's actors screen with) predicts best; the
// first one while the model has too few plans. Only the chosen one is
// measured, so the budget of real evaluations is the same.
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_SEARCH_BASELINE_H_
#define WINDQUANT_JOB_SEARCH_BASELINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/plan/unit_table.h"
#include "common/search/search_result.h"

namespace windquant::job {

struct SearchOptions {
  double target_bits = 2.0;  // the budget (effective bits, <=)
  int64_t evaluations = 0;   // distinct plans to measure, the start plan included (>= 1)
  uint64_t seed = 0;         // proposals
  int max_moves = 4;         // units moved per proposal: uniform in [1, max_moves]
  // > 0: restart from a kick of the best plan after this many measured
  // proposals in a row that did not improve the incumbent; 0: never.
  int64_t restart_after = 0;
  int kick_moves = 0;  // units moved by a kick; 0 = 2 x max_moves
  int screen = 0;      // > 1: the best-predicted of this many proposals is measured
};

// The product's search rows (quantize's report, the distributed run's, the
// bisections): "search" (screen 0) restarts after kSearchRestartAfter stale
// proposals; "screened-search" (screen > 1) also measures the best-predicted of
// `screen` proposals each time.
inline constexpr int64_t kSearchRestartAfter = 16;
inline SearchOptions ProductSearchOptions(double target_bits, int64_t evaluations, uint64_t seed,
                                          int screen) {
  SearchOptions o;
  o.target_bits = target_bits;
  o.evaluations = evaluations;
  o.seed = seed;
  o.restart_after = kSearchRestartAfter;
  o.screen = screen;
  return o;
}

// The screened search's screen beside an RL run whose actors draw
// `rl_screen_samples` samples per episode they send (training.screen_samples):
// the same count of reward-model-scored samples per real evaluation, so the
// two spend the same screening budget; kSearchScreen when RL does not screen.
inline constexpr int kSearchScreen = 32;
inline int ScreenedSearchScreen(int rl_screen_samples) {
  return rl_screen_samples > 1 ? rl_screen_samples : kSearchScreen;
}

using search::SearchResult;

// A plan's perplexity on the selection slice (lower is better).
using PlanMeasure = std::function<absl::StatusOr<double>(const std::vector<int>& actions)>;

// INVALID_ARGUMENT naming --evals for evaluations < 1, --bits for a target
// below the table's cheapest plan, --restart-after or --screen for negative
// values; `measure`'s errors.
absl::StatusOr<SearchResult> SearchPlan(const plan::UnitTable& table, const SearchOptions& options,
                                        const PlanMeasure& measure);

// SearchPlan with a progress line (named `name`) over the plans measured.
absl::StatusOr<SearchResult> SearchWithProgress(const plan::UnitTable& table,
                                                const SearchOptions& options, const char* name,
                                                const PlanMeasure& measure);

// A product search row, "search" (screen 0) or "screened-search" (screen > 1):
// ProductSearchOptions with max(1, rl_evaluations) real evaluations, with a
// progress line and one summary line to `log` (when set) that starts "who: ".
const char* ProductSearchName(int screen);
absl::StatusOr<SearchResult> RunProductSearch(const plan::UnitTable& table, double target_bits,
                                              uint64_t seed, int64_t rl_evaluations, int screen,
                                              const PlanMeasure& measure, const base::LogSink& log,
                                              const char* who);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_SEARCH_BASELINE_H_
