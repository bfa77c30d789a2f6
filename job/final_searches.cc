#include "job/final_searches.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "job/bisection_baseline.h"

namespace windquant::job {

absl::StatusOr<std::vector<learner::FinalSearch>> RunFinalSearches(
    const plan::UnitTable& table, double target_bits, uint64_t seed, int64_t rl_evaluations,
    int rl_screen_samples, const learner::PlanMeasurer& measure, const base::LogSink& log) {
  const PlanMeasure on_selection = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(learner::TextMeasurement m,
                        measure(actions, learner::PlanText::kSelection));
    return m.perplexity;
  };
  std::vector<learner::FinalSearch> out;
  for (const int screen : {0, ScreenedSearchScreen(rl_screen_samples)}) {
    WQ_ASSIGN_OR_RETURN(SearchResult r, RunProductSearch(table, target_bits, seed, rl_evaluations,
                                                         screen, on_selection, log, "finish"));
    out.push_back({ProductSearchName(screen), seed, std::move(r)});
  }
  return out;
}

PlanMeasure SelectionRatio(const plan::UnitTable& table, const learner::PlanMeasurer& measure,
                           const base::LogSink& log, const std::string& what) {
  return [&table, measure, log, what,
          plans = 0](const std::vector<int>& actions) mutable -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(const learner::TextMeasurement m,
                        measure(actions, learner::PlanText::kSelection));
    if (log) {
      log(absl::StrFormat("%s: plan %d at %.4f bits, d %.4f", what, ++plans,
                          table.EffectiveBits(actions), m.degradation));
    }
    return 1.0 + m.degradation;
  };
}

absl::StatusOr<std::vector<learner::FinalBisection>> RunFinalBisections(
    const plan::UnitTable& table, double cap_bits, double max_ppl_increase, uint64_t seed,
    int64_t rl_evaluations, int rl_screen_samples, const learner::PlanMeasurer& measure,
    const base::LogSink& log) {
  const PlanMeasure ratio = SelectionRatio(table, measure, nullptr, "");
  std::vector<learner::FinalBisection> out(2);
  out[0].name = "lagrange-bisect";
  WQ_ASSIGN_OR_RETURN(out[0].result, LagrangeBisect(table, cap_bits, max_ppl_increase,
                                                    kStartBisectEvaluations, 1.0, ratio, log));
  out[1].name = "screened-bisect";
  WQ_ASSIGN_OR_RETURN(out[1].result,
                      ScreenedBisect(table, cap_bits, max_ppl_increase, rl_evaluations, 1.0, seed,
                                     ScreenedSearchScreen(rl_screen_samples), ratio, log));
  return out;
}

}  // namespace windquant::job
