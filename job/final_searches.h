// The searches of a distributed run's final report (learner/final_rows.h):
// the search with restarts and the same search screened by the reward model
// RL uses (job/search_baseline.h, the rows of `windquant quantize`), each
// given the RL run's count of real plan evaluations and measuring every
// proposal through `measure` on the selection slice (the learner's
// Evaluator.EvaluatePlan), as quantize measures them through its session;
// in the quality-target mode also the bisections of bits to epsilon
// (job/bisection_baseline.h, quantize's "lagrange-bisect" and "screened-bisect").
// Memory: the searches' measured plans (one int per unit each).
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_FINAL_SEARCHES_H_
#define WINDQUANT_JOB_FINAL_SEARCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/plan/unit_table.h"
#include "job/search_baseline.h"
#include "learner/final_rows.h"

namespace windquant::job {

// "search" then "screened-search" at `target_bits` (ProductSearchOptions with
// `seed`; the screened one screens ScreenedSearchScreen(rl_screen_samples)
// proposals per measurement), each with max(1, rl_evaluations) real
// evaluations. SearchPlan's errors and `measure`'s.
absl::StatusOr<std::vector<learner::FinalSearch>> RunFinalSearches(
    const plan::UnitTable& table, double target_bits, uint64_t seed, int64_t rl_evaluations,
    int rl_screen_samples, const learner::PlanMeasurer& measure, const base::LogSink& log);

// `measure` on the selection slice as a ratio to FP's perplexity (1 + the
// evaluator's d): a bisection's measure with fp_selection_ppl 1. Each plan
// measured is logged ("<what>: plan N at B bits, d D") when `log` is set.
// `table` must outlive the returned function.
PlanMeasure SelectionRatio(const plan::UnitTable& table, const learner::PlanMeasurer& measure,
                           const base::LogSink& log, const std::string& what);

// "lagrange-bisect" then "screened-bisect" under `cap_bits` to
// `max_ppl_increase`, as quantize runs them: the first is the quality-target
// start's search (LagrangeBisect with kStartBisectEvaluations; its plans were
// measured for the start, so the evaluator answers them from its cache), the
// second ScreenedBisect with max(1, rl_evaluations) real evaluations, seed
// `seed`, screening ScreenedSearchScreen(rl_screen_samples). The bisections'
// errors and `measure`'s.
absl::StatusOr<std::vector<learner::FinalBisection>> RunFinalBisections(
    const plan::UnitTable& table, double cap_bits, double max_ppl_increase, uint64_t seed,
    int64_t rl_evaluations, int rl_screen_samples, const learner::PlanMeasurer& measure,
    const base::LogSink& log);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_FINAL_SEARCHES_H_
