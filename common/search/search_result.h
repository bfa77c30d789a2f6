// SearchResult: what the search baseline (job/search_baseline.h SearchPlan)
// returns, and its row in a report.json (`windquant quantize`'s and the
// distributed learner's, one writer). Torch-free; a plain value.
#ifndef WINDQUANT_COMMON_SEARCH_SEARCH_RESULT_H_
#define WINDQUANT_COMMON_SEARCH_SEARCH_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace windquant::search {

struct SearchResult {
  std::vector<int> actions;        // the best plan measured (lowest perplexity)
  double selection_ppl = 0;        // its measured perplexity
  double start_ppl = 0;            // the Lagrangian start plan's
  int64_t evaluations = 0;         // distinct plans measured (= options.evaluations unless the
                                   // proposals ran out, see proposals)
  int64_t accepted = 0;            // proposals that became the incumbent
  int64_t repeats = 0;             // proposals answered from memory (not measured, not counted)
  int64_t proposals = 0;           // all proposals, including dropped and repeated ones
  int64_t restarts = 0;            // kicks measured (restart_after)
  int64_t screened = 0;            // proposals ranked by the reward model (screen), unmeasured
  int screen = 0;                  // proposals screened per measurement (0: no screening)
  std::vector<double> best_after;  // incumbent perplexity after each measurement
};

// The report's "search" / "screened_search" object: the counters, the start
// and best selection perplexities (null when not finite), the RL run's count
// of real evaluations it was given, its seed, and what its evaluations cost:
// `tokens_per_evaluation` (the selection slice's tokens) and the tokens read
// in all, the screen and the samples the reward model scored per real
// evaluation (EvaluationCostJson).
nlohmann::json SearchRowJson(const SearchResult& r, int64_t rl_evaluations, uint64_t seed,
                             int64_t tokens_per_evaluation);

// What a method's real evaluations cost, as every report row states it
// (issue 36: comparisons at the same budget): evaluations, tokens each read
// and in all, and the samples the reward model scored per real evaluation
// (the measured one included; 1 without screening).
nlohmann::json EvaluationCostJson(int64_t evaluations, int64_t tokens_per_evaluation,
                                  double scored_per_evaluation);

// (evaluations + screened) / evaluations: the proposals scored per real
// evaluation of a (screened) search; 0 with no evaluations.
double ScoredPerEvaluation(int64_t evaluations, int64_t screened);

// The report.json key of a search row named `row_name` in plans[] ("search",
// "screened-search"): "search", "screened_search".
std::string SearchRowKey(const std::string& row_name);

}  // namespace windquant::search

#endif  // WINDQUANT_COMMON_SEARCH_SEARCH_RESULT_H_
