#include "job/final_searches.h"

#include <utility>

#include "common/base/status_macros.h"
#include "job/search_baseline.h"

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

}  // namespace windquant::job
