// The searches of a distributed run's final report (learner/final_rows.h):
// the search with restarts and the same search screened by the reward model
// RL uses (job/search_baseline.h, the rows of `windquant quantize`), each
// given the RL run's count of real plan evaluations and measuring every
// proposal through `measure` on the selection slice (the learner's
// Evaluator.EvaluatePlan), as quantize measures them through its session.
// Memory: the searches' measured plans (one int per unit each).
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_FINAL_SEARCHES_H_
#define WINDQUANT_JOB_FINAL_SEARCHES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/plan/unit_table.h"
#include "learner/final_rows.h"

namespace windquant::job {

// "search" then "screened-search" at `target_bits` (ProductSearchOptions with
// `seed`; the screened one screens ScreenedSearchScreen(rl_screen_samples)
// proposals per measurement), each with max(1, rl_evaluations) real
// evaluations. SearchPlan's errors and `measure`'s.
absl::StatusOr<std::vector<learner::FinalSearch>> RunFinalSearches(
    const plan::UnitTable& table, double target_bits, uint64_t seed, int64_t rl_evaluations,
    int rl_screen_samples, const learner::PlanMeasurer& measure, const base::LogSink& log);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_FINAL_SEARCHES_H_
