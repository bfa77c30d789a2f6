#include "common/search/search_result.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace windquant::search {

nlohmann::json SearchRowJson(const SearchResult& r, int64_t rl_evaluations, uint64_t seed,
                             int64_t tokens_per_evaluation) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  return {{"evaluations", r.evaluations},
          {"rl_evaluations", rl_evaluations},
          {"accepted", r.accepted},
          {"restarts", r.restarts},
          {"repeats", r.repeats},
          {"proposals", r.proposals},
          {"screen", r.screen},
          {"screened", r.screened},
          {"start_selection_ppl", num(r.start_ppl)},
          {"selection_ppl", num(r.selection_ppl)},
          {"seed", seed},
          {"cost", EvaluationCostJson(r.evaluations, tokens_per_evaluation,
                                      ScoredPerEvaluation(r.evaluations, r.screened))}};
}

double ScoredPerEvaluation(int64_t evaluations, int64_t screened) {
  return evaluations > 0
             ? static_cast<double>(evaluations + screened) / static_cast<double>(evaluations)
             : 0.0;
}

nlohmann::json EvaluationCostJson(int64_t evaluations, int64_t tokens_per_evaluation,
                                  double scored_per_evaluation) {
  return {{"real_evaluations", evaluations},
          {"tokens_per_evaluation", tokens_per_evaluation},
          {"tokens_read", evaluations * tokens_per_evaluation},
          {"scored_per_evaluation", scored_per_evaluation}};
}

std::string SearchRowKey(const std::string& row_name) {
  std::string key = row_name;
  for (char& c : key) {
    if (c == '-') c = '_';
  }
  return key;
}

}  // namespace windquant::search
