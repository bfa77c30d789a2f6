#include "common/search/bisection_result.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "common/search/search_result.h"

namespace windquant::search {

nlohmann::json BisectionRowJson(const BisectionResult& b, int64_t rl_evaluations,
                                int64_t tokens_per_evaluation) {
  using nlohmann::json;
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json steps = json::array();
  for (const BisectionStep& s : b.steps) {
    steps.push_back({{"target_bits", s.target_bits},
                     {"bits", s.bits},
                     {"selection_degradation", num(s.degradation)},
                     {"evaluations", s.evaluations}});
  }
  return {{"evaluations", b.evaluations},
          {"rl_evaluations", rl_evaluations},
          {"evaluations_per_probe", b.per_probe},
          {"bits", b.bits},
          {"selection_degradation", num(b.degradation)},
          {"within_epsilon", b.within_epsilon},
          {"steps", steps},
          {"cost", EvaluationCostJson(b.evaluations, tokens_per_evaluation,
                                      ScoredPerEvaluation(b.evaluations, b.screened))}};
}

std::string BisectionNote(const std::string& row_name, const BisectionResult& b, double cap_bits,
                          int64_t rl_evaluations) {
  return absl::StrFormat(
      "%s: bisection of the bits in [lowest reachable, %g] to epsilon with %s at each "
      "probe; %d probes, %d real evaluations (RL: %d), %.4f bits, d %.4f on the selection "
      "slice (%s).",
      row_name, cap_bits,
      row_name == "lagrange-bisect"
          ? "the Lagrangian plan"
          : absl::StrFormat("a screened search of %d evaluations", b.per_probe),
      b.steps.size(), b.evaluations, rl_evaluations, b.bits, b.degradation,
      b.within_epsilon ? "within epsilon" : "NOT within epsilon");
}

}  // namespace windquant::search
