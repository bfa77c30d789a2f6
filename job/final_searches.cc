#include "job/final_searches.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "job/search_baseline.h"

namespace windquant::job {

absl::StatusOr<std::vector<learner::FinalSearch>> RunFinalSearches(
    const quant::UnitTable& table, double target_bits, uint64_t seed, int64_t rl_evaluations,
    const learner::PlanMeasurer& measure, const base::LogSink& log) {
  std::vector<learner::FinalSearch> out;
  for (const bool screened : {false, true}) {
    const SearchOptions so =
        ProductSearchOptions(target_bits, std::max<int64_t>(1, rl_evaluations), seed, screened);
    const char* name = screened ? "screened-search" : "search";
    base::Progress progress(name, static_cast<double>(so.evaluations), "plans");
    int64_t measured = 0;
    const PlanMeasure on_selection =
        [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
      WQ_ASSIGN_OR_RETURN(learner::TextMeasurement m,
                          measure(actions, learner::PlanText::kSelection));
      progress.Update(static_cast<double>(++measured));
      return m.perplexity;
    };
    WQ_ASSIGN_OR_RETURN(SearchResult r, SearchPlan(table, so, on_selection));
    progress.Finish(absl::StrFormat("best %.4f (start %.4f)", r.selection_ppl, r.start_ppl));
    if (log) {
      log(absl::StrFormat(
          "finish: %s: %d plans measured by the evaluator (RL: %d), %d accepted, %d restarts, "
          "selection PPL %.4f -> %.4f",
          name, r.evaluations, rl_evaluations, r.accepted, r.restarts, r.start_ppl,
          r.selection_ppl));
    }
    learner::FinalSearch s;
    s.name = name;
    s.actions = std::move(r.actions);
    s.selection_ppl = r.selection_ppl;
    s.start_selection_ppl = r.start_ppl;
    s.evaluations = r.evaluations;
    s.accepted = r.accepted;
    s.restarts = r.restarts;
    s.repeats = r.repeats;
    s.proposals = r.proposals;
    s.screened = r.screened;
    s.seed = seed;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace windquant::job
